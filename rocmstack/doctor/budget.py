"""``--budget``: which checks fit in a time budget. Each check's cost is its probes' cost (costs.yaml, paid
once by the first check that needs a probe) plus its own; checks are taken in report order while the sum
fits, and every check left out is named with what it would have cost."""

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
    needs: Mapping[str, float]
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
    return Costs(float(data["start"]), dict(data["needs"]), dict(data.get("checks") or {}))


def parse_duration(text: str) -> float:
    """``10s``, ``2m``, ``1.5h`` or plain seconds -> seconds; InputError naming the value otherwise."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise InputError(f"--budget {quoted(text)} is not a positive duration", fix="e.g. --budget 10s or 2m")
    return float(m.group(1)) * UNITS[m.group(2)]


def plan(
    checks: Iterable[Check],
    budget_s: float,
    *,
    fast: bool = False,
    costs: Costs | None = None,
    extra: Mapping[str, float] | None = None,
) -> Plan:
    """``extra``: costs known only at run time (the burn-in lasts as long as it is asked to)."""
    costs = costs or load_costs()
    prices = {**costs.needs, **(extra or {})}
    paid: set[str] = set()
    total = costs.start
    run: list[Check] = []
    over: list[tuple[Check, float, tuple[str, ...]]] = []
    for check in checks:
        new = {n for n in check.needs if n not in paid and not (fast and n in FAST_SKIPS)}
        extra_s = costs.own(check) + sum(prices.get(n, 0.0) for n in new)
        if total + extra_s <= budget_s:
            run.append(check)
            paid |= new
            total += extra_s
        else:
            over.append((check, extra_s, tuple(sorted(new))))
    return Plan(tuple(run), tuple(over), total)
