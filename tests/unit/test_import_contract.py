"""The import contract of `make lint` (pyproject's [tool.importlinter], run by the real lint-imports): it holds
for the package, and it fails, naming the import, on a copy of the package given an upward import or a cycle.
Every import counts, the ones inside functions too, since a lazy import is still a dependency."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", str(root / "pyproject.toml")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "rocmstack", tmp_path / "rocmstack", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


def test_the_package_keeps_its_import_contract():
    proc = _lint(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout or "broken" not in proc.stdout


@pytest.mark.parametrize(
    ("module", "imported", "named"),
    [
        # the shared GPU machinery calling up into the doctor
        ("gpu/shapes.py", "rocmstack.doctor.model", "rocmstack.gpu.shapes -> rocmstack.doctor.model"),
        # the renderer calling back into the pipeline above it
        ("render/context.py", "rocmstack.prepare", "rocmstack.render.context -> rocmstack.prepare"),
        # the bottom calling the top
        ("errors.py", "rocmstack.publish.gate", "rocmstack.errors -> rocmstack.publish.gate"),
    ],
)
def test_an_upward_import_inside_a_function_breaks_it(copy, module, imported, named):
    _append(copy / "rocmstack" / module, f"\n\ndef _upward():\n    import {imported}  # noqa\n")
    proc = _lint(copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert named in proc.stdout


def test_a_cycle_inside_a_package_breaks_it(copy):
    # build.tags is imported by build.pipeline; the way back makes a cycle
    _append(
        copy / "rocmstack" / "build" / "tags.py",
        "\n\ndef _back():\n    import rocmstack.build.pipeline  # noqa\n",
    )
    proc = _lint(copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "No cycles are allowed in rocmstack.build" in proc.stdout
