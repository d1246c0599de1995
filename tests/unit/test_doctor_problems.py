"""Whose problem each check is (rocmstack.doctor.problems): every check in exactly one class, the fleet page
listing the same, and the checks whose finding decides."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rocmstack.doctor.checks import ALL_CHECKS
from rocmstack.doctor.model import DoctorOptions, failed, passed
from rocmstack.doctor.problems import load_classes, problem_of
from rocmstack.doctor.runner import run_check

FLEET = Path(__file__).resolve().parents[2] / "docs" / "doctor-fleet.md"


def test_every_check_has_one_class_and_the_fleet_page_lists_it():
    classes = load_classes()
    assert set(classes) == {c.id for c in ALL_CHECKS}
    text = FLEET.read_text(encoding="utf-8")
    block = text[text.index("<!-- problems:begin -->") : text.index("<!-- problems:end -->")]
    listed = {
        check: cls
        for cls, ids in re.findall(r"^- (node|user): (.*)$", block, flags=re.M)
        for check in re.findall(r"`([a-z0-9-]+)`", ids)
    }
    assert listed == dict(classes)


def test_a_check_listed_twice_is_refused(tmp_path):
    bad = tmp_path / "problems.yaml"
    bad.write_text("node: [gpu-ecc]\nuser: [gpu-ecc]\n")
    with pytest.raises(ValueError, match="gpu-ecc is in both lists"):
        load_classes(bad)


def test_the_finding_overrides_the_checks_class_and_only_failures_carry_one():
    classes = load_classes()
    assert problem_of("gpu-memory-free", failed("x"), classes) == "user"
    assert problem_of("gpu-memory-free", failed("x", problem="node"), classes) == "node"
    check = next(c for c in ALL_CHECKS if c.id == "gpu-ecc")
    row = run_check(
        check.__class__(**{**check.__dict__, "run": lambda _s, _o: failed("3 errors")}), None, DoctorOptions()
    )
    assert row["problem"] == "node"
    row = run_check(
        check.__class__(**{**check.__dict__, "run": lambda _s, _o: passed("fine")}), None, DoctorOptions()
    )
    assert "problem" not in row
