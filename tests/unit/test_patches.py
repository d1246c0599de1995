"""Patches: metadata, applicability, and application against the REAL upstream files from PyPI.

Each test unpacks the real distribution at a version the patch targets and runs the same in-image script
(rocmstack/incontext/apply_patches.py) a build runs; a mutated target must fail naming the patch id.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from rocmstack.errors import RecipeError
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
