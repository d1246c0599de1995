"""docs/build.md's table of what `rocmstack matrix --registry ghcr.io/acme` prints is that command's output."""

from __future__ import annotations

import json
import re
from pathlib import Path

from rocmstack.resources import RECIPES_PATH_ENV
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
_ROW = re.compile(r"^\| `(matrix|legs)=` \| (.+?) \| (.+?) \|$", re.MULTILINE)


def _documented() -> dict[str, tuple[list[str], list[str]]]:
    text = (ROOT / "docs" / "build.md").read_text(encoding="utf-8")
    assert "`rocmstack matrix --registry ghcr.io/acme` prints:" in text
    rows = {}
    for line, names, fields in _ROW.findall(text):
        rows[line] = (re.findall(r"`([^`]+)`", names), re.findall(r"`([^`]+)`", fields))
    return rows


def test_the_matrix_table_in_build_md_is_the_commands_output(monkeypatch):
    monkeypatch.delenv(RECIPES_PATH_ENV, raising=False)
    result = run_cli("matrix", "--registry", "ghcr.io/acme", env={RECIPES_PATH_ENV: ""})
    assert result.code == 0, result.err
    printed = {}
    for line in result.out.splitlines():
        key, _, value = line.partition("=")
        entries = json.loads(value)["include"]
        printed[key] = ([e["name"] for e in entries], sorted({k for e in entries for k in e}))
    assert sorted(printed) == ["legs", "matrix"]
    assert _documented() == printed
