"""Imports point down the layers of the node-validation stack: platform facts, then the shared GPU machinery
(rocmstack.gpu), then doctor, bench and smoke, then validate. Every import counts, the ones inside functions
too, since a lazy import is still a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "rocmstack"
# The least layer a package may import from; a package imports only from its own layer or below.
LAYERS = {
    "errors": 0,
    "output": 0,
    "resources": 0,
    "signals": 0,
    "secrets": 0,
    "platform": 1,
    "gpu": 2,
    "doctor": 3,
    "bench": 3,
    "smoke": 3,
    "validate": 4,
}


def _imports(path: Path) -> list[tuple[str, int]]:
    """(the rocmstack package imported, line) for every import in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        found += [(n.split(".")[1], node.lineno) for n in names if n.startswith("rocmstack.") and "." in n]
    return found


def upward_imports(root: Path = PACKAGE) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        own = rel.parts[0].removesuffix(".py")
        if own not in LAYERS:
            continue
        for target, line in _imports(path):
            if target in LAYERS and LAYERS[target] > LAYERS[own]:
                bad.append(f"rocmstack/{rel}:{line} ({own}) imports rocmstack.{target}")
    return bad


def test_no_package_of_the_stack_imports_a_layer_above_it():
    assert upward_imports() == []


def test_an_upward_import_is_found(tmp_path):
    (tmp_path / "gpu").mkdir()
    (tmp_path / "gpu" / "x.py").write_text("def f():\n    from rocmstack.doctor.model import Check\n")
    assert upward_imports(tmp_path) == ["rocmstack/gpu/x.py:2 (gpu) imports rocmstack.doctor"]
