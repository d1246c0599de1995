"""Every shipped advisory against its source: the schema, its verbatim symptom in the fixture taken from the
source (tests/fixtures/advisories/<id>.txt, whose first line names the source URL), each signature matching
that text and none of the healthy logs of docs/evidence/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rocmstack.advisories.load import SHIPPED, load_file

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests/fixtures/advisories"
FILES = sorted(SHIPPED.glob("*.yaml"))
# logs of healthy runs (engines, frameworks, doctor) recorded on real machines
HEALTHY = [p for p in (ROOT / "docs/evidence").rglob("*") if p.suffix in (".log", ".txt") and p.is_file()]


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def healthy_text() -> str:
    return "\n".join(p.read_text(errors="replace") for p in HEALTHY)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_each_advisory_is_its_sources_words(path, healthy_text):
    advisory = load_file(path)
    fixture = FIXTURES / f"{advisory.id}.txt"
    assert fixture.is_file(), f"{fixture} holds the source's verbatim text"
    head, _, body = fixture.read_text(encoding="utf-8").partition("\n")
    assert head == f"# source: {advisory.source}", head
    assert _words(advisory.symptom) in _words(body), "the symptom must be verbatim from the source"
    for pattern in advisory.signatures:
        assert re.search(pattern, body, flags=re.M), f"signature {pattern!r} does not match its source"
        found = re.search(pattern, healthy_text, flags=re.M)
        assert found is None, f"signature {pattern!r} matches a healthy log: {found.group(0)!r}"


def test_enough_advisories_from_enough_places():
    advisories = [load_file(p) for p in FILES]
    repos = {re.sub(r"^https://github\.com/([^/]+/[^/]+)/.*$", r"\1", a.source) for a in advisories}
    assert len(advisories) >= 60 and len(repos) >= 12, (len(advisories), sorted(repos))
