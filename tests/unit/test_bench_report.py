"""rollout.json's schema: a schema-1 report (the H200 run committed as evidence) reads in schema 2."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from rocmstack.bench.baseline import _device_kind, _entries, compare
from rocmstack.bench.report import SCHEMA, upgrade
from rocmstack.status import Status

EVIDENCE = (
    Path(__file__).parents[2] / "docs/evidence/engine-stack-h200-2026-12-01/validate/bench/rollout.json"
)


def _recorded():
    return json.loads(EVIDENCE.read_text())


def test_a_schema_1_report_moves_ok_to_pass_and_nothing_else():
    old = _recorded()
    assert old["schema"] == 1 and {r["status"] for r in old["results"]} == {"ok", "skip"}
    new = upgrade(copy.deepcopy(old))
    assert new["schema"] == SCHEMA
    for key in ("results", "engines", "weight_sync"):
        assert [r["status"] for r in new[key]] == [
            "pass" if r["status"] == "ok" else r["status"] for r in old[key]
        ]
        # every other field of every row as recorded
        assert [{k: v for k, v in r.items() if k != "status"} for r in new[key]] == [
            {k: v for k, v in r.items() if k != "status"} for r in old[key]
        ]
    rest = {k: v for k, v in old.items() if k not in ("schema", "results", "engines", "weight_sync")}
    assert {k: v for k, v in new.items() if k in rest} == rest
    assert old == _recorded()  # the input is not changed in place


def test_a_schema_1_baseline_check_carries_a_status_and_only_a_true_ok_passes():
    old = _recorded()
    old["baseline"] = {
        "tolerance": 0.1,
        "checks": [  # as schema 1 wrote them: a boolean ok
            {"engine": "reference", "batch": 1, "ratio": 1.02, "ok": True},
            {"engine": "reference", "batch": 64, "ratio": 0.5, "ok": False},
            {"engine": "hf", "batch": 64, "ratio": 1.0, "ok": "yes"},  # not ours: not a pass
        ],
        "passed": False,
    }
    checks = upgrade(old)["baseline"]["checks"]
    assert [c["status"] for c in checks] == ["pass", "fail", "fail"]
    assert all("ok" not in c for c in checks) and checks[0]["ratio"] == 1.02


def test_a_schema_2_report_and_anything_else_come_back_as_given():
    current = upgrade(_recorded())
    assert upgrade(current) is current
    for junk in (None, [], "x", {"schema": "1"}, {"schema": 3, "results": [{"status": "ok"}]}):
        assert upgrade(junk) is junk
    # schema 1 with the wrong shapes: kept as they are (the reader's own checks name them)
    odd = {"schema": 1, "results": "x", "engines": [1, None, {"status": True}], "baseline": {"checks": 3}}
    assert upgrade(odd) == {**odd, "schema": SCHEMA}


def test_a_recorded_schema_1_report_read_today_is_its_own_baseline():
    """Read through upgrade, the recorded passing rows are baseline entries, and each checks as a pass."""
    report = upgrade(_recorded())
    entries = _entries(report)
    assert len(entries) == 4  # the four rows that ran (sglang was skipped)
    verdict = compare(report, {"device": _device_kind(report), "entries": entries})
    assert [c["status"] for c in verdict["checks"]] == [Status.PASS] * 4 and verdict["passed"] is True
