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
    ("module", "imported", "contract", "named"),
    [
        # the shared GPU machinery calling up into the doctor
        (
            "gpu/shapes.py",
            "rocmstack.doctor.model",
            "The node stack",
            "rocmstack.gpu.shapes -> rocmstack.doctor.model",
        ),
        # the renderer calling back into the pipeline above it
        (
            "render/context.py",
            "rocmstack.prepare",
            "The build stack",
            "rocmstack.render.context -> rocmstack.prepare",
        ),
        # the bottom calling the top
        (
            "errors.py",
            "rocmstack.publish.gate",
            "The build stack",
            "rocmstack.errors -> rocmstack.publish.gate",
        ),
        # the domain calling a command
        (
            "doctor/runner.py",
            "rocmstack.commands.doctor",
            "The command layer is the top",
            "rocmstack.doctor.runner -> rocmstack.commands.doctor",
        ),
        ("prepare.py", "rocmstack.cli", "The command layer is the top", "rocmstack.prepare -> rocmstack.cli"),
        # one command calling another
        (
            "commands/publish.py",
            "rocmstack.commands.build",
            "Commands do not import each other",
            "rocmstack.commands.publish -> rocmstack.commands.build",
        ),
        # across the stacks below validate, in each direction
        (
            "platform/masks.py",
            "rocmstack.render.context",
            "the node stack imports nothing of the build stack",
            "rocmstack.platform.masks -> rocmstack.render.context",
        ),
        (
            "container/reference.py",
            "rocmstack.gpu.memory",
            "the build stack imports nothing of the node stack",
            "rocmstack.container.reference -> rocmstack.gpu.memory",
        ),
        # the build context's own scripts reaching for the package they ship without
        (
            "incontext/guard.py",
            "rocmstack.errors",
            "rocmstack/incontext/ ships alone",
            "rocmstack.incontext.guard -> rocmstack.errors",
        ),
    ],
)
def test_an_import_the_drawing_forbids_breaks_its_contract(copy, module, imported, contract, named):
    _append(copy / "rocmstack" / module, f"\n\ndef _upward():\n    import {imported}  # noqa\n")
    proc = _lint(copy)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    broken = proc.stdout.split("Broken contracts", 1)[-1]
    assert contract in " ".join(broken.split()), proc.stdout
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


def _contract(contract_id: str) -> dict:
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["id"] == contract_id)


def _top_level() -> set[str]:
    """Every module and package directly under rocmstack/, as lint-imports names them."""
    found = {p.stem for p in (ROOT / "rocmstack").glob("*.py") if p.stem != "__init__"}
    found |= {p.parent.name for p in (ROOT / "rocmstack").glob("*/__init__.py")}
    return {f"rocmstack.{name}" for name in found}


def test_every_domain_module_is_below_the_command_layer():
    """A new package is held by the contracts the day it is added: the command layer's list names every
    top-level module, and the in-context scripts' list forbids every one but themselves."""
    layer = _contract("command-layer")
    assert set(layer["source_modules"]) | set(layer["forbidden_modules"]) == _top_level()
    alone = _contract("incontext-alone")
    assert set(alone["forbidden_modules"]) == _top_level() - {"rocmstack.incontext"}
