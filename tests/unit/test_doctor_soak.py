"""The soak harness (rocmstack.doctor.soak, `rocmstack soak`): real doctor processes, counted per check."""

from __future__ import annotations

import json

from rocmstack.doctor.soak import soak
from tests.conftest import run_cli


def test_a_healthy_node_counts_no_false_failure_and_a_fault_is_named_per_check():
    healthy = soak(["--fast", "--expect-gpus", "0"], 3, timeout=120.0, interval_s=300.0)
    assert [r.verdict.split()[0] for r in healthy.runs] == ["READY"] * 3, healthy.runs
    assert healthy.false_runs == 0 and healthy.per_day() == 0.0
    # this node has no GPU: a health check that expects 3 fails every run, on gpu-count alone
    faulty = soak(["--fast", "--expect-gpus", "3"], 2, timeout=120.0, interval_s=300.0)
    data = faulty.as_dict()
    assert data["false_failing_runs"] == 2 and data["by_check"] == {"gpu-count": 2}
    assert data["per_day"] == 288.0  # every run fails, one run every 5 minutes
    assert data["failures"][0]["checks"][0]["summary"].startswith("--expect-gpus 3, but 0 visible")


def test_the_command_exits_1_on_a_false_failure_and_refuses_bad_input():
    out = run_cli("soak", "--runs", "1", "--json", "--", "--fast", "--expect-gpus", "3")
    assert out.code == 1 and json.loads(out.out)["by_check"] == {"gpu-count": 1}
    bad = run_cli("soak", "--runs", "0", "--", "--fast")
    assert bad.code == 2 and "--runs 0 is below 1" in bad.err
    mixed = run_cli("soak", "--runs", "1", "--", "--fast", "--json")
    assert mixed.code == 2 and "put --json before `--`" in mixed.err
