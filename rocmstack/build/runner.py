"""Run one engine build: every line to the log file, step progress on the console, Ctrl-C stops the child.

The child runs in its own process group, so the whole build (podman and its chroot'd RUN, or the
buildx client) is stopped as one: SIGINT first (engines clean up their working containers on it), then
SIGTERM, then SIGKILL. The child's own session does not see the signals the terminal or CI sends us, so
rocmstack turns SIGTERM and SIGHUP into the same stop as Ctrl-C (a CI cancel sends SIGINT, then SIGTERM
seconds later), and a signal that arrives while stopping hurries the stop along instead of aborting it.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rocmstack.build.progress import Event, Step, StepTracker
from rocmstack.signals import stop_group, stop_signals_interrupt

TAIL_LINES = 30
STOP_GRACE_S = 20


@dataclass(frozen=True, kw_only=True)
class RunResult:
    returncode: int
    steps: tuple[Step, ...]
    tail: tuple[str, ...]
    seconds: float
    timed_out: bool
    failed_instruction: str | None
    error: str | None
    cache: dict
    retries: tuple[str, ...] = ()  # engine races that made the build run again (pipeline.ENGINE_RACES)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def stream_lines(
    argv: Sequence[str],
    *,
    timeout_s: float,
    on_line: Callable[[str], None],
    env: dict[str, str] | None = None,
) -> tuple[int, bool]:
    """Run ``argv`` in its own process group, each output line to ``on_line``; return (exit code, timed out).

    At the deadline, on Ctrl-C or on any error here, the whole group is stopped (``signals.stop_group``).
    FileNotFoundError (no such program) propagates for the caller to name.
    """
    timed_out = threading.Event()
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        bufsize=1,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )

    def _deadline() -> None:
        timed_out.set()
        stop_group(proc, STOP_GRACE_S)

    watchdog = threading.Timer(timeout_s, _deadline)
    watchdog.daemon = True
    watchdog.start()
    try:
        with stop_signals_interrupt():
            try:
                assert proc.stdout is not None
                for line in proc.stdout:
                    on_line(line)
                returncode = proc.wait()
            except BaseException:
                stop_group(proc, STOP_GRACE_S)
                raise
    finally:
        watchdog.cancel()
    return returncode, timed_out.is_set()


def run_logged(
    argv: Sequence[str],
    *,
    log_path: Path,
    progress: str,
    timeout_s: float,
    on_event: Callable[[Event], None] | None = None,
    on_line: Callable[[str], None] | None = None,
    env: dict[str, str] | None = None,
) -> RunResult:
    """Run ``argv``; KeyboardInterrupt stops the child and propagates once it is gone. PROGRESS: how its
    output marks build steps (``Engine.progress``)."""
    tracker = StepTracker(progress, on_event)
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    t0 = time.monotonic()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a", encoding="utf-8", errors="replace") as log:
        log.write(f"$ {' '.join(argv)}\n")
        log.flush()

        def _line(line: str) -> None:
            log.write(line)
            log.flush()
            tail.append(line.rstrip("\n"))
            tracker.feed(line)
            if on_line:
                on_line(line)

        try:
            returncode, timed_out = stream_lines(argv, timeout_s=timeout_s, on_line=_line, env=env)
        except BaseException:
            # Ctrl-C (or any error here): stream_lines stopped the engine; the build must not go on without us.
            log.write("\nrocmstack: build interrupted; the engine was stopped\n")
            raise
    ok = returncode == 0 and not timed_out
    tracker.close(ok)
    return RunResult(
        returncode=returncode,
        steps=tuple(tracker.steps),
        tail=tuple(tail),
        seconds=time.monotonic() - t0,
        timed_out=timed_out,
        failed_instruction=tracker.failed_instruction,
        error=tracker.error,
        cache=tracker.cache_counts(),
    )
