"""--budget: durations, and which checks fit (each probe paid once, the rest skipped and named)."""

from __future__ import annotations

import pytest

from rocmstack.doctor import DoctorOptions, run_doctor
from rocmstack.doctor.budget import Costs, parse_duration, plan
from rocmstack.doctor.checks import BY_ID
from rocmstack.errors import InputError

COSTS = Costs(start=1.0, needs={"torch": 5.0, "ray": 4.0, "tools": 3.0}, checks={"gpu-ecc": 2.0})


@pytest.mark.parametrize(("text", "seconds"), [("10s", 10), ("2m", 120), ("1.5h", 5400), ("45", 45)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0s", "-1s", "10 minutes", "2d", "s"])
def test_bad_durations_name_the_value(text):
    with pytest.raises(InputError, match=r"--budget .* is not a positive duration"):
        parse_duration(text)


def test_a_probe_is_paid_once_and_what_does_not_fit_is_named():
    checks = [BY_ID[i] for i in ("torch-arch", "alloc-allreduce", "gpu-ecc", "gpu-count")]
    # torch-arch starts torch and nvml (5 s; nvml is not priced here), alloc-allreduce 0.05 s,
    # gpu-ecc starts tools (3 s) + its own 2 s: over a 10 s budget; gpu-count needs ray too: over
    chosen = plan(checks, 10.0, costs=COSTS)
    assert [c.id for c in chosen.run] == ["torch-arch", "alloc-allreduce"]
    over = {c.id: (extra, probes) for c, extra, probes in chosen.over}
    assert over["gpu-ecc"] == (5.0, ("tools",))
    assert over["gpu-count"][1] == ("amdsmi", "ray", "tools")
    assert chosen.estimate_s == pytest.approx(6.1)


def test_fast_runs_torch_checks_at_no_cost():
    chosen = plan([BY_ID["torch-arch"]], 1.2, fast=True, costs=COSTS)
    assert [c.id for c in chosen.run] == ["torch-arch"]


def test_run_doctor_reports_the_checks_over_budget_as_skips():
    report = run_doctor(DoctorOptions(fast=True, budget_s=1.5, only=("nofile-limit", "gpu-ecc")))
    rows = {c["id"]: c for c in report["checks"]}
    assert rows["nofile-limit"]["status"] != "skip" or "budget" not in rows["nofile-limit"]["summary"]
    assert rows["gpu-ecc"]["status"] == "skip"
    assert rows["gpu-ecc"]["summary"].startswith("over the budget: would add ~5 s (starting tools)")
    assert report["budget"]["over"] == ["gpu-ecc"]
