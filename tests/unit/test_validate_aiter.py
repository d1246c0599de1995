"""AITER prebuild: the recipe option and its build step, the in-image script, and validate's first-call stage.

AITER cannot build or load here (it needs ROCm's compiler and an AMD GPU): the build step is rendered and
linted, the script runs for real up to the point where it needs aiter, and the stage's parsing and verdict run
on aiter's real log lines (ROCm/legacy-rocm-build#6055) and on the script's own output."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from rocmstack.errors import InputError
from rocmstack.recipe.load import load_recipe
from rocmstack.recipe.resolve import resolve
from rocmstack.render.context import render
from rocmstack.validate.aiter import FirstCall, first_calls, judge, parse_aiter_log, read_manifest
from tests.conftest import shell_view

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "rocmstack" / "incontext" / "aiter_prebuild.py"
LOG_6055 = (ROOT / "tests/fixtures/doctor/aiter/vllm-log-legacy-rocm-build-6055.txt").read_text()
MANIFEST = {
    "schema": 1,
    "gpu_archs": ["gfx942", "gfx950"],
    "jit_dir": "/opt/rocmstack/aiter-jit",
    "aiter": "0.1.5",
    "modules": [{"module": "module_aiter_enum", "seconds": 8.1, "archs": ["gfx942", "gfx950"], "file": "x"}],
}


def lab_recipe(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "lab-aiter.yaml"
    path.write_text(
        "extends: verl-0.9.0-rocm10\nname: lab-aiter\npublish:\n  repository: lab/verl-aiter\n" + extra
    )
    return path


# -- the recipe option and its build step -------------------------------------------------------------


def test_prebuild_option_renders_a_build_step_for_the_archs(tmp_path):
    recipe, path = load_recipe(
        str(lab_recipe(tmp_path, "prebuild_aiter: [module_aiter_enum, module_rmsnorm]\n"))
    )
    out = render(resolve(recipe, path, "gfx942;gfx950", ()), revision=("0" * 40, "2026-11-29T00:00:00Z"))
    text = shell_view(out.dockerfile)
    assert "ENV AITER_JIT_DIR=/opt/rocmstack/aiter-jit" in text
    step = next(line for line in text.splitlines() if "aiter_prebuild.py build" in line)
    assert step.endswith("module_aiter_enum module_rmsnorm \\")
    assert text.index('GPU_ARCHS="gfx942;gfx950"') < text.index(step)  # aiter builds for GPU_ARCHS
    assert "chown -R 1000 /opt/rocmstack/aiter-jit\nUSER 1000" in text
    assert out.files["rocmstack/bin/aiter_prebuild.py"] == SCRIPT.read_bytes()
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    if hadolint:
        (tmp_path / "Dockerfile").write_text(out.dockerfile)
        lint = subprocess.run(
            [hadolint, str(tmp_path / "Dockerfile")], capture_output=True, text=True, check=False
        )
        assert lint.returncode == 0, lint.stdout


def test_without_the_option_there_is_no_step(tmp_path):
    recipe, path = load_recipe(str(lab_recipe(tmp_path, "")))
    text = render(resolve(recipe, path, "gfx942", ()), revision=("0" * 40, "2026-11-29T00:00:00Z")).dockerfile
    assert "aiter_prebuild.py" not in text and "AITER_JIT_DIR" not in text


def test_a_module_name_that_is_not_one_is_refused(tmp_path):
    with pytest.raises(InputError, match="prebuild_aiter"):
        load_recipe(str(lab_recipe(tmp_path, "prebuild_aiter: ['rmsnorm; rm -rf /']\n")))


# -- the in-image script --------------------------------------------------------------------------------


def test_build_without_archs_fails_with_one_line(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "GPU_ARCHS": "native"}
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "build", "--out", str(tmp_path / "m.json"), "module_aiter_enum"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert run.returncode == 3
    assert run.stderr.startswith("aiter-prebuild: GPU_ARCHS names no arch") and "Traceback" not in run.stderr
    assert not (tmp_path / "m.json").exists()


def test_so_archs_reads_the_offload_bundle(tmp_path):
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import aiter_prebuild
    finally:
        sys.path.remove(str(SCRIPT.parent))
    ids = [
        b"host-x86_64-unknown-linux-gnu-",
        b"hipv4-amdgcn-amd-amdhsa--gfx942",
        b"hipv4-amdgcn-amd-amdhsa--gfx950",
    ]
    bundle = b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", len(ids))
    for i in ids:
        bundle += struct.pack("<QQQ", 0, 0, len(i)) + i
    (tmp_path / "module_x.so").write_bytes(b"\x7fELF" + b"\0" * 60 + bundle)
    assert aiter_prebuild.so_archs(tmp_path / "module_x.so") == ["gfx942", "gfx950"]
    assert aiter_prebuild.so_archs(tmp_path / "absent.so") == []


# -- validate's stage -------------------------------------------------------------------------------------


def test_parse_aiters_log_lines():
    got = parse_aiter_log(LOG_6055)
    assert set(got) == {"module_aiter_enum"}
    log = got["module_aiter_enum"]
    assert log.built and log.build_s == 8.1
    assert log.file == "/usr/local/lib/python3.12/dist-packages/aiter/jit/module_aiter_enum.so"
    # aiter's own colouring of the finish line (aiter/jit/core.py FinalFunc)
    coloured = "[aiter] [pid=254 pname=Process-4] \x1b[32mfinish build [module_moe], cost 57.8s \x1b[0m"
    assert parse_aiter_log(coloured)["module_moe"].build_s == 57.8


def _call(stderr: str, stdout: str = "", rc: int | None = 0) -> FirstCall:
    return FirstCall("module_aiter_enum", rc, stdout, stderr, 0.5)


def test_a_module_built_again_at_its_first_call_fails():
    status, summary, rows = judge(MANIFEST, [_call(LOG_6055)])
    assert status == "fail" and "built again at its first call (8.1 s)" in summary
    assert rows[0]["rebuilt"] and rows[0]["build_s"] == 8.1


def test_a_prebuilt_module_that_loads_passes_with_its_time():
    imported = LOG_6055.splitlines()[-1]
    out = json.dumps({"module": "module_aiter_enum", "import_s": 3.2, "first_call_s": 0.041, "file": "/x.so"})
    status, summary, rows = judge(MANIFEST, [_call(imported, "noise\n" + out)])
    assert status == "pass" and "module_aiter_enum 0.041 s" in summary and "(gfx942;gfx950)" in summary
    assert rows[0] == {
        "module": "module_aiter_enum",
        "first_call_s": 0.041,
        "import_s": 3.2,
        "wall_s": 0.5,
        "rebuilt": False,
        "build_s": None,
        "file": "/x.so",
    }
    assert judge(MANIFEST, [_call("", rc=None)])[1].endswith("first call still running after 0 s")


def test_first_call_runs_the_script_in_a_fresh_process(tmp_path):
    """Here no aiter is installed: the real script's failure reaches the verdict as one line."""
    (tmp_path / "bin").mkdir()
    shutil.copy(SCRIPT, tmp_path / "bin" / "aiter_prebuild.py")
    calls = first_calls(tmp_path, MANIFEST, timeout=60)
    assert calls[0].returncode == 1
    status, summary, _ = judge(MANIFEST, calls)
    assert status == "fail" and "No module named 'aiter'" in summary


def test_read_manifest(tmp_path):
    assert read_manifest(tmp_path) == (None, None)
    (tmp_path / "aiter-prebuilt.json").write_text("{}")
    manifest, error = read_manifest(tmp_path)
    assert manifest is None and error and "not a schema-1" in error
    (tmp_path / "aiter-prebuilt.json").write_text(json.dumps(MANIFEST))
    assert read_manifest(tmp_path) == (MANIFEST, None)


def test_validate_has_an_aiter_stage_only_for_an_image_that_prebuilt(tmp_path):
    from rocmstack.validate.pipeline import ValidateOptions, run_aiter_stage

    opts = ValidateOptions(report_dir=tmp_path / "report", image_root=tmp_path)
    assert run_aiter_stage(opts) == (None, None)
    (tmp_path / "bin").mkdir()
    shutil.copy(SCRIPT, tmp_path / "bin" / "aiter_prebuild.py")
    (tmp_path / "aiter-prebuilt.json").write_text(json.dumps(MANIFEST))
    stage, rows = run_aiter_stage(opts)
    assert stage is not None and stage["name"] == "aiter" and stage["status"] == "fail"
    assert rows is not None and stage["modules"] == rows and rows[0]["module"] == "module_aiter_enum"
