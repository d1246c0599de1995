"""The doctor's collectors: each need has one collector, and a run starts only those its checks need."""

from __future__ import annotations

import dataclasses

from rocmstack.doctor.budget import VENDOR_TOOLS, load_costs
from rocmstack.doctor.checks import ALL_CHECKS
from rocmstack.doctor.collect import collectors
from rocmstack.doctor.collect.collectors import (
    COLLECTORS,
    PROBES,
    Collector,
    collect,
    needs_of,
    run_time_costs,
    snapshot_request,
)
from rocmstack.doctor.model import BurninOptions, DoctorOptions


def _fake(name: str, provides: frozenset[str], seen: list, **kw) -> Collector:
    def run(opts, wanted, snap, progress):
        seen.append((name, wanted))
        return snap if snap is not None else "snap"

    return Collector(name, provides, run, **kw)


class _Snap:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}


def test_every_need_of_a_node_check_has_exactly_one_collector():
    provided = [need for c in COLLECTORS for need in c.provides]
    assert len(provided) == len(set(provided))
    node_needs = needs_of(c for c in ALL_CHECKS if c.scope == "node")
    assert node_needs <= set(provided)


def test_every_need_the_budget_charges_is_a_collectors():
    costs = load_costs()
    provided = {need for c in COLLECTORS for need in c.provides}
    assert set(costs.parallel) <= provided
    assert set(costs.sequential) <= provided


def test_only_the_collectors_the_needs_name_run_and_the_always_one(monkeypatch):
    seen: list = []
    snap = _Snap()

    def base(opts, wanted, _snap, progress):
        seen.append(("base", wanted))
        return snap

    chain = (
        Collector("base", frozenset({"a"}), base, always=True, timed=False),
        _fake("b", frozenset({"b", "c"}), seen),
        _fake("d", frozenset({"d"}), seen),
    )
    got = collect(DoctorOptions(), frozenset({"c"}), collectors=chain)
    assert got is snap
    assert seen == [("base", frozenset()), ("b", frozenset({"c"}))]
    assert set(snap.timings) == {"b"}  # the untimed base records its own parts


def test_the_burn_in_adds_its_minutes_to_the_budget():
    assert run_time_costs(DoctorOptions(burnin=BurninOptions(minutes=2))) == {
        "burn-in": 2 * 60 + collectors.BURN_IN_OVERHEAD_S
    }


def test_the_snapshot_request_starts_the_probes_and_tool_sets_wanted():
    opts = DoctorOptions(deep=True, env={"PATH": "/bin"})
    req = snapshot_request(opts, frozenset({"torch", "tools", "partition", "collectives"}))
    assert req.probes == {"torch"}
    assert req.tools == VENDOR_TOOLS | {"amd-smi-partition"}
    assert req.env == {"PATH": "/bin", "ROCMSTACK_PROBE_DEEP": "1"}
    assert snapshot_request(dataclasses.replace(opts, deep=False), PROBES).tools == frozenset()
