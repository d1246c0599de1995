"""``--history DIR``: every run of a node kept as one JSON line in ``DIR/<host>.jsonl``, and each measured
figure compared with the node's previous run. A figure 5 % worse than last time warns (ROCm/cvs compares a
run with the one before it the same way); the report shows the trend of every figure."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rocmstack.doctor.figures import Figure, from_report
from rocmstack.errors import InputError

SCHEMA = "rocmstack.doctor-history/1"
TOLERANCE = 0.05


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


def check_history_dir(directory: Path) -> None:
    if directory.exists() and not directory.is_dir():
        raise InputError(
            f"--history {directory} is a file", fix="give a directory (it is created if missing)"
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--history {directory}: {exc.strerror}", fix="give a writable directory") from None
    load_runs(directory, socket.gethostname())  # a damaged file is named before any work


def load_runs(directory: Path, host: str) -> list[dict]:
    """The node's earlier runs, oldest first; a line that is not a run record is bad input, named."""
    path = history_file(directory, host)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise InputError(f"--history: {path}: {exc.strerror}", fix="give a readable directory") from None
    runs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            run = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"--history: {path} line {number} is not JSON ({exc.msg})", fix="delete that line"
            ) from None
        if (
            not isinstance(run, dict)
            or run.get("schema") != SCHEMA
            or not isinstance(run.get("figures"), dict)
        ):
            raise InputError(
                f"--history: {path} line {number} is not a {SCHEMA} record", fix="delete that line"
            )
        runs.append(run)
    return runs


def record(report: dict) -> dict:
    figs = from_report(report)
    return {
        "schema": SCHEMA,
        "host": report.get("host"),
        "started_at": report.get("started_at"),
        "level": (report.get("options") or {}).get("level"),
        "ok": report.get("ok"),
        "verdict": report.get("verdict"),
        "figures": {f.key: f.value for f in figs},
        "better": {f.key: f.better for f in figs if f.better},
        "checks": {c["id"]: c["status"] for c in report.get("checks", [])},
    }


def append_run(directory: Path, report: dict) -> Path:
    path = history_file(directory, str(report.get("host", "")))
    line = json.dumps(record(report), sort_keys=True, separators=(",", ":"))
    try:
        with path.open("a", encoding="utf-8") as fh:  # one write of one line: runs never interleave mid-line
            fh.write(line + "\n")
    except OSError as exc:
        raise InputError(f"--history: {path}: {exc.strerror}", fix="give a writable directory") from None
    return path


def compare(previous: dict, current: Iterable[Figure]) -> list[Trend]:
    """Each judged figure present in both runs (a figure new to this run has no trend yet)."""
    before = previous.get("figures") or {}
    return [
        Trend(f.key, float(before[f.key]), f.value, f.better)
        for f in current
        if f.better and isinstance(before.get(f.key), int | float)
    ]
