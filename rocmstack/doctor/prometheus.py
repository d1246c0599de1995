"""``--prometheus FILE``: the report in the text format node-exporter's textfile collector reads
(https://prometheus.io/docs/instrumenting/exposition_formats/). Names follow Prometheus' conventions: a
``rocmstack_doctor_`` prefix, base units in the name (bytes, seconds), ``_total`` on counters. The file is
written beside its final name and renamed over it, so a scrape never reads half a file."""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from rocmstack.doctor.figures import Figure, from_report
from rocmstack.doctor.model import Status
from rocmstack.errors import InputError

PREFIX = "rocmstack_doctor_"


def check_textfile_path(path: Path) -> None:
    """Before any work: node-exporter reads only ``*.prom`` files, from a directory that exists."""
    if path.suffix != ".prom":
        raise InputError(
            f"--prometheus {path}: node-exporter's textfile collector reads only *.prom files",
            fix=f"e.g. --prometheus {path.with_suffix('.prom')}",
        )
    if not path.parent.is_dir():
        raise InputError(
            f"--prometheus {path}: directory {path.parent} does not exist",
            fix="give a file in node-exporter's --collector.textfile.directory",
        )
    if path.is_dir():
        raise InputError(f"--prometheus {path} is a directory", fix="give a file name ending in .prom")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _sample(name: str, labels: Iterable[tuple[str, str]], value: float) -> str:
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
    return f"{name}{{{body}}} {value:.17g}" if body else f"{name} {value:.17g}"


def figures(report: dict) -> list[Figure]:
    """Every series of the file: check statuses, the verdict, run time, then the measured figures."""
    node = str(report.get("host", ""))
    out = [
        Figure(
            "check_status",
            "1 for the status a check ended in, 0 for the others (pass, warn, fail, skip, error).",
            (("check", c["id"]), ("group", c["group"]), ("status", status.value)),
            1.0 if c["status"] == status.value else 0.0,
            better=None,
        )
        for c in report.get("checks", [])
        for status in Status
    ]
    out.append(Figure("ok", "1 when no check failed.", (), 1.0 if report.get("ok") else 0.0, better=None))
    started = report.get("started_at")
    if isinstance(started, str):
        import datetime as dt

        out.append(
            Figure(
                "last_run_timestamp_seconds",
                "Unix time the doctor run started.",
                (),
                dt.datetime.fromisoformat(started).timestamp(),
                better=None,
            )
        )
    out += from_report(report)
    return [Figure(f.name, f.help, (("node", node), *f.labels), f.value, f.kind, f.better) for f in out]


def render(report: dict) -> str:
    lines: list[str] = []
    by_name: dict[str, dict[tuple[tuple[str, str], ...], Figure]] = {}
    for fig in figures(report):
        if math.isfinite(fig.value):  # the collector drops the whole file on a repeated series: last wins
            by_name.setdefault(fig.name, {})[fig.labels] = fig
    for name, series in by_name.items():
        figs = list(series.values())
        full = PREFIX + name
        lines.append(f"# HELP {full} {figs[0].help}")
        lines.append(f"# TYPE {full} {figs[0].kind}")
        lines += [_sample(full, f.labels, f.value) for f in figs]
    return "\n".join(lines) + "\n"


def write_textfile(path: Path, report: dict) -> None:
    text = render(report)
    # the temporary name does not end in .prom, so the collector never reads it
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # node-exporter often runs as its own user
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise InputError(f"--prometheus {path}: {exc.strerror}", fix="give a writable file path") from None
