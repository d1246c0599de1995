"""--budget: durations, and which checks fit (each probe paid once, the rest skipped and named)."""

from __future__ import annotations

import pytest

from rocmstack.doctor import DoctorOptions, run_doctor
from rocmstack.doctor.budget import Costs, default_level, parse_duration, plan
from rocmstack.doctor.checks import BY_ID
from rocmstack.errors import InputError

COSTS = Costs(
    start=1.0,
    parallel={"torch": 5.0, "ray": 4.0, "tools": 3.0, "amdsmi": 1.0, "nvml": 1.0},
    sequential={"collectives": 35.0, "gpu-health": 15.0},
    checks={"gpu-ecc": 2.0},
)


@pytest.mark.parametrize(("text", "seconds"), [("10s", 10), ("2m", 120), ("1.5h", 5400), ("45", 45)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0s", "-1s", "10 minutes", "2d", "s"])
def test_bad_durations_name_the_value(text):
    with pytest.raises(InputError, match=r"--budget .* is not a positive duration"):
        parse_duration(text)


def test_probes_run_in_parallel_so_a_run_costs_the_slowest_and_what_does_not_fit_is_named():
    checks = [
        BY_ID[i] for i in ("torch-arch", "alloc-allreduce", "gpu-ecc", "gpu-count", "gpu-hbm-bandwidth")
    ]
    # torch-arch starts torch and nvml (5 s, in parallel), alloc-allreduce 0.05 s, gpu-ecc starts tools
    # (3 s, under torch's 5) + its own 2 s, gpu-count adds ray and amdsmi (both under 5 s): 1 + 5 + 2.15;
    # the HBM probe runs after the snapshot: 15 s more than a 10 s budget has
    chosen = plan(checks, 10.0, costs=COSTS)
    assert [c.id for c in chosen.run] == ["torch-arch", "alloc-allreduce", "gpu-ecc", "gpu-count"]
    assert chosen.estimate_s == pytest.approx(8.15)
    ((check, added, probes),) = chosen.over
    assert (check.id, added, probes) == ("gpu-hbm-bandwidth", 15.05, ("gpu-health",))
    tight = plan(checks, 5.0, costs=COSTS)
    assert [c.id for c in tight.run] == ["alloc-allreduce"]  # every other check needs a probe of 3 s or more
    assert {c.id: p for c, _, p in tight.over}["gpu-count"] == (
        "amdsmi",
        "nvml",
        "ray",
        "tools",
        "torch",
    )


def test_fast_runs_torch_checks_at_no_cost():
    chosen = plan([BY_ID["torch-arch"]], 2.1, fast=True, costs=COSTS)  # nvml: 1 s
    assert [c.id for c in chosen.run] == ["torch-arch"]


def test_run_doctor_reports_the_checks_over_budget_as_skips():
    report = run_doctor(DoctorOptions(fast=True, budget_s=1.5, only=("nofile-limit", "gpu-ecc")))
    rows = {c["id"]: c for c in report["checks"]}
    assert rows["nofile-limit"]["status"] != "skip" or "budget" not in rows["nofile-limit"]["summary"]
    assert rows["gpu-ecc"]["status"] == "skip"
    assert rows["gpu-ecc"]["summary"].startswith(
        "over the budget: would add ~5 s (starting tools)"
    )  # 3 s + 2 s
    assert report["budget"]["over"] == ["gpu-ecc"]


def test_a_budget_without_a_level_chooses_among_levels_1_and_2():
    assert default_level(None, None) == 1
    assert default_level(None, 120.0) == 2
    assert default_level(4, 900.0) == 4
    level2 = [BY_ID[i] for i in ("nofile-limit", "gpu-hbm-bandwidth", "collective-bandwidth")]
    fits = plan(level2, 30.0, costs=COSTS)
    assert [c.id for c in fits.run] == ["nofile-limit", "gpu-hbm-bandwidth"]
    assert [c.id for c, _, _ in fits.over] == ["collective-bandwidth"]


def test_checks_after_a_spent_budget_are_skipped_not_overrun(monkeypatch):
    import time as _time

    from rocmstack.doctor import runner

    real = _time.monotonic
    calls = {"n": 0}

    def slow_clock() -> float:  # every reading of the clock is 0.4 s later than the last: the probes overran
        calls["n"] += 1
        return real() + 0.4 * calls["n"]

    monkeypatch.setattr(runner.time, "monotonic", slow_clock)
    report = run_doctor(DoctorOptions(fast=True, budget_s=1.5, only=("nofile-limit", "dev-shm", "ray-env")))
    spent = [c["id"] for c in report["checks"] if "was spent before this check" in c["summary"]]
    assert spent and spent == report["budget"]["over"][-len(spent) :]
