"""``--history DIR``: every run of a node kept as one JSON line in ``DIR/<host>.jsonl``, and each measured
figure compared with the node's previous run. A figure 5 % worse than last time warns (ROCm/cvs compares a
run with the one before it the same way); the report shows the trend of every figure.

Root reads and appends this file from Slurm's hooks, so: the folder is one only root (or the running user)
can write unless ``--allow-shared-dir``; the file is opened relative to the folder's descriptor with
O_NOFOLLOW|O_NONBLOCK and used only when it is a regular file with one link (never a link, FIFO or device);
only its last ``MAX_READ_BYTES`` are read; and a line that is not a run record is one warning and skipped,
never an error: one damaged line must not stop every later run."""

from __future__ import annotations

import errno
import json
import math
import os
import socket
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rocmstack.doctor.figures import Figure, from_report
from rocmstack.doctor.model import verdict_renamed
from rocmstack.doctor.prometheus import check_private_dir
from rocmstack.doctor.ras import RAS_CHECK
from rocmstack.errors import InputError, printable

SCHEMA = "rocmstack.doctor-history/2"
# Read too (a node's history outlives an upgrade): its verdict was ``ok``.
EARLIER = "rocmstack.doctor-history/1"
TOLERANCE = 0.05
# Only the file's tail is read: about 290 two-GPU level-2 runs (14 kB each); only the last is compared.
MAX_READ_BYTES = 4 << 20
MAX_WARNINGS = 20  # damaged lines named one by one; the rest are counted
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_APPEND_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True)
class Trend:
    key: str
    previous: float
    current: float
    better: str

    @property
    def change(self) -> float:
        return self.current / self.previous - 1 if self.previous else 0.0

    @property
    def worse(self) -> bool:
        """5 % or more the wrong way."""
        if self.better == "higher":
            return self.current < self.previous * (1 - TOLERANCE)
        return self.current > self.previous * (1 + TOLERANCE)


def history_file(directory: Path, host: str) -> Path:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in host) or "node"
    return directory / f"{safe}.jsonl"


class NotRegular(Exception):
    """The history file's name holds something other than a regular file with one link."""


def _kind(st: os.stat_result) -> str | None:
    """What is wrong with a file the history may not use, or None for a regular file with one link."""
    mode = st.st_mode
    if stat.S_ISREG(mode):
        return f"a file with {st.st_nlink} hard links" if st.st_nlink != 1 else None
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "a device"


def _open_regular(dir_fd: int, name: str, flags: int) -> int:
    """``name`` in the folder, opened only when it is (and stays) a regular file with one link; looked at
    before it is opened, so a FIFO or device is never opened (no block, no side effect)."""
    try:
        kind = _kind(os.stat(name, dir_fd=dir_fd, follow_symlinks=False))
    except FileNotFoundError:
        if not flags & os.O_CREAT:
            raise
        kind = None
    if kind is not None:
        raise NotRegular(kind)
    try:
        fd = os.open(name, flags, 0o644, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW: a link swapped in since the look
            raise NotRegular("a symbolic link") from None
        raise
    kind = _kind(os.fstat(fd))
    if kind is not None:
        os.close(fd)
        raise NotRegular(kind)
    return fd


def _open_dir(directory: Path) -> int:
    try:
        return os.open(directory, _DIR_FLAGS)
    except OSError as exc:
        raise InputError(
            f"--history {printable(directory)}: {exc.strerror}", fix="give a writable directory"
        ) from None


def check_history_dir(directory: Path, allow_shared: bool = False) -> None:
    """Before any work: the folder (created if missing) is one only root or the running user can write,
    and the node's file, when there is one, is a regular file."""
    if directory.exists() and not directory.is_dir():
        raise InputError(
            f"--history {directory} is a file", fix="give a directory (it is created if missing)"
        )
    try:
        directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--history {directory}: {exc.strerror}", fix="give a writable directory") from None
    dir_fd = _open_dir(directory)
    try:
        check_private_dir("--history", directory, os.fstat(dir_fd), allow_shared)
        path = history_file(directory, socket.gethostname())
        try:
            kind = _kind(os.stat(path.name, dir_fd=dir_fd, follow_symlinks=False))
        except FileNotFoundError:
            kind = None
        if kind is not None:
            raise InputError(
                f"--history: {printable(path)} is {kind}, not a regular file",
                fix="remove it: the history is one regular file per node",
            )
    finally:
        os.close(dir_fd)


@dataclass(frozen=True)
class History:
    """A node's earlier runs, oldest first, and what was wrong with the file (each line one warning)."""

    path: Path
    runs: tuple[dict, ...] = ()
    warnings: tuple[str, ...] = ()  # at most MAX_WARNINGS + 1 (the last counts the rest)
    skipped: int = 0  # damaged lines skipped
    truncated: bool = False  # over MAX_READ_BYTES: only its tail was read


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _is_figure(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an integer of hundreds of digits
        return False


def parse_line(raw: bytes) -> dict | str:
    """One line of the file: the run record, or why it is not one."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "is not UTF-8"
    try:
        run = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        return "is not JSON (nested too deep)"
    except json.JSONDecodeError as exc:
        return f"is not JSON ({exc.msg})"
    except ValueError as exc:  # an integer over Python's digit limit, NaN, Infinity
        return f"is not JSON ({str(exc)[:60]})"
    if isinstance(run, dict) and run.get("schema") == EARLIER:
        run = verdict_renamed(run) | {"schema": SCHEMA}
    if not isinstance(run, dict) or run.get("schema") != SCHEMA:
        return f"is not a {SCHEMA} record"
    figures = run.get("figures")
    if not isinstance(figures, dict) or not all(_is_figure(v) for v in figures.values()):
        return "has figures that are not finite numbers"
    if not isinstance(run.get("started_at"), str | None):
        return "has a started_at that is not a string"
    return run


def _read_tail(fd: int) -> tuple[bytes, bool]:
    size = os.fstat(fd).st_size
    start = max(0, size - MAX_READ_BYTES)
    chunks: list[bytes] = []
    offset = start
    while offset - start < MAX_READ_BYTES:
        chunk = os.pread(fd, MAX_READ_BYTES - (offset - start), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    data = b"".join(chunks)
    if start:
        data = data.partition(b"\n")[2]  # the first line was cut
    return data, bool(start)


def read_history(directory: Path, host: str) -> History:
    """The node's earlier runs; never raises for what is in the folder (the doctor's verdict goes on)."""
    path = history_file(directory, host)
    try:
        dir_fd = os.open(directory, _DIR_FLAGS)
    except OSError as exc:
        return History(path, warnings=(f"{printable(directory)}: {exc.strerror}",))
    try:
        fd = _open_regular(dir_fd, path.name, _READ_FLAGS)
    except FileNotFoundError:
        return History(path)
    except NotRegular as exc:
        return History(path, warnings=(f"{printable(path)} is {exc}, not a regular file: not read",))
    except OSError as exc:
        return History(path, warnings=(f"{printable(path)}: {exc.strerror}",))
    finally:
        os.close(dir_fd)
    try:
        data, truncated = _read_tail(fd)
    except OSError as exc:
        return History(path, warnings=(f"{printable(path)}: {exc.strerror}",))
    finally:
        os.close(fd)
    where = f"{printable(path)}{' (its last 4 MiB)' if truncated else ''}"
    runs: list[dict] = []
    warnings: list[str] = []
    skipped = 0
    for number, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        run = parse_line(raw)
        if isinstance(run, dict):
            runs.append(run)
            continue
        skipped += 1
        if skipped <= MAX_WARNINGS:
            warnings.append(f"{where} line {number} {run}: skipped")
    if skipped > MAX_WARNINGS:
        warnings.append(f"{where}: {skipped - MAX_WARNINGS} more damaged line(s) skipped")
    return History(path, tuple(runs), tuple(warnings), skipped, truncated)


def load_runs(directory: Path, host: str) -> list[dict]:
    """The node's earlier runs, oldest first (damaged lines skipped; ``read_history`` names them)."""
    return list(read_history(directory, host).runs)


def record(report: dict) -> dict:
    figs = from_report(report)
    return {
        "schema": SCHEMA,
        "host": report.get("host"),
        "started_at": report.get("started_at"),
        "level": (report.get("options") or {}).get("level"),
        "passed": report.get("passed"),
        "verdict": report.get("verdict"),
        "figures": {f.key: f.value for f in figs},
        "better": {f.key: f.better for f in figs if f.better},
        "checks": {c["id"]: c["status"] for c in report.get("checks", [])},
        # the GPU error counters this run read: the first run of a boot is what later runs compare with
        **({"ras": ras} if (ras := _ras_data(report)) else {}),
    }


def _ras_data(report: dict) -> dict | None:
    row = next((c for c in report.get("checks", []) if c.get("id") == RAS_CHECK), None)
    return (row or {}).get("data") or None


def append_run(directory: Path, report: dict) -> Path:
    path = history_file(directory, str(report.get("host", "")))
    line = json.dumps(record(report), sort_keys=True, separators=(",", ":")).encode("utf-8") + b"\n"
    dir_fd = _open_dir(directory)
    try:
        fd = _open_regular(dir_fd, path.name, _APPEND_FLAGS)
    except NotRegular as exc:
        raise InputError(
            f"--history: {printable(path)} is {exc}, not a regular file: this run is not kept",
            fix="remove it: the history is one regular file per node",
        ) from None
    except OSError as exc:
        raise InputError(
            f"--history: {printable(path)}: {exc.strerror}", fix="give a writable directory"
        ) from None
    finally:
        os.close(dir_fd)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line  # a line cut short by a crash stays one damaged line, not two
        while line:  # O_APPEND, one line per write: runs never interleave mid-line
            line = line[os.write(fd, line) :]
    except OSError as exc:
        raise InputError(
            f"--history: {printable(path)}: {exc.strerror}", fix="give a writable directory"
        ) from None
    finally:
        os.close(fd)
    return path


def compare(previous: dict, current: Iterable[Figure]) -> list[Trend]:
    """Each judged figure present in both runs (a figure new to this run has no trend yet)."""
    before = previous.get("figures") or {}
    return [
        Trend(f.key, float(before[f.key]), f.value, f.better)
        for f in current
        if f.better and isinstance(before.get(f.key), int | float)
    ]
