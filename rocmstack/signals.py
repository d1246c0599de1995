"""SIGTERM and SIGHUP as a stop like Ctrl-C: the code that stops children on Ctrl-C runs for them too, and
rocmstack then exits with 128 + the signal, as a shell reports it (the build, validate's container run and
the private Ray instances of doctor and smoke use it)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator


class Terminated(SystemExit):
    """SIGTERM or SIGHUP: a SystemExit with 128 + the signal, so the CLI does not turn it into 130."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


# What stops a run: Ctrl-C, or SIGTERM/SIGHUP turned into Terminated.
INTERRUPTS: tuple[type[BaseException], ...] = (KeyboardInterrupt, Terminated)


@contextlib.contextmanager
def _handled(sigs: tuple[int, ...], handler: Callable[[int, object], None]) -> Iterator[None]:
    """``handler`` for ``sigs`` while the block runs, then the previous handlers again. Only the main thread
    can take signals; elsewhere, a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in sigs}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def stop_signals_interrupt(received: list[int] | None = None) -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP raise Terminated (each also appended to ``received``: a
    library that catches the exception raised inside it and exits otherwise, as Ray's ``get`` does with
    SystemExit(1), can be told apart)."""

    def _raise(signum: int, _frame: object) -> None:
        if received is not None:
            received.append(signum)
        raise Terminated(signum)

    with _handled((signal.SIGTERM, signal.SIGHUP), _raise):
        yield


@contextlib.contextmanager
def stops_deferred() -> Iterator[None]:
    """While the block runs (a few process starts), Ctrl-C, SIGTERM and SIGHUP wait: the first one is raised
    again, to whatever handler was there, once the block has finished. A child started inside is then always
    one that the caller holds and can stop; an interrupt between a start and its bookkeeping would leave it
    running for its whole time limit."""
    got: list[int] = []
    with _handled((signal.SIGINT, signal.SIGTERM, signal.SIGHUP), lambda signum, _frame: got.append(signum)):
        yield
    if got:
        signal.raise_signal(got[0])


def stop_group(proc: subprocess.Popen, grace_s: float) -> None:
    """Stop a child's whole process group (started with ``start_new_session``): SIGINT, then SIGTERM, then
    SIGKILL, until it is gone.

    Idempotent and not abortable: a signal that arrives meanwhile (a second Ctrl-C, CI's SIGTERM) moves on to
    the next, harder signal at once; the caller's own exception still propagates afterwards."""
    for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        try:
            if proc.poll() is not None:
                return
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            proc.wait(timeout=wait)
            return
        except (subprocess.TimeoutExpired, KeyboardInterrupt, Terminated):
            continue
