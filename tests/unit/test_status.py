"""The one status vocabulary: every producer writes it, and nothing else passes."""

from __future__ import annotations

import json

import pytest

from rocmstack.bench.report import SCHEMA as BENCH_SCHEMA
from rocmstack.doctor.model import Status as DoctorStatus
from rocmstack.rules.engine import Result
from rocmstack.status import FAILING, Status, status_of


def test_five_statuses_spelled_as_the_reports_write_them():
    assert [s.value for s in Status] == ["pass", "warn", "fail", "skip", "error"]
    assert set(FAILING) == {Status.FAIL, Status.ERROR}
    assert json.dumps({"status": Status.SKIP}) == '{"status": "skip"}'  # a StrEnum is its value on the wire


def test_the_doctor_and_the_rules_use_the_one_status():
    assert DoctorStatus is Status
    row = Result(id="r", status=Status.SKIP, reason="", fix="", source="https://x")
    assert row.to_json()["status"] == "skip" and type(row.to_json()["status"]) is str
    assert BENCH_SCHEMA == 3


@pytest.mark.parametrize(
    ("judged", "expected"),
    [
        (True, "pass"),
        (False, "fail"),
        (None, "skip"),
        (1, "fail"),
        ("true", "fail"),
        ("pass", "fail"),
        ({}, "fail"),
    ],
)
def test_only_a_real_true_passes_and_only_none_is_a_skip(judged, expected):
    # the judged booleans come from images and files too: a truthy look-alike is not a pass
    assert status_of(judged) == expected
