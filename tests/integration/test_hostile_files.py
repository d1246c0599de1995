"""Files root writes in a folder others may write: ``--prometheus`` and ``--history`` against a second process
(uid 65534, ``nobody``) that swaps links and FIFOs in while the doctor writes, against FIFOs, links and
oversized files, for real. Nothing outside the named file may be created or changed, no call may hang, and
nothing may raise but the one-line InputError.

Before: the textfile's temporary file was chmod-ed by path, so a link swapped in made a 0600 root file
world-readable; the history file was read and appended through links and FIFOs (a dangling link made root
create its target, a FIFO blocked the hook for good) and read whole, however large.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from rocmstack.doctor import DoctorOptions
from rocmstack.doctor.checks.history import history_trend
from rocmstack.doctor.history import MAX_READ_BYTES, append_run, check_history_dir, read_history
from rocmstack.doctor.prometheus import write_textfile
from rocmstack.errors import InputError
from rocmstack.status import Status
from tests.conftest import ROOT, run_cli

sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot

REPORT = json.loads((ROOT / "docs/evidence/doctor-levels-h200x2-2026-11-30/level2-healthy.json").read_text())
NOBODY = 65534
PYTHON = shutil.which("python3", path="/usr/bin:/bin")  # one that uid 65534 may run
SECRET = b"root only\n"

# The other user: it replaces root's files in the folder (a 0777 folder without the sticky bit lets it)
# with links to the secret, dangling links and FIFOs, as fast as it can, until SIGTERM; prints its swaps.
ATTACKER = r"""
import os, signal, sys
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
mode, folder, secret, dangling, name = sys.argv[1:6]
swaps = 0
try:
    while True:
        if mode == "textfile":
            victims = [n for n in os.listdir(folder) if n.endswith(".tmp")] + [name]
        else:
            victims = [name]
        for victim in victims:
            path = os.path.join(folder, victim)
            try:
                if mode == "textfile" and os.path.islink(path):
                    continue  # already swapped: wait for root's next temporary file
                os.unlink(path)
            except OSError:
                pass
            try:
                if mode == "history" and swaps % 3 == 2:
                    os.mkfifo(path)
                else:
                    os.symlink(secret if swaps % 2 else dangling, path)
                swaps += 1
            except OSError:
                pass
        if mode == "history" and swaps % 7 == 0:  # now and then let root's own file be there
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass
finally:
    print(swaps, flush=True)
"""


@pytest.fixture
def area():
    """A folder the other user can reach (pytest's own are under a 0700 one), removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("the other user is started as uid 65534: needs root")
    if PYTHON is None:
        pytest.skip("no /usr/bin/python3 for the other user (pyenv's lives under /root)")
    path = Path(tempfile.mkdtemp(prefix="rocmstack-hostile-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def _setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A folder anyone can write, a root-only secret beside it and the name a dangling link points at."""
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET)
    secret.chmod(0o600)
    return folder, secret, tmp_path / "created-by-root"


def _race(mode: str, folder: Path, secret: Path, dangling: Path, name: str, work: Callable[[], None]) -> int:
    """Run ``work`` while the other user swaps files in; returns the swaps it made."""
    attacker = subprocess.Popen(
        [str(PYTHON), "-I", "-c", ATTACKER, mode, str(folder), str(secret), str(dangling), name],
        user=NOBODY,
        group=NOBODY,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(0.2)  # let it start swapping
        _within(30.0, work)
    finally:
        attacker.terminate()
        out, _ = attacker.communicate(timeout=10)
    return int(out.strip() or 0)


def _untouched(tmp_path: Path, secret: Path, dangling: Path, before: os.stat_result) -> None:
    after = secret.stat()
    assert secret.read_bytes() == SECRET
    assert stat.S_IMODE(after.st_mode) == 0o600 and after.st_uid == 0
    assert after.st_mtime_ns == before.st_mtime_ns and after.st_ctime_ns == before.st_ctime_ns  # no chmod
    assert not dangling.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret", "shared"]


def _within(seconds: float, fn: Callable, *args):
    """``fn(*args)`` in a thread that must end within ``seconds``."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # handed back to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{fn.__name__} still running after {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_links_swapped_in_a_loop_never_steer_the_textfile(area):
    folder, secret, dangling = _setup(area)
    before = secret.stat()
    report = {"host": "n1", "started_at": "2026-11-30T10:00:00+00:00", "passed": True, "checks": []}
    outcomes = {"written": 0, "refused": 0}

    def work() -> None:
        for _ in range(300):
            try:
                write_textfile(folder / "doctor.prom", report, allow_shared=True)
                outcomes["written"] += 1
            except InputError:  # the other user took the name meanwhile: refused in one line
                outcomes["refused"] += 1

    swaps = _race("textfile", folder, secret, dangling, "doctor.prom", work)
    assert swaps > 100, "the other process never got to swap"
    _untouched(area, secret, dangling, before)
    assert sum(outcomes.values()) == 300


def test_links_and_fifos_swapped_in_a_loop_never_steer_the_history(area):
    folder, secret, dangling = _setup(area)
    before = secret.stat()
    host = socket.gethostname()
    report = {**REPORT, "host": host}
    slowest = 0.0
    refused = 0

    def work() -> None:
        nonlocal slowest, refused
        for _ in range(300):
            started = time.monotonic()
            try:
                append_run(folder, report)
            except InputError:
                refused += 1
            read_history(folder, host)  # never raises, never blocks
            slowest = max(slowest, time.monotonic() - started)

    swaps = _race("history", folder, secret, dangling, f"{host}.jsonl", work)
    assert swaps > 100, "the other process never got to swap"
    _untouched(area, secret, dangling, before)
    assert slowest < 2.0, f"one append and read took {slowest:.2f} s"
    assert refused > 0  # the swaps were seen, not dodged


def test_a_fifo_in_the_history_folder_warns_within_a_second(tmp_path):
    path = tmp_path / f"{socket.gethostname()}.jsonl"
    os.mkfifo(path)
    opts = DoctorOptions(history_dir=tmp_path, env={})
    try:
        history = _within(1.0, read_history, tmp_path, socket.gethostname())
        assert history.runs == () and "is a FIFO, not a regular file" in history.warnings[0]
        result = _within(1.0, history_trend, make_snapshot(), opts)
        assert result.status == Status.WARN and "is a FIFO" in result.summary
        with pytest.raises(InputError, match="is a FIFO, not a regular file"):
            _within(1.0, check_history_dir, tmp_path)
        with pytest.raises(InputError, match="is a FIFO, not a regular file: this run is not kept"):
            _within(1.0, append_run, tmp_path, {**REPORT, "host": socket.gethostname()})
    finally:
        # a reader blocked in open() (the code before) is let go, so the test process can end
        with contextlib.suppress(OSError):
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


def test_the_doctor_with_a_fifo_as_history_ends_at_once_in_one_line(tmp_path):
    os.mkfifo(tmp_path / f"{socket.gethostname()}.jsonl")
    started = time.monotonic()
    result = run_cli("doctor", "--only", "nofile-limit", "--history", str(tmp_path), timeout=60)
    assert result.code == 2 and "Traceback" not in result.err
    assert "is a FIFO, not a regular file" in result.err and len(result.err.strip().splitlines()) == 1
    assert time.monotonic() - started < 30


def test_an_oversized_history_file_is_read_only_by_its_tail(tmp_path):
    host = socket.gethostname()
    path = tmp_path / f"{host}.jsonl"
    with path.open("wb") as fh:
        fh.truncate(64 << 20)  # 64 MiB of NUL bytes, sparse: one damaged line far longer than the limit
        fh.seek(0, os.SEEK_END)
        fh.write(b"\n")
    append_run(tmp_path, {**REPORT, "host": host})
    tracemalloc.start()
    try:
        history = _within(2.0, read_history, tmp_path, host)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * MAX_READ_BYTES, f"read {peak} bytes for a {MAX_READ_BYTES}-byte limit"
    assert history.truncated and len(history.runs) == 1 and history.skipped == 0  # the cut line is dropped
    assert history.runs[0]["host"] == host
