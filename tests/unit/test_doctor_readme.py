"""The README's doctor section, with docs/doctor-levels.md for the level 1-3 additions, lists every check id
(and no retired one)."""

from __future__ import annotations

import re
from pathlib import Path

from rocmstack.doctor.checks import ALL_CHECKS

README = Path(__file__).resolve().parents[2] / "README.md"
LEVELS = Path(__file__).resolve().parents[2] / "docs" / "doctor-levels.md"


def test_readme_lists_every_check():
    text = README.read_text(encoding="utf-8")
    section = text[text.index("<!-- doctor:begin -->") : text.index("<!-- doctor:end -->")]
    section += LEVELS.read_text(encoding="utf-8") if LEVELS.exists() else ""
    listed = set(re.findall(r"^\| `([a-z0-9-]+)` \|", section, flags=re.MULTILINE))
    assert listed == {c.id for c in ALL_CHECKS}
