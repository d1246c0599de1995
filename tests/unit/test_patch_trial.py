"""`rocmstack patch test` and `patch new` on real upstream files.

SGLang's repository is out of reach here, so a git mirror stands in for it: a bare repository holding files
of the real sglang 0.5.19 wheel from PyPI under `python/` (the layout the recipe's `subdir: python` names),
reached through git's own `url.<base>.insteadOf`, as a lab with a mirror reaches GitHub. PyPI components
are downloaded from PyPI for real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rocmstack.patch_trial import Trial, summarize
from tests.conftest import pypi_download, run_cli

RMSNORM = "python/sglang/srt/layers/layernorm.py"
KEPT = ("sglang/__init__.py", "sglang/srt/layers/layernorm.py", "sglang/srt/configs/qwen3_asr.py")


def _git(*args: str, cwd: Path) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    }
    return subprocess.run(
        ["git", "-c", "user.name=lab", "-c", "user.email=lab@example.com", *args],
        cwd=cwd, env=env, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """(env reaching the mirror for https://github.com/, work tree, commit of sglang 0.5.19's files)."""
    root = tmp_path_factory.mktemp("mirror")
    work = root / "work"
    (work / "python").mkdir(parents=True)
    with zipfile.ZipFile(pypi_download("sglang==0.5.19")) as zf:
        # The files the patches touch, as the wheel has them (the other 40 MB change nothing here)
        zf.extractall(work / "python", [n for n in zf.namelist() if n in KEPT])
    _git("init", "-q", cwd=work)
    _git("add", "-A", cwd=work)
    _git("commit", "-qm", "sglang 0.5.19", cwd=work)
    sha = _git("rev-parse", "HEAD", cwd=work)
    (root / "m" / "sgl-project").mkdir(parents=True)
    _git("clone", "-q", "--bare", str(work), str(root / "m" / "sgl-project" / "sglang.git"), cwd=root)
    env = {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"url.file://{root}/m/.insteadOf",
        "GIT_CONFIG_VALUE_0": "https://github.com/",
    }
    return env, work, sha


def _lab(tmp_path: Path, patches: list[str], extra: str = "") -> Path:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (tmp_path / "patches").mkdir(exist_ok=True)
    listed = "".join(f"  - {p}\n" for p in patches)
    (recipes / "lab-verl.yaml").write_text(
        "name: lab-verl\nextends: verl-0.9.0-rocm10\ndescription: a lab's verl\npatches_dir: ../patches\n"
        f"patches:\n{listed}publish:\n  repository: ghcr.io/acme/verl\n{extra}"
    )
    return recipes


def _patch_test(env: dict, *args: str, cwd: Path | None = None) -> tuple[int, dict, str]:
    r = run_cli(*args, "--json", env=env, cwd=cwd, timeout=600)
    return r.code, (json.loads(r.out) if r.out.strip() else {}), r.err


def _rows(report: dict) -> dict[str, dict]:
    return {row["patch"]: row for row in report["patches"]}


def test_shipped_patches_apply_edit_by_edit_and_base_ones_are_left_to_the_build(mirror, tmp_path):
    env, _work, sha = mirror
    before = set(Path("/tmp").glob("rocmstack-patch-test-*"))
    code, report, err = _patch_test(
        env, "patch", "test", "verl-0.9.0-rocm10", "--set", f"components.sglang.ref={sha}",
        "--only", "rtld-local", "--only", "sglang-rmsnorm", "--only", "sglang-qwen3-asr", cwd=tmp_path,
    )  # fmt: skip
    assert code == 0, err
    rows = _rows(report)
    assert [r["patch"] for r in report["patches"]] == ["rtld-local", "sglang-rmsnorm", "sglang-qwen3-asr"]
    assert rows["rtld-local"]["status"] == "skipped" and "base image" in rows["rtld-local"]["reason"]
    for pid in ("sglang-rmsnorm", "sglang-qwen3-asr"):
        assert rows[pid]["status"] == "applies", rows[pid]
        assert rows[pid]["source"] == f"https://github.com/sgl-project/sglang.git @ {sha}"
        assert [s["ok"] for s in rows[pid]["steps"]] == [True, True]
    assert rows["sglang-rmsnorm"]["steps"][0]["detail"] == f"1 match(es) in {RMSNORM}"
    assert report["counts"] == {"applies": 2, "fails": 0, "unfetched": 0, "skipped": 1}
    assert "patch test: sglang: fetching https://github.com/sgl-project/sglang.git" in err  # progress
    # Nothing written outside its temporary folder, and that folder is gone.
    assert list(tmp_path.iterdir()) == []
    assert set(Path("/tmp").glob("rocmstack-patch-test-*")) == before


def test_a_short_commit_is_fetched_with_its_history_as_the_build_does(mirror, tmp_path):
    env, _work, sha = mirror
    code, report, err = _patch_test(
        env, "patch", "test", "verl-0.9.0-rocm10", "--set", f"components.sglang.ref={sha[:10]}",
        "--only", "sglang-rmsnorm",
    )  # fmt: skip
    assert code == 0, err
    assert _rows(report)["sglang-rmsnorm"]["source"] == f"https://github.com/sgl-project/sglang.git @ {sha}"


def test_a_lab_source_patch_applies_first_and_the_shipped_edit_it_breaks_fails_naming_each_edit(
    mirror, tmp_path
):
    env, work, sha = mirror
    layernorm = work / RMSNORM
    original = layernorm.read_text()
    try:
        layernorm.write_text(
            original.replace("out = torch.empty_like(x)\n", "out = torch.empty_like(x)  # lab\n")
        )
        diff = subprocess.run(["git", "diff"], cwd=work, capture_output=True, check=True).stdout
    finally:
        layernorm.write_text(original)
    recipes = _lab(tmp_path, ["sglang-rmsnorm", "lab-norm"])
    (tmp_path / "lab.diff").write_bytes(diff)
    made = run_cli(
        "patch", "new", "lab-norm", "--component", "sglang", "--diff", "lab.diff", "--summary", "Mark the norm",
        "--upstream", "https://github.com/acme/sglang/commit/1", "--ref", sha, cwd=tmp_path,
    )  # fmt: skip
    assert made.code == 0, made.err
    code, report, err = _patch_test(
        env, "--recipes-dir", str(recipes), "patch", "test", "lab-verl", "--set", f"components.sglang.ref={sha}",
    )  # fmt: skip
    assert code == 1, err
    rows = _rows(report)
    lab = rows["lab-norm"]
    assert lab["status"] == "applies"
    assert [s["what"].split(" (")[0] for s in lab["steps"]] == [
        f"{RMSNORM}: hunk {n} of 3" for n in (1, 2, 3)
    ]
    assert all(s["ok"] for s in lab["steps"])
    stale = rows["sglang-rmsnorm"]
    assert stale["status"] == "fails" and [s["ok"] for s in stale["steps"]] == [False, False]
    assert stale["reason"].startswith("[sglang-rmsnorm] edit 1 of 2 expected 1 match(es)")
    assert f"in {RMSNORM}, found 0 (upstream text moved" in stale["reason"]
    # The build's order: the source patch before the build, the module patch after it.
    assert err.index("lab-norm: trying") < err.index("sglang-rmsnorm: trying")


def test_a_moved_hunk_is_named_and_the_others_still_reported(mirror, tmp_path):
    env, work, sha = mirror
    layernorm = work / RMSNORM
    original = layernorm.read_text()
    try:
        layernorm.write_text(original.replace("residual_out = torch.empty_like(x)\n", "residual_out = x\n"))
        diff = subprocess.run(["git", "diff"], cwd=work, capture_output=True, check=True, text=True).stdout
    finally:
        layernorm.write_text(original)
    # The second hunk's context as an older SGLang had it: that hunk alone no longer matches.
    hunks = diff.split("\n@@ ")
    hunks[2] = hunks[2].replace(" fused_add_rms_norm(", " fused_add_rms_norm_v0(", 1)
    (tmp_path / "moved.diff").write_text("\n@@ ".join(hunks))
    recipes = _lab(tmp_path, ["lab-moved"])
    made = run_cli(
        "patch", "new", "lab-moved", "--component", "sglang", "--diff", "moved.diff", "--summary", "x",
        "--upstream", "https://github.com/acme/sglang/commit/2", cwd=tmp_path,
    )  # fmt: skip
    assert made.code == 0, made.err
    code, report, _err = _patch_test(
        env, "--recipes-dir", str(recipes), "patch", "test", "lab-verl", "--set", f"components.sglang.ref={sha}",
    )  # fmt: skip
    steps = _rows(report)["lab-moved"]["steps"]
    assert code == 1
    assert [s["ok"] for s in steps] == [True, False, True]
    assert "hunk 2 of 3" in steps[1]["detail"] and "upstream text moved" in steps[1]["detail"]
    assert steps[2]["detail"].startswith("at line ")


def test_a_pypi_component_is_tried_on_its_wheel_and_an_unpinned_one_is_left(mirror, tmp_path):
    env, _work, _sha = mirror
    spec = """id: lab-tomli
component: tomli
summary: x
why: x
upstream: [https://github.com/hukkin/tomli]
drop_when: x
applies_to: {versions: "==2.0.1"}
target: {module: tomli, path: _parser.py}
action: edit
edits:
  - find: "def loads("
    replace: "def loads("
"""
    recipes = _lab(
        tmp_path,
        ["lab-tomli"],
        "components:\n  tomli:\n    source: pypi\n    layer: app\n    version: 2.0.1\n",
    )
    (tmp_path / "patches" / "lab-tomli.yaml").write_text(spec)
    code, report, err = _patch_test(env, "--recipes-dir", str(recipes), "patch", "test", "lab-verl")
    row = _rows(report)["lab-tomli"]
    assert code == 0, err
    assert row["status"] == "applies" and row["source"] == "tomli-2.0.1-py3-none-any.whl"
    code, report, err = _patch_test(
        env,
        "--recipes-dir",
        str(recipes),
        "patch",
        "test",
        "lab-verl",
        "--set",
        "components.tomli.version=>=2",
    )
    row = _rows(report)["lab-tomli"]
    assert code == 5, err  # judged nothing: never a pass
    assert row["status"] == "skipped" and "lock the recipe first" in row["reason"]


def test_a_source_out_of_reach_gives_no_verdict(tmp_path):
    env = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"url.file://{tmp_path}/none/.insteadOf",
           "GIT_CONFIG_VALUE_0": "https://github.com/"}  # fmt: skip
    code, report, _err = _patch_test(env, "patch", "test", "verl-0.9.0-rocm10", "--only", "sglang-rmsnorm")
    row = _rows(report)["sglang-rmsnorm"]
    assert code == 4 and row["status"] == "unfetched"
    assert row["reason"].startswith("the pinned source of sglang could not be fetched")
    text = run_cli("patch", "test", "verl-0.9.0-rocm10", "--only", "sglang-rmsnorm", env=env)
    assert text.code == 4 and text.out.splitlines()[0] == "UNFETCHED sglang-rmsnorm (sglang)"
    assert text.out.splitlines()[-1] == (
        "patch test verl-0.9.0-rocm10: a component's pinned source could not be fetched (1 unfetched)"
    )


def test_bad_input_is_one_line(tmp_path):
    r = run_cli("patch", "test", "verl-0.9.0-rocm10", "--only", "nope")
    assert r.code == 2 and r.out == ""
    assert r.err.strip().splitlines() == [
        "rocmstack: error: --only nope: the recipe lists no such patch (its patches: amdsmi-install, "
        "libz3-soname, rtld-local, sglang-qwen3-asr, sglang-rmsnorm, verl-rollout-defaults)"
    ]


def test_summarize_never_passes_on_nothing():
    skipped = Trial("a", "c", "skipped", "", "base")
    assert summarize([])[0] == 5 and summarize([skipped])[0] == 5
    assert summarize([skipped, Trial("b", "c", "applies", "s", "")])[0] == 0
    assert summarize([Trial("b", "c", "unfetched", "", "x"), Trial("d", "c", "applies", "s", "")])[0] == 4
    assert summarize([Trial("b", "c", "unfetched", "", "x"), Trial("d", "c", "fails", "s", "y")])[0] == 1


def test_patch_new_writes_a_spec_the_build_reads_and_refuses_the_rest(tmp_path):
    (tmp_path / "patches").mkdir()
    diff = b"--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
    args = ("patch", "new", "lab-x", "--component", "sglang", "--diff", "-", "--summary", "a is 2",
            "--upstream", "https://github.com/acme/x/pull/1", "--versions", ">=0.5")  # fmt: skip
    r = subprocess.run(
        [sys.executable, "-m", "rocmstack", *args, "--json"], input=diff, capture_output=True, cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    from rocmstack.patches import load_patch

    patch = load_patch(tmp_path / "patches" / "lab-x.yaml")
    assert patch.diff is not None and patch.diff.file == "diffs/lab-x.diff" and patch.diff_bytes == diff
    assert patch.target.source and patch.applies_to.versions == ">=0.5"
    # An existing id: nothing overwritten.
    again = subprocess.run(
        [sys.executable, "-m", "rocmstack", *args], input=b"x", capture_output=True, cwd=tmp_path
    )
    assert again.returncode == 2 and b"exists" in again.stderr and b"Traceback" not in again.stderr
    assert (tmp_path / "patches" / "diffs" / "lab-x.diff").read_bytes() == diff
    # Not a diff the build's applier takes: one line, nothing written.
    args2 = ("patch", "new", "lab-y", *args[3:])
    bad = subprocess.run(
        [sys.executable, "-m", "rocmstack", *args2],
        input=b"rename from a\n",
        capture_output=True,
        cwd=tmp_path,
    )
    assert bad.returncode == 2 and len(bad.stderr.decode().strip().splitlines()) == 1
    assert sorted(p.name for p in (tmp_path / "patches").rglob("*")) == ["diffs", "lab-x.diff", "lab-x.yaml"]


def test_check_patches_tries_each_patch_and_a_stale_edit_fails_the_check(tmp_path):
    """`check --patches`: the same trial as `patch test`, one row per patch (tomli's real wheel from PyPI)."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures"
    args = ["check", str(fixture / "recipes" / "tiny-pip.yaml"), "--offline", "--patches", "--ignore-rule"]
    r = run_cli(*args, "patches-apply", "--patches-dir", str(fixture / "patches"), "--json", timeout=600)
    assert r.code == 0, r.err
    rows = {x["id"]: x for x in json.loads(r.out)[0]["results"]}
    assert rows["patch:tomli-marker"]["status"] == "pass"
    assert rows["patch:tomli-marker"]["reason"] == "applies to tomli-2.0.1-py3-none-any.whl"
    stale = tmp_path / "patches"
    stale.mkdir()
    spec = (fixture / "patches" / "tomli-marker.yaml").read_text()
    (stale / "tomli-marker.yaml").write_text(
        spec.replace('__module__ = __name__\\n"\n', '__module__ = name\\n"\n')
    )
    r = run_cli(*args, "patches-apply", "--patches-dir", str(stale), timeout=600)
    assert r.code == 1, r.err
    last = r.err.strip().splitlines()[-1]
    assert "tiny-pip [gfx942]: rule patch:tomli-marker failed:" in last and "--only tomli-marker" in last, (
        last
    )
