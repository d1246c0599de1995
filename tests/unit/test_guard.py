"""Build-time guards (rocmstack/incontext/guard.py) run against real interpreters and packages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUARD = ROOT / "rocmstack" / "incontext" / "guard.py"


def guard(*args: str, state: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "ROCMSTACK_ROOT": str(state)}
    if pythonpath:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [sys.executable, str(GUARD), *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_freeze_writes_installed_versions(tmp_path):
    import torch

    proc = guard(
        "freeze",
        f"torch=={torch.__version__.split('+')[0]}",
        "packaging",
        "not-installed-pkg",
        state=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    lines = (tmp_path / "constraints.txt").read_text().split()
    assert (
        lines[0] == f"torch=={torch.__version__}" and lines[1].startswith("packaging==") and len(lines) == 2
    )


def test_freeze_fails_when_base_torch_differs_from_recipe(tmp_path):
    proc = guard("freeze", "torch==1.0.0", state=tmp_path)
    assert (
        proc.returncode == 3
        and "the base image provides torch" in proc.stderr
        and "declares 1.0.0" in proc.stderr
    )


def test_python_version_guard(tmp_path):
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert guard("python", here, state=tmp_path).returncode == 0
    proc = guard("python", "3.99", state=tmp_path)
    assert proc.returncode == 3 and "vLLM ROCm wheels/builds need Python 3.99" in proc.stderr


def test_final_rejects_a_cpu_torch_when_hip_is_required(tmp_path):
    # The test venv's torch is the CPU build: exactly the "torch replaced by a non-ROCm wheel" case.
    proc = guard("final", "--require-hip", state=tmp_path)
    assert proc.returncode == 3 and "is not a ROCm build (torch.version.hip is unset)" in proc.stderr
    assert guard("final", state=tmp_path).returncode == 0


def test_final_rejects_nvidia_wheels(tmp_path):
    site = tmp_path / "site"
    dist = site / "nvidia_cublas_cu12-12.4.5.8.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-cublas-cu12\nVersion: 12.4.5.8\n")
    proc = guard("final", "--forbid-nvidia", state=tmp_path, pythonpath=site)
    assert proc.returncode == 3 and "CUDA wheels got installed: nvidia-cublas-cu12" in proc.stderr


def test_final_detects_a_replaced_frozen_package(tmp_path):
    (tmp_path / "constraints.txt").write_text("packaging==0.0.1\n")
    proc = guard("final", state=tmp_path)
    assert proc.returncode == 3 and "packaging changed from the base's 0.0.1" in proc.stderr


@pytest.mark.parametrize("args", [(), ("nonsense",)])
def test_usage_errors(tmp_path, args):
    assert guard(*args, state=tmp_path).returncode == 2


def test_pin_appends_source_built_dist_and_checks_its_version(tmp_path):
    import packaging

    (tmp_path / "constraints.txt").write_text("torch==2.13.0+cpu\n")
    assert guard("pin", f"packaging=={packaging.__version__}", state=tmp_path).returncode == 0
    assert (tmp_path / "constraints.txt").read_text().split()[-1] == f"packaging=={packaging.__version__}"
    wrong = guard("pin", "packaging==0.1", state=tmp_path)
    assert wrong.returncode == 3 and "the ref is not that release" in wrong.stderr
    missing = guard("pin", "not-a-dist==1.0", state=tmp_path)
    assert missing.returncode == 3 and "no distribution named not-a-dist" in missing.stderr


@pytest.mark.parametrize(("declared", "code"), [("v0.1", 3), ("main", 0), ("release/amd", 0)])
def test_pin_compares_only_a_declared_release_number(tmp_path, declared, code):
    """A `v`-prefixed version is compared by its number; a branch name has none and is not compared
    (it crashed with a traceback before: the declared version was assumed to start with a digit)."""
    (tmp_path / "constraints.txt").write_text("")
    run = guard("pin", f"packaging=={declared}", state=tmp_path)
    assert run.returncode == code, run.stderr
    assert "Traceback" not in run.stderr


def _stub_wheel(folder: Path, name: str, requires: list[str]) -> Path:
    import zipfile

    info = f"{name}-1.0.dist-info"
    path = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        whl.writestr(
            f"{info}/METADATA",
            f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
            + "".join(f"Requires-Dist: {r}\n" for r in requires),
        )
        whl.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        whl.writestr(f"{info}/RECORD", "")
    return path


@pytest.mark.timeout(300)
def test_pip_check_passes_only_the_conflicts_the_recipe_accepts(tmp_path):
    """A real venv and real `pip check`: one package whose requirement is broken on purpose (like verl's
    transformers range), another broken by accident."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=240)
    py = venv / "bin" / "python"
    wheels = [
        _stub_wheel(tmp_path, "verl_like", ["transformers-like<1"]),
        _stub_wheel(tmp_path, "transformers_like", []),
    ]
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", *map(str, wheels)],
        check=True,
        timeout=240,
    )
    run = [str(py), str(GUARD), "pip-check"]
    accepted = subprocess.run(
        [*run, "--accept", "verl-like:transformers-like"], capture_output=True, text=True
    )
    assert accepted.returncode == 0, accepted.stderr
    assert (
        "declared in the recipe (accepted conflict or no_deps): verl-like 1.0 has requirement"
        in accepted.stdout
    )
    refused = subprocess.run(run, capture_output=True, text=True)
    assert (
        refused.returncode == 3 and "pip check found conflicts the recipe does not accept" in refused.stderr
    )
    wheels.append(_stub_wheel(tmp_path, "other", ["missing-dep"]))
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheels[-1])], check=True
    )
    still = subprocess.run([*run, "--accept", "verl-like:transformers-like"], capture_output=True, text=True)
    assert still.returncode == 3 and "other 1.0 requires missing-dep, which is not installed" in still.stderr
    # Installed with no_deps by the recipe: an absent requirement is its declared choice, a wrong version is not.
    declared = subprocess.run(
        [*run, "--accept", "verl-like:transformers-like", "--no-deps", "other"],
        capture_output=True,
        text=True,
    )
    assert declared.returncode == 0, declared.stderr
    wrong = subprocess.run(
        [*run, "--no-deps", "other", "--no-deps", "verl-like"], capture_output=True, text=True
    )
    assert wrong.returncode == 3 and "verl-like 1.0 has requirement transformers-like<1" in wrong.stderr
