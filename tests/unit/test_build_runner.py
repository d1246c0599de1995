"""The build runner with real child processes: log file, tail, timeout, and stopping the child on Ctrl-C."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from rocmstack.build import runner as R
from rocmstack.container.engine import STEP_PROGRESS

pytestmark = pytest.mark.timeout(120)

# A stand-in engine: prints podman-style steps. A real process, so signals and pipes behave for real.
SCRIPT = textwrap.dedent("""
    import os, sys, time
    print(f"pid {os.getpid()}", flush=True)
    for i in range(1, 4):
        print(f"STEP {i}/3: RUN step {i}", flush=True)
        for j in range(40):
            print(f"line {i}.{j}", flush=True)
    if sys.argv[1] == "sleep":
        time.sleep(60)
    sys.exit(int(sys.argv[2]))
""")


def child(tmp_path, mode="fast", code=0):
    script = tmp_path / "engine.py"
    script.write_text(SCRIPT)
    return [sys.executable, str(script), mode, str(code)]


def test_log_tail_and_steps(tmp_path):
    log = tmp_path / "logs" / "b.log"
    result = R.run_logged(child(tmp_path), log_path=log, progress=STEP_PROGRESS, timeout_s=60)
    assert result.ok and [s.index for s in result.steps] == [1, 2, 3]
    assert len(result.tail) == R.TAIL_LINES and result.tail[-1] == "line 3.39"
    text = log.read_text()
    assert text.startswith("$ ") and "line 1.0\n" in text and "line 3.39\n" in text


def test_failure_marks_the_last_step(tmp_path):
    result = R.run_logged(
        child(tmp_path, code=3), log_path=tmp_path / "b.log", progress=STEP_PROGRESS, timeout_s=60
    )
    assert not result.ok and result.returncode == 3
    assert result.steps[-1].failed and result.steps[-1].index == 3


def test_timeout_stops_the_child(tmp_path):
    result = R.run_logged(
        child(tmp_path, "sleep"), log_path=tmp_path / "b.log", progress=STEP_PROGRESS, timeout_s=2
    )
    assert result.timed_out and not result.ok
    pid = int(
        next(
            line for line in (tmp_path / "b.log").read_text().splitlines() if line.startswith("pid ")
        ).split()[1]
    )
    assert not os.path.exists(f"/proc/{pid}") or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def test_ctrl_c_stops_the_child_and_propagates(tmp_path):
    pids = []

    def on_line(line):
        if line.startswith("pid "):
            pids.append(int(line.split()[1]))
        if line.startswith("STEP 2/3"):
            raise KeyboardInterrupt  # what Ctrl-C raises in the reading thread

    log = tmp_path / "b.log"
    with pytest.raises(KeyboardInterrupt):
        R.run_logged(
            child(tmp_path, "sleep"), log_path=log, progress=STEP_PROGRESS, timeout_s=60, on_line=on_line
        )
    assert pids and not os.path.exists(f"/proc/{pids[0]}")
    assert "build interrupted; the engine was stopped" in log.read_text()


# An engine in its clean-up grace: it ignores SIGINT (as podman does while it removes its working
# container) and dies on SIGTERM. The rocmstack side is a real process running the real runner, with a
# short grace, so the test sends it real signals from outside.
STUBBORN = textwrap.dedent("""
    import os, signal, sys, time
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    open(sys.argv[1], "w").write(str(os.getpid()))
    print("ready", flush=True)
    time.sleep(120)
""")
DRIVER = textwrap.dedent("""
    import sys
    from rocmstack.build import runner
    from rocmstack.container.engine import STEP_PROGRESS
    runner.STOP_GRACE_S = 3
    runner.run_logged([sys.executable, sys.argv[1], sys.argv[2]], log_path=__import__("pathlib").Path(sys.argv[3]),
                      progress=STEP_PROGRESS, timeout_s=600)
""")


def _start_driver(tmp_path):
    import subprocess
    import time

    (tmp_path / "engine.py").write_text(STUBBORN)
    pid_file, log = tmp_path / "engine.pid", tmp_path / "b.log"
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(tmp_path / "engine.py"), str(pid_file), str(log)],
        env={**os.environ, "PYTHONPATH": str(Path(R.__file__).resolve().parents[2])},
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not (log.is_file() and "ready" in log.read_text()):
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr and proc.stderr.read()
        time.sleep(0.05)
    return proc, int(pid_file.read_text()), log


def _gone(pid: int) -> bool:
    return not os.path.exists(f"/proc/{pid}") or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def _kill(pid: int) -> None:
    import signal

    if not _gone(pid):
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("sig_name", ["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_stop_the_engine_before_rocmstack_exits(tmp_path, sig_name):
    import signal

    proc, engine, log = _start_driver(tmp_path)
    try:
        proc.send_signal(getattr(signal, sig_name))
        proc.communicate(timeout=60)
        assert _gone(engine), f"the engine kept running after {sig_name}"
        assert "the engine was stopped" in log.read_text()
    finally:
        _kill(engine)


def test_a_second_ctrl_c_while_stopping_hurries_the_stop_and_never_aborts_it(tmp_path):
    import signal
    import time

    proc, engine, log = _start_driver(tmp_path)
    try:
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)  # inside the grace: the engine ignores SIGINT
        assert not _gone(engine)
        proc.send_signal(signal.SIGINT)  # a second Ctrl-C
        proc.send_signal(signal.SIGTERM)  # and CI's SIGTERM
        proc.communicate(timeout=60)
        assert _gone(engine), "the engine kept running after a second Ctrl-C"
        assert "the engine was stopped" in log.read_text()
    finally:
        _kill(engine)


HANG_COMMAND = textwrap.dedent("""
    import sys
    from rocmstack.build import runner

    def register(app):
        @app.command("hang")
        def hang(engine: str, pid_file: str) -> None:
            runner.STOP_GRACE_S = 3
            runner.stream_lines([sys.executable, engine, pid_file], timeout_s=600, on_line=lambda line: None)
""")


def test_the_cli_exits_128_plus_the_signal_after_stopping_the_engine(tmp_path):
    import signal
    import subprocess
    import time

    (tmp_path / "hang_cmd.py").write_text(HANG_COMMAND)
    (tmp_path / "engine.py").write_text(STUBBORN)
    pid_file = tmp_path / "engine.pid"
    src = str(Path(R.__file__).resolve().parents[2])
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from rocmstack.cli import main; main(modules=('hang_cmd',))",
            "hang",
            str(tmp_path / "engine.py"),
            str(pid_file),
        ],
        env={**os.environ, "PYTHONPATH": f"{src}:{tmp_path}"},
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (pid_file.is_file() and pid_file.read_text()):
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr and proc.stderr.read()
        time.sleep(0.05)
    engine = int(pid_file.read_text())
    try:
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signal.SIGTERM, err
        assert _gone(engine) and "Traceback" not in err
    finally:
        _kill(engine)
