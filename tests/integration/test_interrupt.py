"""Ctrl-C during the start-up of doctor, smoke and bench: a real SIGINT to a real `rocmstack` process.

One "interrupted" line, exit 130, the children (probes in sessions of their own, Ray's daemons, the bench's
work) stopped at once, and the bench's finished rows kept.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from rocmstack.gpu.ray_local import TMPDIR_ENV

pytestmark = [pytest.mark.slow]

TINY = {
    "model_type": "qwen3", "vocab_size": 96, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "tie_word_embeddings": True,
}  # fmt: skip


def _start(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "rocmstack", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        # Ctrl-C as a terminal sends it: default handling in the child, whatever this suite inherited.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _wait_for(what, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.05)


def _one_line(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("rocmstack: ")]


@pytest.mark.timeout(180)
def test_doctor_stops_its_probes_at_once(tmp_path):
    proc = _start(["doctor", "--expect-gpus", "0"])
    _wait_for(lambda: len(_children(proc.pid)) >= 2)  # the probes run (each in a session of its own)
    probes = _children(proc.pid)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert _one_line(err) == ["rocmstack: interrupted"] and "Traceback" not in err, err
    time.sleep(0.5)
    assert [p for p in probes if _alive(p)] == []  # not left to run out their time limit


@pytest.mark.timeout(240)
def test_smoke_interrupted_while_ray_starts_stops_ray_and_removes_its_folder():
    folder = Path(tempfile.mkdtemp(prefix="rt-", dir="/tmp"))
    try:
        proc = _start(["smoke", "grpo", "--device", "cpu"], {TMPDIR_ENV: str(folder)})
        _wait_for(lambda: any(folder.iterdir()))  # Ray is starting in its private folder
        _wait_for(lambda: any(folder.glob("*/session_*")))
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        lines = _one_line(err)
        assert len(lines) == 1 and "interrupted" in lines[0] and "Traceback" not in err, err
        assert list(folder.iterdir()) == []
        ps = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
        assert str(folder) not in ps  # none of its daemons runs on
    finally:
        subprocess.run(["rm", "-rf", str(folder)], check=False)


@pytest.mark.timeout(300)
def test_bench_keeps_its_finished_rows(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    report = tmp_path / "rollout.json"
    # Batch 1 is quick; batch 2 with many tokens is where Ctrl-C lands.
    args = ["bench", "rollout", "--device", "cpu", "--shape", str(config), "--engine", "reference"]
    args += ["--batch", "1,2", "--prompt-len", "4", "--new-tokens", "2000", "-o", str(report)]
    proc = _start(args)
    seen: list[str] = []
    assert proc.stderr is not None
    for line in proc.stderr:
        seen.append(line)
        if "reference: batch 2" in line:
            break
    proc.send_signal(signal.SIGINT)
    out, rest = proc.communicate(timeout=60)
    err = "".join(seen) + rest
    assert proc.returncode == 130, err
    lines = _one_line(err)
    assert len(lines) == 1 and lines[0].startswith(
        "rocmstack: error: bench interrupted at reference: batch 2"
    )
    assert f"1 finished row(s) in {report}" in lines[0]
    kept = json.loads(report.read_text())
    assert [(r["engine"], r["batch"], r["status"]) for r in kept["results"]] == [("reference", 1, "pass")]
    assert kept["interrupted"]["rows"] == 1
    assert "reference" in out  # the finished row's table


@pytest.mark.timeout(240)
def test_smoke_stopped_by_sigterm_after_ray_started_removes_its_folder():
    # Ray's core installs a SIGTERM handler of its own at start, which skipped the clean-up.
    folder = Path(tempfile.mkdtemp(prefix="rt-", dir="/tmp"))
    try:
        proc = _start(["smoke", "grpo", "--device", "cpu"], {TMPDIR_ENV: str(folder)})

        # The smoke's actors exist only once ray.init has returned (a SIGTERM inside ray.init itself meets
        # Ray's C++ handler, which ends the process at once: Ray's reaper then stops the daemons, and the
        # folder stays); on a loaded machine the start can take long after the driver's log appears.
        def actors_up() -> bool:  # this instance's workers log ":actor_name:<class>" once their actor exists
            logs = folder.glob("*/session_latest/logs/worker-*")
            return any(":actor_name:" in p.read_text(errors="replace") for p in logs if p.is_file())

        _wait_for(actors_up, timeout=180)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signal.SIGTERM, err
        assert list(folder.iterdir()) == []
        ps = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
        assert str(folder) not in ps
    finally:
        subprocess.run(["rm", "-rf", str(folder)], check=False)


@pytest.mark.parametrize("after_s", [0.1, 0.2, 0.35, 0.6])
def test_ctrl_c_while_the_command_line_is_still_being_imported_is_one_line(after_s):
    """The installed `rocmstack` program, interrupted within its first second (typer and the command modules
    still importing): one line, exit 130, never a traceback."""
    exe = Path(sys.executable).with_name("rocmstack")
    delay = after_s
    for _ in range(5):
        proc = subprocess.Popen(
            [str(exe), "doctor", "--expect-gpus", "0", "--fast"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        # On a loaded machine the signal can land before the interpreter runs any of rocmstack's code: while it
        # loads itself (killed, nothing printed) or its site module ("Fatal Python error: init_import_site").
        # Nothing of rocmstack's ran yet: signal later.
        before_us = not err or err.startswith("Fatal Python error: init_import_site")
        if not (proc.returncode in (-signal.SIGINT, 1) and before_us):
            break
        delay *= 2
    if proc.returncode == 0:  # it finished first: nothing to judge at this moment
        pytest.skip(f"the run ended within {delay} s")
    assert proc.returncode == 130 and err.strip() == "rocmstack: interrupted", (proc.returncode, err[-2000:])
