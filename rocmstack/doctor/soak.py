"""The doctor run again and again on a node known to be healthy: every failure it reports there is a false one.

Each run is a fresh process (`rocmstack doctor --json ...`), as a health check starts one, so start-up races
count. The figure is false failures per run and per day at a given interval, with the checks that caused them;
a run that judged nothing is counted apart (it is not a pass either).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rocmstack.platform.tools import current_python, run_tool

SCHEMA = "rocmstack.soak/1"
FAILING = ("fail", "error")


@dataclass(frozen=True)
class SoakRun:
    index: int
    seconds: float
    exit_code: int | None
    verdict: str
    failures: tuple[tuple[str, str], ...]  # (check id, summary) of each failing row
    judged: int
    problem: str | None = None  # the run itself did not give a report (timed out, crashed)


@dataclass(frozen=True)
class SoakResult:
    args: tuple[str, ...]
    runs: tuple[SoakRun, ...]
    interval_s: float
    by_check: dict[str, int] = field(default_factory=dict)

    @property
    def false_runs(self) -> int:
        return sum(1 for r in self.runs if r.failures or r.problem)

    def per_day(self) -> float | None:
        """False failing runs a day for a health check every ``interval_s`` seconds."""
        if not self.runs or self.interval_s <= 0:
            return None
        return self.false_runs / len(self.runs) * 86400.0 / self.interval_s

    def as_dict(self) -> dict[str, Any]:
        per_day = self.per_day()
        return {
            "schema": SCHEMA,
            "args": list(self.args),
            "runs": len(self.runs),
            "false_failing_runs": self.false_runs,
            "rate": round(self.false_runs / len(self.runs), 4) if self.runs else None,
            "interval_s": self.interval_s,
            "per_day": None if per_day is None else round(per_day, 3),
            "by_check": dict(self.by_check),
            "judged_nothing": sum(1 for r in self.runs if r.judged == 0 and not r.problem),
            "seconds": [r.seconds for r in self.runs],
            "failures": [
                {"run": r.index, "exit_code": r.exit_code, "problem": r.problem,
                 "checks": [{"id": i, "summary": s} for i, s in r.failures]}
                for r in self.runs if r.failures or r.problem
            ],
        }  # fmt: skip


def one_run(index: int, args: Sequence[str], timeout: float) -> SoakRun:
    run = run_tool([current_python(), "-m", "rocmstack", "doctor", "--json", *args], timeout=timeout)
    try:
        report = json.loads(run.stdout)
    except ValueError:
        report = None
    if not isinstance(report, dict):
        why = (
            f"timed out after {run.seconds:.0f} s"
            if run.timed_out
            else f"exited {run.returncode} with no report: {(run.stderr or '').strip()[-300:]}"
        )
        return SoakRun(index, round(run.seconds, 2), run.returncode, "NO REPORT", (), 0, why)
    failures = tuple(
        (str(c.get("id")), str(c.get("summary")))
        for c in report.get("checks", [])
        if c.get("status") in FAILING
    )
    return SoakRun(
        index, round(run.seconds, 2), run.returncode, str(report.get("verdict", "?")), failures,
        int(report.get("judged") or 0),
    )  # fmt: skip


def soak(
    args: Sequence[str],
    runs: int,
    *,
    timeout: float,
    interval_s: float,
    progress: Callable[[str], None] = lambda _m: None,
) -> SoakResult:
    done: list[SoakRun] = []
    t0 = time.monotonic()
    for i in range(1, runs + 1):
        left = (time.monotonic() - t0) / (i - 1) * (runs - i + 1) if i > 1 else None
        progress(f"run {i}/{runs}" + (f" (about {left:.0f} s left)" if left is not None else ""))
        run = one_run(i, args, timeout)
        if run.failures or run.problem:
            what = ", ".join(c for c, _ in run.failures) or run.problem
            progress(f"run {i}: false failure: {what}")
        done.append(run)
    counts = Counter(c for r in done for c, _ in r.failures)
    return SoakResult(tuple(args), tuple(done), interval_s, dict(counts.most_common()))
