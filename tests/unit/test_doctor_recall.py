"""docs/doctor-recall.md names only checks and tests that exist, so the recall table cannot rot."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from rocmstack.doctor.checks import BY_ID

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "doctor-recall.md").read_text(encoding="utf-8")
ROWS = [
    line for line in PAGE.splitlines() if line.startswith("| ") and not line.startswith("| Failure class")
]


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


def test_every_row_names_a_check_and_a_test():
    assert len(ROWS) >= 20
    for row in ROWS:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 4, row
        assert re.search(r"`[a-z0-9-]+`", cells[2]), row
        assert "tests/" in cells[3], row


def test_every_check_named_exists():
    named = {m for row in ROWS for m in re.findall(r"`([a-z0-9-]+)`", row.split("|")[3])}
    assert named - {"validate"} <= set(BY_ID), named - set(BY_ID)


def test_every_test_named_exists():
    for ref in re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", PAGE):
        path, name = ROOT / ref[0], ref[1]
        assert path.is_file(), ref
        if name:
            assert name in _tests_in(path), ref
