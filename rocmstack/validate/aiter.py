"""The ``aiter`` stage of validate: the first-call time of each AITER module the image prebuilt.

An image whose recipe sets ``prebuild_aiter`` carries ``$ROCMSTACK_ROOT/aiter-prebuilt.json`` (written by
``aiter_prebuild.py build``). Each module is loaded in a fresh process as an engine's first call loads it
(``aiter_prebuild.py first-call``); aiter's own log says whether it was built then instead
(``start build [...]`` / ``finish build [...], cost N s``, aiter/jit/core.py build_module), which means the
prebuilt module was not used (another arch, another folder, a stale lock) and the first step pays the build."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANIFEST = "aiter-prebuilt.json"
SCRIPT = "bin/aiter_prebuild.py"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_START = re.compile(r"start build \[(\w+)\]")
_FINISH = re.compile(r"finish build \[(\w+)\], cost ([0-9.]+)s")
_IMPORT = re.compile(r"import \[(\w+)\] under (\S+)")


@dataclass(frozen=True)
class ModuleLog:
    built: bool  # aiter built it in this process
    build_s: float | None  # the cost aiter reported
    file: str | None  # where it was imported from


def parse_aiter_log(text: str) -> dict[str, ModuleLog]:
    """What aiter's log lines say about each module (colour codes and line prefixes are ignored)."""
    built: dict[str, float | None] = {}
    files: dict[str, str] = {}
    for raw in text.splitlines():
        line = _ANSI.sub("", raw)
        if m := _START.search(line):
            built.setdefault(m.group(1), None)
        if m := _FINISH.search(line):
            built[m.group(1)] = float(m.group(2))
        if m := _IMPORT.search(line):
            files[m.group(1)] = m.group(2)
    return {
        name: ModuleLog(name in built, built.get(name), files.get(name)) for name in sorted({*built, *files})
    }


def read_manifest(root: Path) -> tuple[dict[str, Any] | None, str | None]:
    path = root / MANIFEST
    if not path.is_file():
        return None, None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"{path}: {exc}"
    if (
        not isinstance(manifest, dict)
        or manifest.get("schema") != 1
        or not isinstance(manifest.get("modules"), list)
    ):
        return None, f"{path}: not a schema-1 AITER prebuild manifest"
    return manifest, None


@dataclass(frozen=True)
class FirstCall:
    module: str
    returncode: int | None  # None: timed out
    stdout: str
    stderr: str
    wall_s: float


def judge(manifest: dict[str, Any], calls: list[FirstCall]) -> tuple[str, str, list[dict[str, Any]]]:
    """(status, summary, rows): pass when every prebuilt module loads without being built."""
    rows, bad = [], []
    for call in calls:
        log = parse_aiter_log(call.stderr + "\n" + call.stdout).get(call.module)
        result: dict[str, Any] = {}
        for line in reversed(call.stdout.splitlines()):
            try:
                result = json.loads(line)
                break
            except ValueError:
                continue
        row = {
            "module": call.module,
            "first_call_s": result.get("first_call_s"),
            "import_s": result.get("import_s"),
            "wall_s": round(call.wall_s, 3),
            "rebuilt": bool(log and log.built),
            "build_s": log.build_s if log else None,
            "file": result.get("file") or (log.file if log else None),
        }
        rows.append(row)
        if call.returncode is None:
            bad.append(f"{call.module}: first call still running after {call.wall_s:.0f} s")
        elif call.returncode != 0:
            tail = (call.stderr.strip().splitlines() or ["no output"])[-1][:200]
            bad.append(f"{call.module}: first call failed (exit {call.returncode}): {tail}")
        elif row["rebuilt"]:
            cost = f" ({row['build_s']} s)" if row["build_s"] is not None else ""
            bad.append(
                f"{call.module}: built again at its first call{cost}: the prebuilt module was not used"
            )
    times = ", ".join(f"{r['module']} {r['first_call_s']} s" for r in rows if r["first_call_s"] is not None)
    if bad:
        return "fail", f"{len(bad)} of {len(rows)} prebuilt AITER module(s): {bad[0]}", rows
    archs = ";".join(manifest.get("gpu_archs") or [])
    return "pass", f"{len(rows)} prebuilt AITER module(s) ({archs}) load without a build: {times}", rows


def first_calls(
    root: Path, manifest: dict[str, Any], *, timeout: float, python: str | None = None
) -> list[FirstCall]:
    """Each module's first call in a fresh process (aiter logs at INFO with AITER_LOG_MORE=1)."""
    env = {**os.environ, "AITER_LOG_MORE": "1"}
    if manifest.get("jit_dir"):
        env.setdefault("AITER_JIT_DIR", str(manifest["jit_dir"]))
    calls = []
    for entry in manifest["modules"]:
        name = str(entry.get("module"))
        argv = [python or sys.executable, str(root / SCRIPT), "first-call", name]
        t0 = time.monotonic()
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, check=False)
            calls.append(FirstCall(name, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0))
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else ""
            err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else ""
            calls.append(FirstCall(name, None, out, err, time.monotonic() - t0))
    return calls
