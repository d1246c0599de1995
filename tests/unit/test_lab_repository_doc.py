"""docs/lab-repository.md: its patch spec is valid as written, and every line its integration test checks is
a line the page shows (tests/integration/test_lab_repository.py runs the page)."""

from __future__ import annotations

import re

from rocmstack.patches import load_patch
from tests.integration.test_lab_repository import EXPECTED, blocks, outputs


def test_the_page_has_its_steps_and_shows_what_the_run_is_checked_for():
    steps = blocks()
    assert len(steps) == 13
    assert "patch new acme-accelerate-numa" in steps[3] and "lock acme-verl" in steps[4]
    assert "check acme-verl" in steps[5] and "patch test acme-verl" in steps[6]
    assert "matrix" in steps[7] and "--recipe " not in steps[7]  # the lab-only plan
    assert "render acme-verl" in steps[8] and "rocmstack diff" in steps[9] and "tags acme-verl" in steps[11]
    assert 'rm -rf "$LAB"' in steps[12]
    shown = outputs()
    for line in EXPECTED:
        assert line in shown, line


def test_the_pages_patch_spec_loads(tmp_path):
    body = re.search(r"cat >patches/acme-rollout-memory.yaml <<'EOF'\n(.*?)^EOF$", blocks()[2], re.S | re.M)
    assert body
    path = tmp_path / "acme-rollout-memory.yaml"
    path.write_text(body[1])
    patch = load_patch(path)
    assert patch.component == "verl" and patch.edits[0].find == "gpu_memory_utilization: 0.5\n"
