"""A private local Ray instance for the doctor's level 2 and the smoke job, beside any other Ray on the machine.

``ray.init(address="local")`` starts a head node of its own: Ray chooses its GCS, raylet, object-manager and
metrics ports free at start (nothing here passes a fixed one; the dashboard is off). Its socket and log
folder is a fresh short one under ``/tmp`` (Ray's socket paths must fit 107 bytes), removed on every way
out. A start that times out (Ray's own "timed out during startup" on a loaded machine, or the start limit
here) is tried again in a new folder after a pause, up to ``ATTEMPTS`` starts in all; the limit and the
pauses grow with the machine's load (``start_plan``). A start that still fails is an EngineError (one line,
exit 4).

Ray's own wait for its node to register (``raylet_start_wait_time_s`` in ``ray/_private/node.py``) is a
fixed 30 s that no option or environment variable changes (``RAY_raylet_start_wait_time_s`` names a
setting of Ray's C++ core, not that wait); what a loaded machine gets here is a longer limit of its own
and more, spaced, starts.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from rocmstack.errors import EngineError
from rocmstack.output import warn
from rocmstack.signals import Terminated, stop_signals_interrupt

# Seconds one start may take on an idle machine (Ray's own raylet wait is 30 s of it); a test can make it
# tiny. A value set in the environment is taken as it is, not scaled by the load.
START_TIMEOUT_ENV = "ROCMSTACK_RAY_START_TIMEOUT"
START_TIMEOUT_S = 180.0
# Where the private folders go; short, as Ray's socket paths must fit 107 bytes.
TMPDIR_ENV = "ROCMSTACK_RAY_TMPDIR"
# Starts in all, and the pause before each new one: BACKOFF_S, doubled each time, times the load factor,
# at most BACKOFF_MAX_S.
ATTEMPTS = 4
BACKOFF_S = 2.0
BACKOFF_MAX_S = 30.0
# The load factor: the 1-minute load average per core, between 1 (idle) and this.
LOAD_FACTOR_MAX = 3.0
# Ray's messages for a start that a loaded machine made too slow: worth another try.
_SLOW_START = ("timed out during startup", "timed out while waiting for gcs", "deadline exceeded")


class _StartTimeout(BaseException):
    """Not an Exception: Ray's start-up code catches and logs those, and would carry on."""


def start_timeout(env: dict[str, str] | None = None) -> float | None:
    """The start limit set in the environment, or None (then ``START_TIMEOUT_S``, scaled by the load)."""
    raw = (os.environ if env is None else env).get(START_TIMEOUT_ENV, "")
    try:
        value = float(raw) if raw else 0.0
    except ValueError:
        return None
    return value if value > 0 else None


def load_factor(load1: float | None, cpus: int | None) -> float:
    """The 1-minute load average per core, bounded to [1, LOAD_FACTOR_MAX]; 1 when either is unknown."""
    if load1 is None or not cpus or cpus < 1 or load1 != load1:  # NaN: unknown
        return 1.0
    return min(LOAD_FACTOR_MAX, max(1.0, load1 / cpus))


def machine_load() -> tuple[float | None, int | None]:
    """This machine's 1-minute load average and core count (None where the system does not say)."""
    try:
        load1: float | None = os.getloadavg()[0]
    except (OSError, AttributeError):
        load1 = None
    return load1, os.cpu_count()


def start_plan(
    load1: float | None,
    cpus: int | None,
    limit: float | None = None,
    attempts: int = ATTEMPTS,
) -> list[tuple[float, float]]:
    """``(pause_s, limit_s)`` for each start: the pause before it (0 for the first) and its limit.

    The limit is ``limit`` when given (the environment's, as it is), else ``START_TIMEOUT_S`` times the
    load factor; the pause before start n (n >= 2) is ``BACKOFF_S * 2**(n - 2)`` times the load factor,
    at most ``BACKOFF_MAX_S``."""
    factor = load_factor(load1, cpus)
    each = limit if limit is not None and limit > 0 else START_TIMEOUT_S * factor
    plan = []
    for n in range(1, max(1, attempts) + 1):
        pause = 0.0 if n == 1 else min(BACKOFF_MAX_S, BACKOFF_S * 2 ** (n - 2) * factor)
        plan.append((pause, each))
    return plan


def _timed_out(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, _StartTimeout) or any(marker in text for marker in _SLOW_START)


def _load_text(load1: float | None, cpus: int | None) -> str:
    if load1 is None or not cpus:
        return "the machine's load"
    return f"the machine's load (load average {load1:.1f} on {cpus} cores)"


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise _StartTimeout in the main thread after ``seconds``. Elsewhere, or when SIGALRM is taken
    (a test harness's own timer), Ray's own start limit alone applies."""
    usable = threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGALRM) in (
        signal.SIG_DFL,
        None,
    )
    if not usable:
        yield
        return

    def _fire(_sig: int, _frame: object) -> None:
        raise _StartTimeout(f"no Ray node within {seconds:g} s")

    signal.signal(signal.SIGALRM, _fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)


@contextmanager
def _ctrl_c_kept() -> Iterator[Any]:
    """Ctrl-C during ``ray.init`` raises KeyboardInterrupt as usual and is also remembered: Ray starts its
    daemons with fork hooks whose exceptions Python only prints ("Exception ignored in ..."), and a start
    that swallowed the interrupt must still stop once it returns."""
    seen = [False]
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    previous = signal.getsignal(signal.SIGINT)

    def _on_int(sig: int, frame: Any) -> None:
        seen[0] = True
        if frame is not None and f"{os.sep}logging{os.sep}" in frame.f_code.co_filename:
            # Inside logging's fork hook, where an exception is printed and dropped: once more, 50 ms on.
            threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
            return
        raise KeyboardInterrupt

    if previous is signal.SIG_IGN:  # Ctrl-C is not ours to take (a background job)
        yield lambda: False
        return
    signal.signal(signal.SIGINT, _on_int)
    try:
        yield lambda: seen[0]
    finally:
        signal.signal(signal.SIGINT, previous)


def _own_processes(folder: str) -> list[int]:
    """This user's processes that name ``folder`` on their command line: the daemons of our instance."""
    uid = os.getuid()
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if folder in cmdline:
            found.append(int(entry.name))
    return found


def stop_leftovers(folder: str, grace_s: float = 3.0) -> None:
    """Stop what a failed or interrupted start left running in ``folder`` (GCS, raylet, agents): SIGTERM,
    then SIGKILL. Only processes that name this private folder are touched, never another Ray."""
    pids = _own_processes(folder)
    for pid in pids:
        with suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + grace_s
    while pids and time.monotonic() < end:
        time.sleep(0.1)
        pids = [p for p in pids if Path(f"/proc/{p}").exists() and _alive(p)]
    for pid in pids:
        with suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _shutdown(ray: Any, folder: str) -> None:
    with suppress(Exception):
        ray.shutdown()
    stop_leftovers(folder)
    shutil.rmtree(folder, ignore_errors=True)


# Ray's core gives up on its GCS after 60 s and ends the process (no exception to retry on): on a loaded
# machine the GCS of a fresh instance takes longer than that to answer (seen on 2 cores beside four busy
# loops).
GCS_PATIENCE_ENV = ("RAY_gcs_rpc_server_connect_timeout_s", "RAY_gcs_rpc_server_reconnect_timeout_s")
# Ray's core worker lowers its own priority by this much once it has started (Ray's default: 15), so that
# Ray's daemons stay responsive under its workers' load. Beside busy processes of normal priority that
# starves the workers: the kernel gives a nice-15 process 36/1024 of a nice-0 one's share, and on 2 cores
# beside four busy loops the smoke's model set-up took 182 s instead of 4 (17 s at the caller's priority).
# It is an increment (nice(2)), so 0 keeps the caller's own priority, as Ray's job supervisor keeps it for
# the jobs it starts.
WORKER_NICENESS_ENV = "RAY_worker_niceness"


def instance_env(limit_s: float, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """What the private instance's daemons and workers need in the environment that ``env`` (default:
    this process's) does not set: Ray's GCS timeouts as long as the start's own limit, and workers at the
    caller's priority. The user's own values stay."""
    given = os.environ if env is None else env
    wanted = {name: str(max(60, int(limit_s))) for name in GCS_PATIENCE_ENV}
    wanted[WORKER_NICENESS_ENV] = "0"
    return {name: value for name, value in wanted.items() if name not in given}


@contextmanager
def _instance_env(limit_s: float) -> Iterator[None]:
    """``instance_env`` set for the private instance's life (its raylet starts the workers with it), then
    removed again."""
    added = instance_env(limit_s)
    os.environ.update(added)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


@contextmanager
def private_ray(
    prefix: str,
    *,
    num_cpus: int,
    progress: Any = None,
    **init_kwargs: Any,
) -> Iterator[dict[str, Any]]:
    """Start a private local Ray for the block and stop it after; yields ``{"init_s", "attempts", "temp_dir"}``.

    The folder is removed and the instance stopped on every way out (an error, Ctrl-C, SIGTERM or SIGHUP
    while it runs)."""
    import ray

    if progress is None:
        progress = warn

    load1, cpus = machine_load()
    plan = start_plan(load1, cpus, start_timeout())
    base = os.environ.get(TMPDIR_ENV) or "/tmp"
    start = time.perf_counter()
    with stop_signals_interrupt(), _instance_env(plan[0][1]):
        folder = ""
        attempt = 0
        for attempt, (_pause, limit) in enumerate(plan, start=1):
            folder = tempfile.mkdtemp(prefix=prefix, dir=base)
            try:
                with _deadline(limit), _ctrl_c_kept() as ctrl_c:
                    ray.init(
                        address="local",
                        num_cpus=num_cpus,
                        include_dashboard=False,
                        _temp_dir=folder,
                        **init_kwargs,
                    )
                if ctrl_c():
                    raise KeyboardInterrupt
                break
            except BaseException as exc:
                _shutdown(ray, folder)
                if isinstance(exc, SystemExit) and exc.code in (signal.SIGTERM, signal.SIGHUP):
                    # Ray's own handler, installed part-way through the start, exits with the number.
                    raise Terminated(int(exc.code)) from None
                if not isinstance(exc, Exception | _StartTimeout):
                    raise  # Ctrl-C, SIGTERM: stopped and cleaned, and on its way
                # Ray's own slow-start errors come before its core starts in this process, so a new start
                # is safe; after our limit interrupted ray.init anywhere, a second ray.init in the same
                # process can abort it (absl: "SetTimeZone() has already been called", SIGABRT).
                if _timed_out(exc) and not isinstance(exc, _StartTimeout) and attempt < len(plan):
                    pause = plan[attempt][0]
                    progress(
                        f"Ray did not start in time (attempt {attempt} of {len(plan)}: {_reason(exc)}); "
                        f"retrying in {pause:.0f} s"
                    )
                    time.sleep(pause)  # Ctrl-C and SIGTERM still end the wait
                    continue
                tries = f"{attempt} attempts" if attempt > 1 else "1 attempt"
                raise EngineError(
                    f"no private Ray instance could start ({tries}; last: {_reason(exc)})",
                    fix=f"check {_load_text(load1, cpus)} and `ray status` for other instances; "
                    f"{START_TIMEOUT_ENV}=SECONDS allows a slower start",
                ) from None
        info = {"init_s": time.perf_counter() - start, "attempts": attempt, "temp_dir": folder}
        received: list[int] = []
        try:
            # Ray's core installs its own SIGTERM handler at start (it logs and dies, skipping this
            # clean-up): ours again, for the block.
            with stop_signals_interrupt(received):
                yield info
        except SystemExit as exc:
            # A signal that lands inside ray.get: Ray turns the Terminated our handler raised into SystemExit(1).
            if received and not isinstance(exc, Terminated):
                raise Terminated(received[-1]) from None
            raise
        finally:
            _shutdown(ray, folder)


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."
