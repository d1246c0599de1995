"""Run the selected checks on this node: ``run_doctor(options) -> report dict`` (the in-process API that
``rocmstack doctor`` and ``rocmstack validate`` call). Never raises for what it finds; raises InputError
for an unknown check id."""

from __future__ import annotations

import dataclasses
import datetime as dt
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rocmstack import __version__
from rocmstack.advisories.match import known_causes
from rocmstack.doctor.budget import node_of, plan
from rocmstack.doctor.checks import ALL_CHECKS, BY_ID
from rocmstack.doctor.collect.collectors import collect, needs_of, run_time_costs
from rocmstack.doctor.history import append_run
from rocmstack.doctor.model import SCHEMA, Check, DoctorOptions, errored
from rocmstack.doctor.problems import load_classes, problem_of
from rocmstack.doctor.report import DoctorReport
from rocmstack.errors import ExitCode, InputError, RocmstackError
from rocmstack.output import warn
from rocmstack.platform import rdma
from rocmstack.redact import env_dump, scrub, secret_values
from rocmstack.status import FAILING, Status

LEVELS = (1, 2, 3, 4)
# the statuses that are a judgement of the node; a skip (the check's own or --budget's) is none
JUDGED = ("pass", "warn", "fail", "error")
NOTHING_JUDGED = "NOTHING JUDGED"


def select_checks(
    only: tuple[str, ...] = (), skip: tuple[str, ...] = (), level: int | None = None
) -> list[Check]:
    """The checks to run; ``level`` None keeps every level (listing, validating ids)."""
    for given in (*only, *skip):
        if given not in BY_ID:
            raise InputError(f"unknown check id {given!r}", fix="see `rocmstack doctor --list-checks`")
    if level is not None and level not in LEVELS:
        raise InputError(f"--level {level} is not 1, 2, 3 or 4", fix="e.g. --level 2")
    if level is not None:
        for given in only:
            if BY_ID[given].level > level:
                raise InputError(
                    f"check {given!r} runs at --level {BY_ID[given].level}",
                    fix=f"add --level {BY_ID[given].level}",
                )
    chosen = [
        c
        for c in ALL_CHECKS
        if (not only or c.id in only) and c.id not in skip and (level is None or c.level <= level)
    ]
    if not chosen:
        raise InputError("--only/--skip leave no check to run", fix="see `rocmstack doctor --list-checks`")
    return chosen


def run_check(check: Check, data: object, opts: DoctorOptions) -> dict:
    """One check's result as the report writes it; a check that crashes is an error, never an exception."""
    c0 = time.monotonic()
    try:
        result = check.run(data, opts)
    except Exception as exc:  # a check bug must not hide the other findings
        result = errored(f"check crashed: {type(exc).__name__}: {exc}")
    row: dict[str, Any] = {
        "id": check.id,
        "group": check.group,
        "title": check.title,
        "status": result.status.value,
        "summary": result.summary,
        "details": list(result.details),
        "fix": result.fix,
        "source": check.source,
        "seconds": round(time.monotonic() - c0, 4),
    }
    if result.data is not None:
        row["data"] = dict(result.data)
    if result.status.value in ("fail", "error", "warn"):
        row["problem"] = problem_of(check.id, result, load_classes())
    return row


def over_budget_row(check: Check, extra_s: float, probes: tuple[str, ...], budget_s: float) -> dict:
    """The row of a check that --budget left out: a skip that names what it would have cost."""
    needs = f" (starting {', '.join(probes)})" if probes else ""
    return {
        "id": check.id,
        "group": check.group,
        "title": check.title,
        "status": Status.SKIP.value,
        "summary": f"over the budget: would add ~{extra_s:g} s{needs} to a --budget of {budget_s:g} s",
        "details": [],
        "fix": None,
        "source": check.source,
        "seconds": 0.0,
    }


def name_known_causes(rows: list[dict], opts: DoctorOptions) -> None:
    """A failing row whose text the field's error signatures know gets their advisories (id, fix, source)."""
    for row in rows:
        if row["status"] in ("fail", "error"):
            known = known_causes("\n".join([row["summary"], *row["details"]]), opts.advisories_dirs)
            if known:
                row["advisories"] = known


def run_doctor(options: DoctorOptions | None = None, progress: Callable[[str], None] | None = None) -> dict:
    opts = options or DoctorOptions()
    if opts.env is None:
        # The environment as the user gave it, read once: Ray's start (level 2) sets RAY_* variables of its
        # own in this process, which no check must count as the user's.
        opts = dataclasses.replace(opts, env=opts.environ())
    if opts.expect_gpus is not None and opts.expect_gpus < 0:
        raise InputError(
            f"--expect-gpus {opts.expect_gpus} is negative", fix="give the number of GPUs, e.g. 8"
        )
    selected = [c for c in select_checks(opts.only, opts.skip, opts.level) if c.scope == "node"]
    checks, over = selected, []
    budget: dict[str, Any] | None = None
    if opts.budget_s is not None:
        chosen = plan(
            selected,
            opts.budget_s,
            fast=opts.fast,
            extra=run_time_costs(opts),
            node=node_of(opts),
            comm_inits=opts.active.comm_inits,
        )
        checks, over = list(chosen.run), list(chosen.over)
        budget = {
            "seconds": opts.budget_s,
            "estimate_s": round(chosen.estimate_s, 2),
            "over": [c.id for c, _, _ in over],
        }
        if chosen.comm_inits is not None:
            budget["comm_inits"] = chosen.comm_inits
        # no probe or tool may outlive the budget, whatever the estimates said
        opts = dataclasses.replace(
            opts,
            probe_timeout=min(opts.probe_timeout, opts.budget_s),
            tool_timeout=min(opts.tool_timeout, opts.budget_s),
            active=dataclasses.replace(
                opts.active,
                comm_inits=chosen.comm_inits or opts.active.comm_inits,
                timeout=min(opts.active.timeout, opts.budget_s),
            ),
        )
    started = dt.datetime.now(dt.UTC)
    t0 = time.monotonic()
    env = opts.environ()
    snap = collect(opts, needs_of(checks), progress or (lambda _m: None))
    by_id: dict[str, dict[str, Any]] = {}
    for check in checks:
        if opts.budget_s is None:
            by_id[check.id] = run_check(check, snap, opts)
            continue
        # the estimates were wrong if the probes took the budget: what is left is skipped, never overrun
        left = opts.budget_s - (time.monotonic() - t0)
        if left <= 0:
            row = over_budget_row(check, 0.0, (), opts.budget_s)
            row["summary"] = (
                f"over the budget: the --budget of {opts.budget_s:g} s was spent before this check"
            )
            by_id[check.id] = row
            if budget is not None:
                budget["over"].append(check.id)
            continue
        by_id[check.id] = run_check(
            check, snap, dataclasses.replace(opts, tool_timeout=min(opts.tool_timeout, left))
        )
    for check, extra, probes in over:
        by_id[check.id] = over_budget_row(check, extra, probes, opts.budget_s or 0.0)
    results = [by_id[c.id] for c in selected]
    name_known_causes(results, opts)
    try:
        platform = {
            "vendor": snap.vendor(),
            "rocm_env": snap.rocm_env(),
            "python": snap.python_version,
            "physical_gpus": snap.physical_count(),
            "visible_gpus": snap.masks().visible_count,
            # The driver's gfx target of each GPU (KFD topology): the arch a validation report ran on.
            "gpu_archs": sorted({n.arch for n in snap.kfd or []}),
        }
        sources = [s.as_dict() for s in snap.sources()]
    except Exception as exc:  # same rule as a check: report, never crash
        platform, sources = {"error": f"{type(exc).__name__}: {exc}"}, []
    counts = {s.value: sum(r["status"] == s.value for r in results) for s in Status}
    failing = [str(r["id"]) for r in results if r["status"] in {s.value for s in FAILING}]
    judged = sum(counts[s] for s in JUDGED)
    over_ids = set(budget["over"]) if budget is not None else set()
    report = {
        "schema": SCHEMA,
        "rocmstack_version": __version__,
        "mode": "node",
        "host": socket.gethostname(),
        "started_at": started.isoformat(timespec="seconds"),
        "seconds": round(time.monotonic() - t0, 3),
        "options": {
            "fast": opts.fast,
            "deep": opts.deep,
            "expect_gpus": opts.expect_gpus,
            "only": list(opts.only),
            "skip": list(opts.skip),
            "tensor_parallel": opts.tensor_parallel,
            "level": opts.level,
            "model": str(opts.model_dir) if opts.model_dir is not None else None,
            "gpu_archs": list(opts.gpu_archs),
            "kv_cache_dtype": opts.kv_cache_dtype,
            "models": list(opts.models),
        },
        "platform": platform,
        "sources": sources,
        "checks": results,
        "summary": counts,
        # A run that judged nothing is no pass: a hook must not resume a node on it.
        "passed": not failing and judged > 0,
        "judged": judged,
        "verdict": verdict_line(counts, failing, over=sum(r["id"] in over_ids for r in results)),
        "environment": env_dump(env),
        "timings": {k: round(v, 3) for k, v in snap.timings.items()},
        "not_run": dict(snap.not_run),
    }
    if snap.active:
        report["active"] = snap.active
    if budget is not None:
        report["budget"] = budget
    report["facts"] = node_facts(opts)
    scrubbed: dict = scrub(DoctorReport.produce(report).wire(), secret_values(env))
    if opts.history_dir is not None:
        # The run is judged already: a history file someone swapped for a link or FIFO mid-run loses this
        # run's line (said), never the verdict (a Prolog's exit 2 would drain the node for it).
        try:
            scrubbed["history"] = {"file": str(append_run(opts.history_dir, scrubbed))}
        except RocmstackError as exc:
            scrubbed["history"] = {"error": exc.one_line()}
            warn(exc.one_line())
    return scrubbed


def _first_line(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[0][:200]
    except (OSError, IndexError):
        return None


def node_facts(opts: DoctorOptions) -> dict:
    """What must be identical on every node of a cluster (compared at level 3)."""

    root = opts.sysfs_root.parent
    env = opts.environ()
    ports = rdma.ports(opts.sysfs_root)
    return {
        "rocm_version": _first_line(root / "opt" / "rocm" / ".info" / "version"),
        "amdgpu_driver": _first_line(opts.sysfs_root / "module" / "amdgpu" / "version"),
        "nvidia_driver": _first_line(opts.proc_root / "driver" / "nvidia" / "version"),
        "NCCL_IB_GID_INDEX": env.get("NCCL_IB_GID_INDEX"),
        "roce_v2_gid_index": sorted({g.index for p in ports for g in p.roce_v2_ipv4()}) or None,
        "rdma_devices": rdma.devices(opts.sysfs_root),
        "gpu_vbios": sorted(
            {
                v
                for p in (opts.sysfs_root / "class" / "drm").glob("card*/device/vbios_version")
                if (v := _first_line(p))
            }
        )
        or None,
    }


def verdict_line(counts: dict[str, int], failing: list[str], over: int = 0) -> str:
    """``over``: how many of the skips --budget left out (they are named apart from a check's own skip)."""
    tally = ", ".join(f"{counts[s]} {s}" for s in ("pass", "warn", "fail", "error", "skip") if counts.get(s))
    if failing:
        return f"NOT READY: {', '.join(failing)} ({tally})"
    total = sum(counts.values())
    if not sum(counts.get(s, 0) for s in JUDGED):
        why = [f"{over} over the budget"] if over else []
        if counts.get("skip", 0) - over:
            why.append(f"{counts.get('skip', 0) - over} skip")
        return f"{NOTHING_JUDGED}: 0 of {total} checks judged ({', '.join(why) or 'none run'})"
    return f"READY ({tally})"


def exit_code(report: dict) -> ExitCode:
    """The doctor's exit status: 0 ready, 1 a check failed, 5 nothing was judged (docs/doctor.md)."""
    if report.get("passed"):
        return ExitCode.OK
    if report.get("judged") == 0:  # a report without the field (cluster mode) is judged by "passed" alone
        return ExitCode.NOTHING_JUDGED
    return ExitCode.FAILED
