"""``--budget``: which checks fit in a time budget. A run costs its start, the slowest of the probes it
starts (they run in parallel), the level-2 probes it starts (one after another) and each check's own work
(costs.yaml); a probe is paid by the first check that needs it. Checks are taken in report order while the
run fits, and every check left out is named with what it would have added."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from rocmstack.doctor.model import Check
from rocmstack.errors import InputError, quoted

COSTS_FILE = Path(__file__).with_name("costs.yaml")
DEFAULT_OWN_COST = 0.05
UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}
# probes that --fast leaves out: their checks skip at no cost
FAST_SKIPS = frozenset({"torch", "ray", "vllm"})


@dataclass(frozen=True)
class Costs:
    start: float
    parallel: Mapping[str, float]  # probes and tools, started together
    sequential: Mapping[str, float]  # level-2 probes and the burn-in, one after another
    checks: Mapping[str, float]

    def own(self, check: Check) -> float:
        return self.checks.get(check.id, DEFAULT_OWN_COST)


@dataclass(frozen=True)
class Plan:
    run: tuple[Check, ...]
    # left out, with the seconds it would have added and the probes it would have had to start
    over: tuple[tuple[Check, float, tuple[str, ...]], ...]
    estimate_s: float  # what the chosen checks are expected to take, start included


@functools.cache
def load_costs(path: Path = COSTS_FILE) -> Costs:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return Costs(
        float(data["start"]), dict(data["parallel"]), dict(data["sequential"]), dict(data.get("checks") or {})
    )


def parse_duration(text: str) -> float:
    """``10s``, ``2m``, ``1.5h`` or plain seconds -> seconds; InputError naming the value otherwise."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise InputError(f"--budget {quoted(text)} is not a positive duration", fix="e.g. --budget 10s or 2m")
    return float(m.group(1)) * UNITS[m.group(2)]


def default_level(given: int | None, budget_s: float | None) -> int:
    """--level as given; else 1, or with --budget 2: the budget then picks among level 1 and 2's checks
    (the cluster and the burn-in are never started by a budget alone)."""
    if given is not None:
        return given
    return 2 if budget_s is not None else 1


def plan(
    checks: Iterable[Check],
    budget_s: float,
    *,
    fast: bool = False,
    costs: Costs | None = None,
    extra: Mapping[str, float] | None = None,
) -> Plan:
    """``extra``: sequential costs known only at run time (the burn-in lasts as long as it is asked to)."""
    costs = costs or load_costs()
    sequential = {**costs.sequential, **(extra or {})}
    paid: set[str] = set()
    slowest = sequential_s = own_s = 0.0
    run: list[Check] = []
    over: list[tuple[Check, float, tuple[str, ...]]] = []
    for check in checks:
        new = {n for n in check.needs if n not in paid and not (fast and n in FAST_SKIPS)}
        new_slowest = max([slowest, *(costs.parallel.get(n, 0.0) for n in new)])
        added = (
            new_slowest
            - slowest
            + sum(sequential.get(n, 0.0) for n in new if n not in costs.parallel)
            + costs.own(check)
        )
        if costs.start + slowest + sequential_s + own_s + added <= budget_s:
            run.append(check)
            paid |= new
            sequential_s += sum(sequential.get(n, 0.0) for n in new if n not in costs.parallel)
            slowest = new_slowest
            own_s += costs.own(check)
        else:
            over.append((check, added, tuple(sorted(new))))
    return Plan(tuple(run), tuple(over), costs.start + slowest + sequential_s + own_s)
