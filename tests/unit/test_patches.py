"""Patches: metadata, applicability, and application against the REAL upstream files from PyPI.

Each test unpacks the real distribution at a version the patch targets and runs the same in-image script
(rocmstack/incontext/apply_patches.py) a build runs; a mutated target must fail naming the patch id.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest

from rocmstack.errors import InputError, RecipeError
from rocmstack.patches import Patch, applicability, load_patches, select
from rocmstack.recipe.load import load_recipe
from rocmstack.recipe.model import Component
from tests.conftest import pypi_download, unpack_wheel

ROOT = Path(__file__).resolve().parents[2]
APPLY = ROOT / "rocmstack" / "incontext" / "apply_patches.py"
PATCHES = load_patches()
REQUIRED = {
    "rtld-local",
    "sglang-rmsnorm",
    "sglang-qwen3-asr",
    "verl-rollout-defaults",
    "libz3-soname",
    "amdsmi-install",
}


def apply(spec: dict, site: Path, state: Path, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    spec_file = state / f"{spec['id']}.json"
    state.mkdir(parents=True, exist_ok=True)
    spec_file.write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": str(site), "ROCMSTACK_ROOT": str(state), **(extra_env or {})}
    return subprocess.run(
        [sys.executable, str(APPLY), str(spec_file)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=state,
    )


def test_required_patches_ship_with_complete_metadata():
    assert set(PATCHES) >= REQUIRED
    for patch in PATCHES.values():
        assert patch.upstream and patch.drop_when and patch.why and patch.summary


@pytest.mark.parametrize(
    ("pid", "requirement"),
    [
        ("sglang-rmsnorm", "sglang==0.5.19"),
        ("sglang-rmsnorm", "sglang==0.5.23"),
        ("sglang-qwen3-asr", "sglang==0.5.19"),
        ("verl-rollout-defaults", "verl==0.9.0"),
        ("verl-rollout-defaults", "verl==0.7.1"),
    ],
)
def test_edit_patch_applies_to_real_upstream_file(tmp_path, pid, requirement):
    patch = PATCHES[pid]
    site = unpack_wheel(requirement, tmp_path / "site")
    target = site / patch.target.module / patch.target.path
    original = target.read_text()
    proc = apply(patch.spec(), site, tmp_path / "state")
    assert proc.returncode == 0, proc.stderr
    patched = target.read_text()
    for edit in patch.edits:
        assert edit.find not in patched and edit.replace in patched
    assert patched != original
    marker = json.loads((tmp_path / "state" / "patches" / "applied" / f"{pid}.json").read_text())
    assert marker["id"] == pid and marker["component"] == patch.component
    # Applying twice is loud too: the fix is already there.
    again = apply(patch.spec(), site, tmp_path / "state2")
    assert again.returncode == 3 and f"[{pid}]" in again.stderr and "drop the patch" in again.stderr


def test_sglang_rmsnorm_result_is_valid_python(tmp_path):
    import ast

    site = unpack_wheel("sglang==0.5.19", tmp_path / "site")
    assert apply(PATCHES["sglang-rmsnorm"].spec(), site, tmp_path / "s").returncode == 0
    tree = ast.parse((site / "sglang/srt/layers/layernorm.py").read_text())
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "fused_add_rms_norm"
    ]
    assert sum(len(c.args) == 4 for c in calls) == 2  # both HIP paths now use vLLM's 4-arg form


def test_verl_rollout_defaults_yaml_means_what_it_says(tmp_path):
    import yaml

    site = unpack_wheel("verl==0.9.0", tmp_path / "site")
    assert apply(PATCHES["verl-rollout-defaults"].spec(), site, tmp_path / "s").returncode == 0
    data = yaml.safe_load((site / "verl/trainer/config/rollout/rollout.yaml").read_text())
    assert data["engine_kwargs"]["vllm"] == {"disable_custom_all_reduce": True}
    assert data["engine_kwargs"]["sglang"] == {
        "disable_custom_all_reduce": True,
        "attention_backend": "triton",
    }


@pytest.mark.parametrize(
    ("pid", "requirement"),
    [
        ("sglang-rmsnorm", "sglang==0.5.19"),
        ("sglang-qwen3-asr", "sglang==0.5.19"),
        ("verl-rollout-defaults", "verl==0.9.0"),
    ],
)
def test_mutated_target_fails_naming_the_patch(tmp_path, pid, requirement):
    patch = PATCHES[pid]
    site = unpack_wheel(requirement, tmp_path / "site")
    target = site / patch.target.module / patch.target.path
    find = patch.edits[0].find
    half = len(find) // 2
    # Upstream reformatted the matched text: the patch must fail instead of silently not matching.
    target.write_text(target.read_text().replace(find, find[:half] + " " + find[half:], 1))
    proc = apply(patch.spec(), site, tmp_path / "state")
    assert proc.returncode == 3
    assert f"[{pid}]" in proc.stderr and "expected 1 match(es)" in proc.stderr and "found 0" in proc.stderr
    assert not (tmp_path / "state" / "patches" / "applied" / f"{pid}.json").exists()


def test_qwen3_asr_patch_is_not_needed_from_0_5_20(tmp_path):
    site = unpack_wheel("sglang==0.5.20", tmp_path / "site")
    proc = apply(PATCHES["sglang-qwen3-asr"].spec(), site, tmp_path / "state")
    assert proc.returncode == 3 and "drop the patch" in proc.stderr


def test_rtld_local_on_therock_preload_signatures(tmp_path):
    # TheRock's rocm_sdk is not on PyPI; this reproduces the two parameter defaults the patch targets
    # (ROCm/TheRock build_tools/packaging/python/templates/rocm/src/rocm_sdk/__init__.py).
    pkg = tmp_path / "site" / "rocm_sdk"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "import ctypes\n"
        "def preload_libraries(*shortnames: str, rtld_global: bool = True):\n"
        "    mode = ctypes.RTLD_GLOBAL if rtld_global is True else ctypes.RTLD_LOCAL\n"
        "    return mode\n"
        "def initialize_process(\n    *,\n    preload_shortnames=None,\n    rtld_global: bool = True,\n):\n"
        "    return preload_libraries(rtld_global=rtld_global)\n"
    )
    proc = apply(PATCHES["rtld-local"].spec(), tmp_path / "site", tmp_path / "state")
    assert proc.returncode == 0, proc.stderr
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            "import ctypes, rocm_sdk; assert rocm_sdk.initialize_process() == ctypes.RTLD_LOCAL",
        ],
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr


def test_libz3_soname_links_the_real_wheel_library(tmp_path):
    site = unpack_wheel("z3-solver==4.15.4.0", tmp_path / "site")
    spec = PATCHES["libz3-soname"].spec()
    spec["symlink"] = {
        **spec["symlink"],
        "link": str(tmp_path / "syslib" / "libz3.so.4.15"),
        "ldconfig": False,
    }
    proc = apply(spec, site, tmp_path / "state")
    assert proc.returncode == 0, proc.stderr
    link = tmp_path / "syslib" / "libz3.so.4.15"
    assert link.is_symlink() and link.resolve() == (site / "z3/lib/libz3.so.4.15").resolve()
    # A z3 wheel with another soname (4.16) must fail instead of leaving a dangling link like `ln -sf`.
    site16 = unpack_wheel("z3-solver==4.16.0.0", tmp_path / "site16")
    spec["symlink"]["link"] = str(tmp_path / "syslib16" / "libz3.so.4.15")
    bad = apply(spec, site16, tmp_path / "state16")
    assert bad.returncode == 3 and "[libz3-soname] expected exactly one file" in bad.stderr


def test_amdsmi_install_from_sdk_layout(tmp_path):
    # The SDK's share/amd_smi is an installable source tree; PyPI's amdsmi sdist is that same tree.
    site = tmp_path / "site"
    sdk = site / "_rocm_sdk_core"
    (sdk / "share").mkdir(parents=True)
    (sdk / "__init__.py").write_text("")
    with tarfile.open(pypi_download("amdsmi==7.0.2", sdist=True)) as tf:
        tf.extractall(sdk / "share", filter="data")
    (sdk / "share" / "amdsmi-7.0.2").rename(sdk / "share" / "amd_smi")
    # pip installs into the running interpreter, as in the image: give it a throw-away venv.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    spec_file = tmp_path / "amdsmi-install.json"
    spec_file.write_text(json.dumps(PATCHES["amdsmi-install"].spec()))
    proc = subprocess.run(
        [str(venv / "bin" / "python"), str(APPLY), str(spec_file)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(site), "ROCMSTACK_ROOT": str(tmp_path / "state")},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert list(venv.glob("lib/python*/site-packages/amdsmi/amdsmi_interface.py"))
    empty = tmp_path / "empty"
    (empty / "_rocm_sdk_core" / "share" / "amd_smi").mkdir(parents=True)
    (empty / "_rocm_sdk_core" / "__init__.py").write_text("")
    bad = apply(PATCHES["amdsmi-install"].spec(), empty, tmp_path / "state2")
    assert bad.returncode == 3 and "[amdsmi-install]" in bad.stderr and "SDK layout changed" in bad.stderr


def test_missing_module_is_named(tmp_path):
    proc = apply(PATCHES["sglang-rmsnorm"].spec(), tmp_path, tmp_path / "state")
    assert proc.returncode == 3 and "[sglang-rmsnorm] python module 'sglang' is not installed" in proc.stderr


def _sglang_component(version: str | None, ref: str | None) -> Component:
    """An sglang component at a version (from PyPI) or a git ref."""
    return Component.model_validate_json(
        json.dumps(
            {
                "source": "git" if ref else "pypi",
                "layer": "sglang",
                "version": version,
                "ref": ref,
                "url": "https://github.com/x/y" if ref else None,
            }
        )
    )


@pytest.mark.parametrize(
    ("pid", "version", "ref", "status"),
    [
        ("sglang-qwen3-asr", "0.5.19", None, "ok"),
        ("sglang-qwen3-asr", "0.5.20", None, "drop"),
        ("sglang-qwen3-asr", "0.5.9", None, "mismatch"),
        ("sglang-rmsnorm", "0.5.19", None, "ok"),
        ("sglang-rmsnorm", None, "main", "unknown"),
        ("libz3-soname", "4.16.0", None, "mismatch"),
    ],
)
def test_applicability(pid, version, ref, status):
    component = _sglang_component(version, ref)
    assert applicability(PATCHES[pid], component)[0] == status


@pytest.mark.parametrize(
    ("version", "ref", "versions", "status"),
    [
        (">=0.5.11", None, None, "unknown"),  # a range, no ref: never "applies to any version"
        ("0.5.19", None, None, "unknown"),  # a version, but the patch speaks of refs only
        ("0.5.19", "other", None, "mismatch"),
        (None, "abc123", None, "ok"),
        ("0.5.19", None, ">=0.5.19", "ok"),  # a declared range still decides
        ("0.5.9", "other", ">=0.5.19", "mismatch"),
    ],
)
def test_a_patch_for_other_refs_is_not_applicable_by_default(version, ref, versions, status):
    patch = PATCHES["sglang-qwen3-asr"].model_copy(
        update={
            "applies_to": PATCHES["sglang-qwen3-asr"].applies_to.model_copy(
                update={"refs": ("abc123",), "versions": versions}
            )
        }
    )
    component = _sglang_component(version, ref)
    assert applicability(patch, component)[0] == status


def test_select_rejects_unknown_patch_and_component():
    recipe, _ = load_recipe("verl-0.9.0-rocm10")
    with pytest.raises(RecipeError, match="unknown patch 'nope'"):
        select(("nope",), PATCHES, dict(recipe.components), "r.yaml")
    components = {k: v for k, v in recipe.components.items() if k != "sglang"}
    with pytest.raises(RecipeError, match="targets component 'sglang'"):
        select(("sglang-rmsnorm",), PATCHES, components, "r.yaml")


def test_patch_metadata_is_validated(tmp_path):
    from rocmstack.patches import load_patch

    bad = tmp_path / "bad.yaml"
    bad.write_text("id: bad\ncomponent: x\n")
    with pytest.raises(RecipeError, match=r"bad.yaml"):
        load_patch(bad)
    assert Patch.model_json_schema()["title"] == "Patch"


def test_patch_problems_are_listed_at_once_and_duplicates_or_bad_bytes_refused(tmp_path):
    from rocmstack.patches import load_patch

    bad = tmp_path / "bad.yaml"
    bad.write_text("id: bad\ncomponent: x\n")
    with pytest.raises(RecipeError) as err:
        load_patch(bad)
    line = err.value.one_line()
    for field in ("summary", "why", "upstream", "drop_when", "applies_to", "target", "action"):
        assert f"{field}: " in line
    dup = tmp_path / "dup.yaml"
    dup.write_text("id: dup\nid: dup\n")
    with pytest.raises(RecipeError, match="duplicate key 'id'"):
        load_patch(dup)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("id: latin\nsummary: caf\u00e9\n".encode("latin-1"))
    with pytest.raises(RecipeError, match=r"not UTF-8 text \(byte 0xe9\)"):
        load_patch(latin)


def _file_patch(pid: str, edits: list[dict]) -> dict:
    return {
        "id": pid,
        "component": "crlfpkg",
        "target": {"module": "crlfpkg", "path": "__init__.py"},
        "action": "edit",
        "edits": edits,
    }


def test_a_crlf_target_keeps_its_line_endings(tmp_path):
    site = tmp_path / "site"
    (site / "crlfpkg").mkdir(parents=True)
    target = site / "crlfpkg" / "__init__.py"
    target.write_bytes(b"def f():\r\n    return 1\r\n\r\nX = 2\r\n")
    spec = _file_patch(
        "crlf-edit", [{"find": "def f():\n    return 1\n", "replace": "def f():\n    return 3\n"}]
    )
    proc = apply(spec, site, tmp_path / "state")
    assert proc.returncode == 0, proc.stderr
    assert target.read_bytes() == b"def f():\r\n    return 3\r\n\r\nX = 2\r\n"


def test_a_non_utf8_target_names_its_patch_id(tmp_path):
    site = tmp_path / "site"
    (site / "crlfpkg").mkdir(parents=True)
    (site / "crlfpkg" / "__init__.py").write_bytes(b"X = '\xff\xfe'\n")
    proc = apply(_file_patch("latin-target", [{"find": "X", "replace": "Y"}]), site, tmp_path / "state")
    assert proc.returncode == 3
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("rocmstack patch FAILED: [latin-target] target file ") and "not UTF-8" in line
    from rocmstack.build.pipeline import _PATCH_FAILED

    assert _PATCH_FAILED.search(line)[1] == "latin-target"  # the build's failure parser finds the id


# unified-diff: hunks made against a REAL upstream file (sglang 0.5.6 from PyPI) with difflib, applied by the
# in-image script; a hunk whose context is not there must fail naming the hunk, and nothing is written.


def _diff_spec(tmp_path: Path, pid: str, diff: str, strip: int = 1, module: str = "sglang") -> dict:
    import hashlib

    diff_file = tmp_path / f"{pid}.diff"
    diff_file.write_text(diff)
    return {
        "id": pid,
        "component": module,
        "target": {"module": module, "path": "."},
        "action": "unified-diff",
        "diff": {
            "url": diff_file.as_uri(),
            "sha256": hashlib.sha256(diff.encode()).hexdigest(),
            "strip": strip,
        },
    }


def _real_diff(site: Path) -> tuple[str, Path, str]:
    import difflib

    target = site / "sglang" / "srt" / "layers" / "quantization" / "fp8.py"
    old = target.read_text().splitlines(keepends=True)
    new = list(old)
    new.insert(20, "# rocmstack unified-diff test line\n")
    new[-3] = new[-3].rstrip("\n") + "  # changed near the end\n"
    diff = "".join(
        difflib.unified_diff(old, new, "a/srt/layers/quantization/fp8.py", "b/srt/layers/quantization/fp8.py")
    )
    return diff, target, "".join(new)


def test_unified_diff_applies_to_real_upstream_file(tmp_path):
    site = unpack_wheel("sglang==0.5.6", tmp_path / "site")
    diff, target, want = _real_diff(site)
    assert diff.count("\n@@ ") + diff.startswith("@@") >= 2  # two hunks
    proc = apply(_diff_spec(tmp_path, "ud-ok", diff), site, tmp_path / "state")
    assert proc.returncode == 0, proc.stderr
    assert target.read_text() == want
    again = apply(_diff_spec(tmp_path, "ud-ok", diff), site, tmp_path / "state")
    assert again.returncode == 3 and "already there" in again.stderr and "drop the patch" in again.stderr


def test_unified_diff_hunk_that_does_not_apply_fails_and_writes_nothing(tmp_path):
    site = unpack_wheel("sglang==0.5.6", tmp_path / "site")
    diff, target, _ = _real_diff(site)
    original = target.read_text()
    lines = original.splitlines(keepends=True)
    lines[-2] = "# upstream moved this line\n"  # the second hunk's context
    target.write_text("".join(lines))
    proc = apply(_diff_spec(tmp_path, "ud-moved", diff), site, tmp_path / "state")
    assert proc.returncode == 3
    assert "[ud-moved] hunk 2 of 2 (@@ " in proc.stderr and "does not apply" in proc.stderr
    assert "fp8.py" in proc.stderr
    assert target.read_text() == "".join(lines)  # hunk 1 applies, but nothing is written


def test_unified_diff_checks_its_sha256_and_paths(tmp_path):
    site = unpack_wheel("sglang==0.5.6", tmp_path / "site")
    diff, _target, _ = _real_diff(site)
    spec = _diff_spec(tmp_path, "ud-sha", diff)
    spec["diff"]["sha256"] = "0" * 64
    proc = apply(spec, site, tmp_path / "state")
    assert proc.returncode == 3 and "[ud-sha]" in proc.stderr and "sha256" in proc.stderr
    escaping = diff.replace("a/srt/", "a/../srt/").replace("b/srt/", "b/../srt/")
    proc = apply(_diff_spec(tmp_path, "ud-escape", escaping), site, tmp_path / "state")
    assert proc.returncode == 3 and "leaves the target folder" in proc.stderr
    proc = apply(_diff_spec(tmp_path, "ud-strip", diff, strip=2), site, tmp_path / "state")
    assert proc.returncode == 3 and "does not exist" in proc.stderr


def test_unified_diff_spec_is_validated(tmp_path):
    base = {
        "id": "x",
        "component": "megatron-lm",
        "summary": "s",
        "why": "w",
        "upstream": ["https://example.org/a"],
        "drop_when": "d",
        "applies_to": {},
        "target": {"source": True, "path": "."},
        "action": "unified-diff",
    }
    with pytest.raises(ValueError, match="diff"):
        Patch.model_validate_json(json.dumps(base))
    bad_sha = {**base, "diff": {"url": "https://example.org/a.patch", "sha256": "abc"}}
    with pytest.raises(ValueError, match="sha256"):
        Patch.model_validate_json(json.dumps(bad_sha))
    ok = Patch.model_validate_json(
        json.dumps({**base, "diff": {"url": "https://example.org/a.patch", "sha256": "a" * 64}})
    )
    assert ok.spec()["diff"]["strip"] == 1


def _local_package(tmp_path: Path) -> tuple[Path, Path]:
    pkg = tmp_path / "site" / "udpkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    return tmp_path / "site", pkg


def _edit_diff(name: str, old: str, new: str) -> str:
    import difflib

    return "".join(difflib.unified_diff([old], [new], f"a/{name}", f"b/{name}"))


def _new_file_diff(name: str) -> str:
    return f"--- /dev/null\n+++ b/{name}\n@@ -0,0 +1 @@\n+created\n"


def test_unified_diff_refuses_to_write_through_a_symbolic_link(tmp_path):
    site, pkg = _local_package(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "setup.cfg").write_text("[metadata]\n")
    (pkg / "setup.cfg").symlink_to(outside / "setup.cfg")
    (pkg / "docs").symlink_to(outside)
    (pkg / "NEWS").symlink_to(outside / "NEWS")  # dangling: creating NEWS would create elsewhere/NEWS
    (pkg / "real.py").write_text("x = 1\n")
    first = _edit_diff("real.py", "x = 1\n", "x = 2\n")  # applies: yet nothing may be written
    cases = {
        "ud-link-file": (_edit_diff("setup.cfg", "[metadata]\n", "[tool]\n"), "setup.cfg", "setup.cfg"),
        "ud-link-dir": (_new_file_diff("docs/x"), "docs/x", "docs"),
        "ud-link-dangling": (_new_file_diff("NEWS"), "NEWS", "NEWS"),
    }
    for pid, (diff, name, link) in cases.items():
        proc = apply(_diff_spec(tmp_path, pid, first + diff, module="udpkg"), site, tmp_path / "state")
        assert proc.returncode == 3, proc.stderr
        target = os.readlink(pkg / link)
        assert f"[{pid}] the diff writes {name} through a symbolic link ({link} -> {target}): refused" in (
            proc.stderr
        )
    assert (pkg / "real.py").read_text() == "x = 1\n"
    assert sorted(p.name for p in outside.iterdir()) == ["setup.cfg"]
    assert (outside / "setup.cfg").read_text() == "[metadata]\n"


def test_unified_diff_writes_no_file_when_a_later_file_does_not_apply(tmp_path):
    site, pkg = _local_package(tmp_path)
    (pkg / "a.py").write_text("a = 1\n")
    (pkg / "b.py").write_text("b = 1\n")
    diff = _edit_diff("a.py", "a = 1\n", "a = 2\n") + _edit_diff("b.py", "b = 0\n", "b = 2\n")
    proc = apply(_diff_spec(tmp_path, "ud-half", diff, module="udpkg"), site, tmp_path / "state")
    assert proc.returncode == 3 and "[ud-half] hunk 1 of 1" in proc.stderr and "b.py" in proc.stderr
    assert (pkg / "a.py").read_text() == "a = 1\n"
    both = _edit_diff("a.py", "a = 1\n", "a = 2\n") + _new_file_diff("new") + _new_file_diff("new/x")
    proc = apply(_diff_spec(tmp_path, "ud-nested", both, module="udpkg"), site, tmp_path / "state")
    assert (
        proc.returncode == 3
        and "[ud-nested] the diff writes new both as a file and as a folder" in proc.stderr
    )
    assert (pkg / "a.py").read_text() == "a = 1\n" and not (pkg / "new").exists()


def test_unified_diff_larger_than_the_cap_is_refused(tmp_path):
    site, pkg = _local_package(tmp_path)
    (pkg / "a.py").write_text("a = 1\n")
    padding = ("# filler the parser skips\n" * ((17 << 20) // 26 + 1))[: 17 << 20]
    diff = _edit_diff("a.py", "a = 1\n", "a = 2\n") + padding
    proc = apply(_diff_spec(tmp_path, "ud-huge", diff, module="udpkg"), site, tmp_path / "state")
    assert proc.returncode == 3 and "[ud-huge]" in proc.stderr and "is larger than 16 MiB" in proc.stderr
    assert (pkg / "a.py").read_text() == "a = 1\n"


def test_fetch_diff_reads_at_most_one_byte_past_the_cap(monkeypatch):
    from rocmstack.incontext import apply_patches

    monkeypatch.setattr(apply_patches, "MAX_DIFF_BYTES", 1000, raising=False)
    asked: list[int] = []

    class Endless:  # a response body that never ends
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def read(self, n=-1):
            assert n is not None and n >= 0, "fetch_diff read the whole body"
            asked.append(n)
            return b"x" * n

    monkeypatch.setattr(apply_patches.urllib.request, "urlopen", lambda url, timeout: Endless())
    with pytest.raises(
        apply_patches.PatchFailed, match=r"^\[big\] https://example.org/a.diff is larger than"
    ):
        apply_patches.fetch_diff("big", "https://example.org/a.diff")
    assert sum(asked) <= 1001


def _load_within(folder: Path, seconds: float = 10) -> object:
    """load_patches(folder)'s result or exception; a load that waits (on a FIFO) fails the test, not hangs it."""
    done: list[object] = []

    def load() -> None:
        try:
            done.append(load_patches(folder))
        except Exception as exc:
            done.append(exc)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        for fifo in (p for p in folder.glob("*.yaml") if p.is_fifo()):
            with contextlib.suppress(OSError):  # a writer lets the waiting reader (a daemon thread) go
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"loading the patches folder {folder} waited on a FIFO")
    return done[0]


def test_a_fifo_or_folder_named_yaml_in_a_patches_folder_is_refused_unread(tmp_path):
    folder = tmp_path / "patches"
    folder.mkdir()
    os.mkfifo(folder / "stuck.yaml")
    err = _load_within(folder)
    assert isinstance(err, InputError) and err.exit_code == 2, err
    assert f"patches folder '{folder}': stuck.yaml is not a regular file (a FIFO)" in err.one_line()
    assert "remove it" in err.one_line()
    (folder / "stuck.yaml").unlink()
    (folder / "dir.yaml").mkdir()
    err = _load_within(folder)
    assert isinstance(err, InputError) and "dir.yaml is not a regular file (a directory)" in err.one_line()
    (folder / "dir.yaml").rmdir()
    os.mkfifo(tmp_path / "fifo")
    (folder / "linked.yaml").symlink_to(tmp_path / "fifo")  # a link is read through only to a regular file
    err = _load_within(folder)
    assert isinstance(err, InputError) and "linked.yaml is not a regular file (a FIFO)" in err.one_line()
    (folder / "linked.yaml").unlink()
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "patches"
    (folder / "tomli-marker.yaml").symlink_to(fixtures / "tomli-marker.yaml")
    loaded = _load_within(folder)
    assert isinstance(loaded, dict) and "tomli-marker" in loaded


def test_slime_diff_patches_pin_a_commit_and_a_hash():
    for pid in ("slime-megatron-fused-kernels", "slime-megatron", "slime-sglang"):
        patch = PATCHES[pid]
        assert patch.action == "unified-diff" and patch.diff is not None
        assert "/624b824a898ab0ec1fcb4d373004c7f3852bf515/" in patch.diff.url
        assert patch.applies_to.refs


def test_an_own_patch_folder_adds_to_the_shipped_specs_and_an_own_spec_replaces_its_namesake(tmp_path):
    """A lab's child recipe keeps the shipped patches it inherits and adds its own (docs/lab-repository.md):
    its folder used to replace the shipped one, so every inherited id was 'unknown'."""
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "patches"
    shipped = load_patches()
    both = load_patches(fixtures)
    assert set(both) == set(shipped) | {"tomli-marker", "tomli-moved"}
    own = tmp_path / "rtld-local.yaml"
    spec = (fixtures / "tomli-marker.yaml").read_text().replace("id: tomli-marker", "id: rtld-local")
    own.write_text(spec)
    assert load_patches(tmp_path)["rtld-local"].component == load_patches(fixtures)["tomli-marker"].component
    assert load_patches(tmp_path)["rtld-local"] != shipped["rtld-local"]


# A lab's own diff kept in its repository (`diff.file`): read and checked when the spec loads, carried into the
# build context beside the spec's JSON (so into the render hash), applied from there by the in-image script.


def _lab_spec(folder: Path, pid: str, diff: str, *, sha: str | None = None) -> Path:
    import hashlib

    (folder / "patches").mkdir(parents=True, exist_ok=True)
    (folder / "diffs").mkdir(exist_ok=True)
    (folder / "diffs" / f"{pid}.patch").write_text(diff)
    spec = folder / "patches" / f"{pid}.yaml"
    spec.write_text(
        f"id: {pid}\ncomponent: sglang\nsummary: s\nwhy: w\nupstream: [https://example.org/a]\n"
        "drop_when: d\napplies_to: {}\ntarget: {module: sglang, path: .}\naction: unified-diff\n"
        f"diff: {{file: ../diffs/{pid}.patch, sha256: '{sha or hashlib.sha256(diff.encode()).hexdigest()}'}}\n"
    )
    return spec


def test_a_labs_own_diff_file_goes_into_the_context_and_applies_to_the_real_upstream_file(tmp_path):
    from rocmstack.patches import load_patch

    site = unpack_wheel("sglang==0.5.6", tmp_path / "site")
    diff, target, want = _real_diff(site)
    patch = load_patch(_lab_spec(tmp_path / "lab", "lab-fp8", diff))
    assert patch.diff_bytes == diff.encode()
    spec = patch.spec()
    assert spec["diff"]["file"] == "diffs/lab-fp8.diff"  # where the context holds it, not the lab's path
    # the context's layout: rocmstack/patches/<id>.json and rocmstack/patches/diffs/<id>.diff
    context = tmp_path / "context" / "rocmstack" / "patches"
    (context / "diffs").mkdir(parents=True)
    (context / "diffs" / "lab-fp8.diff").write_bytes(patch.diff_bytes)
    spec_file = context / "lab-fp8.json"
    spec_file.write_text(json.dumps(spec))
    proc = subprocess.run(
        [sys.executable, str(APPLY), str(spec_file)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(site), "ROCMSTACK_ROOT": str(tmp_path / "state")},
        timeout=600,
        cwd=tmp_path,  # not the spec's folder: the diff is found beside the spec, wherever the build runs
    )
    assert proc.returncode == 0, proc.stderr
    assert target.read_text() == want


def test_a_labs_diff_file_that_is_missing_or_changed_fails_when_the_spec_loads(tmp_path):
    from rocmstack.patches import load_patch

    spec = _lab_spec(tmp_path, "lab-moved", "--- a/x\n+++ b/x\n", sha="0" * 64)
    with pytest.raises(RecipeError, match=r"diff.file '../diffs/lab-moved.patch' has sha256 [0-9a-f]{64}, "):
        load_patch(spec)
    (tmp_path / "diffs" / "lab-moved.patch").unlink()
    with pytest.raises(RecipeError, match="no such file"):
        load_patch(spec)


def test_a_diff_url_that_is_not_https_names_both_choices(tmp_path):
    spec = _lab_spec(tmp_path, "lab-url", "x")
    spec.write_text(
        spec.read_text().replace("{file: ../diffs/lab-url.patch,", "{url: ../diffs/lab-url.patch,")
    )
    from rocmstack.patches import load_patch

    with pytest.raises(RecipeError) as err:
        load_patch(spec)
    assert "'../diffs/lab-url.patch' is not a valid https URL: give `url: https://...`" in str(err.value)
    assert "or `file: PATH`" in str(err.value)


def test_the_diff_cap_is_the_in_image_appliers():
    from rocmstack import patches
    from rocmstack.incontext import apply_patches

    assert patches.MAX_DIFF_BYTES == apply_patches.MAX_DIFF_BYTES
