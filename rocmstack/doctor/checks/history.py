"""Run-to-run comparison (``--history DIR``): this run's measured figures against the node's previous run."""

from __future__ import annotations

import dataclasses
import socket

from rocmstack.doctor.figures import Figure, from_active
from rocmstack.doctor.history import History, Trend, compare, read_history
from rocmstack.doctor.model import Check, DoctorOptions, Result, passed, skipped, warned
from rocmstack.errors import printable
from rocmstack.platform.snapshot import Snapshot
from rocmstack.status import Status


def history_trend(snap: Snapshot, opts: DoctorOptions) -> Result:
    if opts.history_dir is None:
        return skipped("no --history DIR given")
    history = read_history(opts.history_dir, socket.gethostname())
    result = _judge(history, from_active(snap.active))
    if not history.warnings:
        return result
    # A damaged or hostile file only warns: the node's verdict never depends on what the folder holds.
    lines = history.skipped or len(history.warnings)
    first = history.warnings[0]
    summary = f"{lines} damaged line(s) skipped: {first}" if history.skipped else first
    return dataclasses.replace(
        warned(
            f"{summary}; {result.summary}" if result.status != Status.SKIP else summary,
            *history.warnings,
            *result.details,
            fix="; ".join(
                f
                for f in ("Delete the damaged lines (or the file); the runs after them are kept", result.fix)
                if f
            ),
        ),
        data={**(result.data or {}), "file": str(history.path), "skipped_lines": history.skipped},
    )


def _judge(history: History, current: list[Figure]) -> Result:
    path, runs = history.path, history.runs
    if not current:
        return skipped("no measured figure in this run to compare (--level 2 measures them)")
    if not runs:
        return skipped(f"first run of this node in {path}: nothing to compare with yet")
    previous = runs[-1]
    when = printable(previous.get("started_at"))[:40]
    trends: list[Trend] = compare(previous, current)
    if not trends:
        return skipped(f"the previous run ({when}) measured none of these figures")
    details = [
        f"{t.key}: {t.previous:.4g} -> {t.current:.4g} ({t.change:+.1%}){' WORSE' if t.worse else ''}"
        for t in trends
    ]
    data = {
        "file": str(path),
        "runs": len(runs),
        "previous_started_at": previous.get("started_at"),
        "trend": [
            {"key": t.key, "previous": t.previous, "current": t.current, "change": t.change, "worse": t.worse}
            for t in trends
        ],
    }
    worse = [t for t in trends if t.worse]
    if worse:
        first = worse[0]
        result = warned(
            f"{len(worse)} figure(s) 5 % or more worse than the previous run ({when}): "
            f"{first.key} {first.change:+.1%}",
            *details,
            fix="Rerun to rule out noise; a drop that stays points at the GPU, its cooling or the fabric",
        )
    else:
        result = passed(f"{len(trends)} figure(s) within 5 % of the previous run or better", *details)
    return dataclasses.replace(result, data=data)


CHECKS = (
    Check(
        "history-trend",
        "history",
        "Measured figures against the node's previous run",
        history_trend,
        "https://github.com/ROCm/cvs",
    ),
)
