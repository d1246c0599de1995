"""The one status vocabulary: every producer writes it, and nothing else passes."""

from __future__ import annotations

import json

from rocmstack.bench.report import SCHEMA as BENCH_SCHEMA
from rocmstack.doctor.model import Status as DoctorStatus
from rocmstack.rules.engine import Result
from rocmstack.status import FAILING, Status


def test_five_statuses_spelled_as_the_reports_write_them():
    assert [s.value for s in Status] == ["pass", "warn", "fail", "skip", "error"]
    assert set(FAILING) == {Status.FAIL, Status.ERROR}
    assert json.dumps({"status": Status.SKIP}) == '{"status": "skip"}'  # a StrEnum is its value on the wire


def test_the_doctor_and_the_rules_use_the_one_status():
    assert DoctorStatus is Status
    row = Result(id="r", status=Status.SKIP, reason="", fix="", source="https://x")
    assert row.to_json()["status"] == "skip" and type(row.to_json()["status"]) is str
    assert BENCH_SCHEMA == 2
