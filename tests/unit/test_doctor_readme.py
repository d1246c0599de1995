"""The doctor pages (docs/doctor.md, and docs/doctor-levels.md for the level 1-3 additions) list every
check id (and no retired one)."""

from __future__ import annotations

import re
from pathlib import Path

from rocmstack.doctor.checks import ALL_CHECKS

DOCTOR_PAGE = Path(__file__).resolve().parents[2] / "docs" / "doctor.md"
LEVELS = Path(__file__).resolve().parents[2] / "docs" / "doctor-levels.md"


def test_doctor_page_lists_every_check():
    text = DOCTOR_PAGE.read_text(encoding="utf-8")
    section = text[text.index("<!-- doctor:begin -->") : text.index("<!-- doctor:end -->")]
    section += LEVELS.read_text(encoding="utf-8") if LEVELS.exists() else ""
    listed = set(re.findall(r"^\| `([a-z0-9-]+)` \|", section, flags=re.MULTILINE))
    assert listed == {c.id for c in ALL_CHECKS}
