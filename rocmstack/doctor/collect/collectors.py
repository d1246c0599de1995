"""Which collector provides which of the checks' ``needs``, and running exactly those a set of checks needs.

A node run collects in this order: the snapshot (guarded probes and vendor tools started together), the
level-2 active probes through Ray, then the burn-in. Each collector names the needs it provides; one whose
needs no selected check has is not started, except the snapshot, which every check and the report read.
A collector's run-time costs (the burn-in lasts as long as it is asked to) go to --budget through the same
keys as costs.yaml's."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from rocmstack.doctor.budget import VENDOR_TOOLS
from rocmstack.doctor.collect.active import ACTIVE_PROBES, run_active
from rocmstack.doctor.collect.burnin import run_burnin
from rocmstack.doctor.holders import probe_gpus
from rocmstack.doctor.model import Check, DoctorOptions, jobs_text
from rocmstack.platform.snapshot import Snapshot, SnapshotRequest, take_snapshot
from rocmstack.platform.tools import current_python

Progress = Callable[[str], None]
# the snapshot's guarded probes (rocmstack/platform/probes/*_probe.py) and its tool sets
PROBES = frozenset({"torch", "ray", "vllm", "amdsmi", "nvml", "loads"})
TOOL_SETS: Mapping[str, frozenset[str]] = {
    "tools": VENDOR_TOOLS,
    "partition": frozenset({"amd-smi-partition"}),
}
BURN_IN = frozenset({"burn-in"})
# the burn-in's start, its telemetry and the memory pattern test, beyond its --minutes
BURN_IN_OVERHEAD_S = 30.0


@dataclass(frozen=True)
class Collector:
    name: str  # its key in the report's timings
    provides: frozenset[str]
    # (options, the needs wanted of it, the snapshot so far or None for the first) -> the snapshot with its data
    run: Callable[[DoctorOptions, frozenset[str], Snapshot | None, Progress], Snapshot]
    always: bool = False  # run whatever the checks need (the snapshot: the report's platform reads it)
    timed: bool = True  # its own seconds go to the report's timings (the snapshot times its parts itself)
    costs: Callable[[DoctorOptions], Mapping[str, float]] = lambda _opts: {}  # run-time costs, by need


def needs_of(checks: Iterable[Check]) -> frozenset[str]:
    return frozenset().union(*(c.needs for c in checks))


def snapshot_request(opts: DoctorOptions, wanted: frozenset[str]) -> SnapshotRequest:
    env = opts.environ()
    return SnapshotRequest(
        probes=wanted & PROBES,
        tools=frozenset().union(*(tools for need, tools in TOOL_SETS.items() if need in wanted)),
        fast=opts.fast,
        python=opts.python or current_python(),
        env={**env, "ROCMSTACK_PROBE_DEEP": "1"} if opts.deep else env,
        probe_timeout=opts.probe_timeout,
        tool_timeout=opts.tool_timeout,
        sysfs_root=opts.sysfs_root,
        dev_root=opts.dev_root,
        proc_root=opts.proc_root,
    )


def _snapshot(opts: DoctorOptions, wanted: frozenset[str], _snap: Snapshot | None, _p: Progress) -> Snapshot:
    return take_snapshot(snapshot_request(opts, wanted))


def _with_active(snap: Snapshot | None, found: Mapping[str, object]) -> Snapshot:
    assert snap is not None, "the snapshot is collected first"
    return dataclasses.replace(snap, active={**(snap.active or {}), **found})


def _active(
    opts: DoctorOptions, wanted: frozenset[str], snap: Snapshot | None, progress: Progress
) -> Snapshot:
    assert snap is not None, "the snapshot is collected first"
    # under a Slurm hook, level 2 never touches a GPU a job is using (Slurm gave it, or a job's process holds it)
    scoped = probe_gpus(snap, opts)
    if scoped is None:
        return _with_active(snap, run_active(opts, wanted, progress))
    free, busy = scoped
    left = "; ".join(f"GPU {gpu}: {jobs_text(jobs)}" for gpu, jobs in sorted(busy.items()))
    if not free:
        why = f"every GPU is in use by a job ({left})" if busy else "this hook has no GPU to probe"
        return _with_active(snap, {"skipped": f"{why}: level 2 runs on free GPUs only, so level 1 only"})
    found = run_active(opts, wanted, progress, gpus=(snap.vendor(), free))
    return _with_active(snap, {**found, "gpus": list(free), "left_to_jobs": left})


def _burnin(
    opts: DoctorOptions, _wanted: frozenset[str], snap: Snapshot | None, progress: Progress
) -> Snapshot:

    return _with_active(snap, {"burn_in": run_burnin(opts, progress)})


def _burnin_costs(opts: DoctorOptions) -> Mapping[str, float]:
    return {"burn-in": opts.burnin.minutes * 60 + BURN_IN_OVERHEAD_S}


COLLECTORS: tuple[Collector, ...] = (
    Collector("snapshot", PROBES | frozenset(TOOL_SETS), _snapshot, always=True, timed=False),
    Collector("active", ACTIVE_PROBES, _active),
    Collector("burn-in", BURN_IN, _burnin, costs=_burnin_costs),
)


def run_time_costs(opts: DoctorOptions, collectors: Iterable[Collector] = COLLECTORS) -> dict[str, float]:
    """The sequential costs known only at run time, by need (``budget.plan``'s ``extra``)."""
    return {need: s for c in collectors for need, s in c.costs(opts).items()}


def collect(
    opts: DoctorOptions,
    needs: frozenset[str],
    progress: Progress = lambda _m: None,
    collectors: Iterable[Collector] = COLLECTORS,
) -> Snapshot:
    """Run, in order, every collector that provides one of ``needs`` (and those that always run)."""
    snap: Snapshot | None = None
    for collector in collectors:
        wanted = needs & collector.provides
        if not wanted and not collector.always:
            continue
        t0 = time.monotonic()
        snap = collector.run(opts, wanted, snap, progress)
        if collector.timed:
            snap.timings[collector.name] = time.monotonic() - t0
    assert snap is not None, "the snapshot collector always runs"
    return snap
