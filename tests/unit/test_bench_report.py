"""rollout.json's schema: reports of schema 1 (the H200 run committed as evidence) and 2 read in schema 3."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from rocmstack.bench.baseline import _device_kind, _entries, compare
from rocmstack.bench.report import SCHEMA, check_rates, upgrade
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
    assert {c["metric"] for c in checks} == {"tokens_per_s"}  # what schema 1 compared


def test_a_schema_2_reports_checks_name_the_whole_run_rate_they_compared_and_nothing_else_moves():
    two = upgrade(_recorded())  # schema 3 now: made schema 2 again, as an image of yesterday wrote it
    two["schema"] = 2
    two["results"][0]["status"] = "ok"  # not a schema-2 spelling: stays, and fails where it is read
    two["baseline"] = {
        "tolerance": 0.1,
        "checks": [
            {"engine": "reference", "batch": 1, "status": "pass", "tokens_per_s": 99.0,
             "baseline_tokens_per_s": 100.0, "ratio": 0.99},
            {"engine": "hf", "batch": 1, "status": "fail", "ok": True, "ratio": 0.5},  # ok: not read in 2
        ],
    }  # fmt: skip
    new = upgrade(copy.deepcopy(two))
    assert new["schema"] == SCHEMA == 3
    assert [c["metric"] for c in new["baseline"]["checks"]] == ["tokens_per_s", "tokens_per_s"]
    assert [c["status"] for c in new["baseline"]["checks"]] == ["pass", "fail"]
    assert check_rates(new["baseline"]["checks"][0]) == (99.0, 100.0)
    assert new["results"] == two["results"] and new["results"][0]["status"] == "ok"
    assert {k: v for k, v in new.items() if k not in ("schema", "baseline")} == {
        k: v for k, v in two.items() if k not in ("schema", "baseline")
    }


def test_a_schema_2_report_and_anything_else_come_back_as_given():
    current = upgrade(_recorded())
    assert upgrade(current) is current
    junk_schemas = ({"schema": s, "results": [{"status": "ok"}]} for s in ("1", 3, True, 1.0, 2.0, None))
    for junk in (None, [], "x", *junk_schemas):  # true == 1 and 1.0 == 1 in Python: neither is schema 1
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
