"""``--prometheus FILE``: the report in the text format node-exporter's textfile collector reads
(https://prometheus.io/docs/instrumenting/exposition_formats/). Names follow Prometheus' conventions: a
``rocmstack_doctor_`` prefix, base units in the name (bytes, seconds), ``_total`` on counters. The file is
written beside its final name and renamed over it, so a scrape never reads half a file.

The doctor runs as root from Slurm's hooks, so the folder is one that only root (or the user running it)
can write, unless ``--allow-shared-dir`` says otherwise: anyone who can write there can replace or add this
node's metrics. The temporary file is created new (O_EXCL|O_NOFOLLOW) and chmod-ed through its descriptor,
so a link swapped in can never steer a write or a chmod to another file."""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path

from rocmstack.doctor.figures import Figure, from_report
from rocmstack.errors import InputError, printable
from rocmstack.status import Status

PREFIX = "rocmstack_doctor_"
SHARED_DIR_OPTION = "--allow-shared-dir"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def others_can_write(st: os.stat_result) -> bool:
    """Whether users other than root and the running one can write this folder: its owner is neither, or
    group or others have write (even with the sticky bit: they can still add files). A POSIX ACL that
    grants write shows in the group bits (its mask)."""
    return st.st_uid not in (0, os.geteuid()) or bool(st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def check_private_dir(flag: str, folder: Path, st: os.stat_result, allow_shared: bool) -> None:
    """Exit 2 naming the folder, its mode and owner when others may write it and that was not allowed."""
    if allow_shared or not others_can_write(st):
        return
    me = os.geteuid()
    who = "root" if me == 0 else f"root and uid {me}"
    raise InputError(
        f"{flag}: folder {printable(folder)} (mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}) "
        f"can be written by users other than {who}",
        fix=f"let only {who} write it (chmod go-w, chown), or add {SHARED_DIR_OPTION}",
    )


def _open_dir(flag: str, folder: Path, allow_shared: bool) -> int:
    try:
        fd = os.open(folder, _DIR_FLAGS)
    except OSError as exc:
        raise InputError(
            f"{flag}: folder {printable(folder)}: {exc.strerror}", fix="give a directory that exists"
        ) from None
    try:
        check_private_dir(flag, folder, os.fstat(fd), allow_shared)
    except InputError:
        os.close(fd)
        raise
    return fd


def check_textfile_path(path: Path, allow_shared: bool = False) -> None:
    """Before any work: node-exporter reads only ``*.prom`` files, from a directory that exists and that
    nobody but root (or the running user) can write."""
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
    os.close(_open_dir("--prometheus", path.parent, allow_shared))


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
    out.append(
        Figure(
            # The report's "passed". The metric keeps its name: an alert rule on a renamed metric goes silent.
            "ok",
            "1 when checks were judged and none failed.",
            (),
            1.0 if report.get("passed") else 0.0,
            better=None,
        )
    )
    breaker = (report.get("slurm") or {}).get("breaker")
    if isinstance(breaker, dict):
        out.append(
            Figure(
                "breaker_open",
                "1 while the fleet's circuit breaker holds Slurm hooks back from draining (reset by a person).",
                (),
                1.0 if breaker.get("open") else 0.0,
                better=None,
            )
        )
    # An alert on ok == 0 alone cannot tell a failing node from a run that judged nothing (exit 5).
    judged = report.get("judged")
    if isinstance(judged, int) and not isinstance(judged, bool):
        out.append(
            Figure(
                "checks_judged", "Checks that reached a verdict in this run.", (), float(judged), better=None
            )
        )
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


def write_textfile(path: Path, report: dict, allow_shared: bool = False) -> None:
    """Write a new temporary file beside ``path`` and rename it over ``path``, all relative to one open
    descriptor of the folder (checked again here: the run may have taken minutes)."""
    data = render(report).encode("utf-8")
    dir_fd = _open_dir("--prometheus", path.parent, allow_shared)
    tmp: str | None = None
    try:
        for _ in range(100):  # O_EXCL: a name someone else took (a file, a link) is never opened
            # the temporary name does not end in .prom, so the collector never reads it
            name = f".{path.name}.{secrets.token_hex(8)}.tmp"
            try:
                fd = os.open(name, _NEW_FILE_FLAGS, 0o600, dir_fd=dir_fd)
            except FileExistsError:
                continue
            tmp = name
            break
        else:
            raise InputError(
                f"--prometheus {printable(path)}: no free temporary name in its folder",
                fix="remove the .*.tmp files there",
            )
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            os.fchmod(fh.fileno(), 0o644)  # node-exporter often runs as its own user
        os.replace(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        tmp = None
    except OSError as exc:
        raise InputError(
            f"--prometheus {printable(path)}: {exc.strerror}", fix="give a writable file path"
        ) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):  # moved away meanwhile: only the folder is ever touched
                os.unlink(tmp, dir_fd=dir_fd)
        os.close(dir_fd)
