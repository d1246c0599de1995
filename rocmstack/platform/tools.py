"""Running vendor tools and guarded probes: argument lists, time limits, no shell.

A ROCm tool can hang at teardown, and importing torch or amdsmi can abort the interpreter. So every tool
and every heavy import runs in its own process, in its own process group (a timeout kills the whole
group, helpers included), and comes back as a plain value: never an exception, never a hang.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PROBES_DIR = Path(__file__).resolve().parent / "probes"


@dataclass(frozen=True)
class ToolRun:
    """What one tool (or probe) did. ``missing``: not on PATH; ``timed_out``: killed at its limit."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    missing: bool = False
    timed_out: bool = False
    error: str | None = None  # could not be started at all

    @property
    def ok(self) -> bool:
        return not (self.missing or self.timed_out or self.error) and self.returncode == 0

    def reason(self) -> str:
        """One line: why this run gave nothing usable."""
        name = Path(self.argv[0]).name if self.argv else "?"
        if self.missing:
            return f"{name} not found on PATH"
        if self.timed_out:
            return f"{name} did not finish within {self.seconds:.1f} s (killed)"
        if self.error:
            return f"{name} could not start: {self.error}"
        tail = last_line(self.stderr) or last_line(self.stdout)
        return f"{name} exited {self.returncode}" + (f": {tail}" if tail else "")


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in strip_ansi(text).splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


# An escape sequence runs to its first letter; one cut off at the end of the text is dropped whole.
_ANSI = re.compile(r"\x1b\[[^A-Za-z]*[A-Za-z]?")


def strip_ansi(text: str) -> str:
    # rocminfo colours its "ROCk module is NOT loaded" line. A regex, not a loop per character: rocminfo
    # prints ~100 KB on an 8-GPU node and every GPU-source count parses it again.
    return _ANSI.sub("", text)


def read_log(path: Path) -> str:
    """A tool's log as it wrote it: a progress bar's redraws stay behind their ``\r`` on the line that began
    them (reading as text would make each its own line, cut from the prefix that says who drew it)."""
    return path.read_bytes().decode("utf-8", errors="replace")


class Pending:
    """A started process, drained by its own thread (a chatty tool never blocks on a full pipe while we wait
    on another); ``result()`` waits until the process's own deadline and never raises."""

    def __init__(
        self,
        argv: list[str],
        timeout: float,
        env: Mapping[str, str] | None,
        log: Path | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.argv = tuple(argv)
        self.timeout = timeout
        self.log = log
        self._done: ToolRun | None = None
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen[str] | None = None
        path = (env or os.environ).get("PATH", os.defpath)
        exe = argv[0] if os.sep in argv[0] else shutil.which(argv[0], path=path)
        if exe is None:
            self._done = ToolRun(self.argv, None, "", "", 0.0, missing=True)
            return
        start = time.monotonic()
        # With ``log``, stdout and stderr stream into that file as the tool writes them (a long job can be
        # followed with tail -f, and nothing piles up in memory); ToolRun.stdout is then the file's text.
        sink = log.open("w") if log is not None else None
        try:
            proc = subprocess.Popen(
                [exe, *argv[1:]],
                stdin=subprocess.DEVNULL,
                stdout=sink if sink is not None else subprocess.PIPE,
                stderr=subprocess.STDOUT if sink is not None else subprocess.PIPE,
                text=True,
                errors="replace",
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,  # own process group: a timeout kills helpers too
            )
        except OSError as exc:
            self._done = ToolRun(self.argv, None, "", "", 0.0, error=str(exc))
            return
        finally:
            if sink is not None:
                sink.close()  # the child holds its own copy
        self._proc = proc
        self._thread = threading.Thread(target=self._wait, args=(proc, start), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Kill the process and its group now (Ctrl-C while waiting): it runs in a session of its own, so
        the terminal's signal never reached it. A no-op once it has finished."""
        if self._proc is not None and self._proc.poll() is None:
            _kill_group(self._proc)

    def _wait(self, proc: subprocess.Popen[str], start: float) -> None:
        try:
            out, err = proc.communicate(timeout=self.timeout)
            self._done = ToolRun(self.argv, proc.returncode, out, err, time.monotonic() - start)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            try:
                out, err = proc.communicate(timeout=2)
            except subprocess.TimeoutExpired:  # a grandchild kept the pipes open; give up on its output
                out, err = "", ""
            self._done = ToolRun(
                self.argv, None, out or "", err or "", time.monotonic() - start, timed_out=True
            )
        if self.log is not None and self._done is not None:
            text = read_log(self.log)
            self._done = dataclasses.replace(self._done, stdout=text, stderr="")

    def result(self) -> ToolRun:
        if self._thread is not None:
            try:
                self._thread.join(self.timeout + 5)
            except BaseException:
                self.stop()
                raise
        if self._done is None:  # cannot happen short of a wedged kernel; still never hang or raise
            self._done = ToolRun(self.argv, None, "", "", self.timeout, timed_out=True)
        return self._done


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def engine_available(engine: str) -> str | None:
    """None when the engine (vllm, sglang: their import names are their own) is installed in this Python,
    else why not. Finds the package without importing it."""
    import importlib.util

    if importlib.util.find_spec(engine) is None:
        return f"{engine} is not installed in this Python ({sys.executable})"
    return None


def start_tool(argv: list[str], *, timeout: float, env: Mapping[str, str] | None = None) -> Pending:
    return Pending(argv, timeout, env)


def run_tool(
    argv: list[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
    cwd: Path | None = None,
) -> ToolRun:
    """``log``: stream stdout and stderr, interleaved, into this file; ``cwd``: the tool's working folder."""
    return Pending(argv, timeout, env, log, cwd).result()


@dataclass(frozen=True)
class ProbeResult:
    """A guarded probe: a small script run by the target interpreter, answering one JSON object."""

    name: str
    data: dict | None
    run: ToolRun

    @property
    def ok(self) -> bool:
        return self.data is not None

    def reason(self) -> str:
        if self.data is not None:
            return ""
        if self.run.timed_out:
            return f"probe '{self.name}' timed out after {self.run.seconds:.1f} s (killed)"
        if self.run.error or self.run.missing:
            return f"probe '{self.name}' could not start: {self.run.reason()}"
        tail = last_line(self.run.stderr) or last_line(self.run.stdout)
        code = self.run.returncode or 0
        how = f"signal {-code}" if code < 0 else f"exit {self.run.returncode}"
        return f"probe '{self.name}' crashed ({how})" + (f": {tail}" if tail else "")


def start_probe(name: str, *, python: str, timeout: float, env: Mapping[str, str] | None) -> Pending:
    # The script runs from the probes folder by path, so sys.path[0] is that folder, not the caller's cwd.
    return start_tool([python, str(PROBES_DIR / f"{name}_probe.py")], timeout=timeout, env=env)


def finish_probe(name: str, pending: Pending) -> ProbeResult:
    run = pending.result()
    return ProbeResult(name, parse_probe_output(run.stdout) if run.returncode == 0 else None, run)


PROBE_MARK = "ROCMSTACK-PROBE-JSON:"


def parse_probe_output(stdout: str) -> dict | None:
    """Probes print their answer on one marked line; libraries may print anything around it."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(PROBE_MARK):
            try:
                data = json.loads(line[len(PROBE_MARK) :])
            except json.JSONDecodeError:
                return None
            return data if isinstance(data, dict) else None
    return None


def extract_json(text: str) -> object | None:
    """The first JSON object or array in ``text``: SMI tools print warnings before (and after) their JSON."""
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "{[":
            try:
                value, _ = decoder.raw_decode(text, i)
            except json.JSONDecodeError:
                continue
            if isinstance(value, (dict, list)):
                return value
    return None


def current_python() -> str:
    return sys.executable or "python3"
