"""Tools and probes never hang and never raise: time limits kill the whole process group."""

from __future__ import annotations

import os
import sys
import time

from rocmstack.platform.tools import (
    extract_json,
    finish_probe,
    parse_probe_output,
    run_tool,
    start_probe,
    strip_ansi,
)


def test_missing_tool():
    run = run_tool(["rocmstack-no-such-tool"], timeout=5)
    assert run.missing and not run.ok and "not found on PATH" in run.reason()


def test_timeout_kills_the_process_group(tmp_path):
    pidfile = tmp_path / "child"
    code = (
        "import os, subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; "
        f"time.sleep(60)']); open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(60)"
    )
    t0 = time.monotonic()
    run = run_tool([sys.executable, "-c", code], timeout=1.5)
    assert time.monotonic() - t0 < 10
    assert run.timed_out and "killed" in run.reason()
    child = int(pidfile.read_text())
    for _ in range(50):  # the grandchild was in the same group: gone too
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("grandchild survived the timeout")


def test_chatty_tool_does_not_block_on_a_full_pipe():
    run = run_tool([sys.executable, "-c", "import sys; sys.stdout.write('x' * 2_000_000)"], timeout=20)
    assert run.ok and len(run.stdout) == 2_000_000


def test_extract_json_after_warnings_and_ansi():
    text = 'WARNING: something\n\x1b[31mnoise [not json\x1b[0m\n{"card0": {"GPU ID": "0x7408"}}\ntrailer'
    assert extract_json(text) == {"card0": {"GPU ID": "0x7408"}}
    assert extract_json("no json here") is None
    assert strip_ansi("\x1b[31mred\x1b[0m") == "red"


def test_probe_output_marker():
    assert parse_probe_output('lib noise\nROCMSTACK-PROBE-JSON:{"count": 2}\n') == {"count": 2}
    assert parse_probe_output("ROCMSTACK-PROBE-JSON:not json") is None


def test_site_probe_runs_in_the_target_environment(tmp_path):
    (tmp_path / "fakepkg-1.2.3+rocm7.dist-info").mkdir()
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    result = finish_probe("site", start_probe("site", python=sys.executable, timeout=30, env=env))
    assert result.ok, result.reason()
    assert result.data["dists"]["fakepkg"] == "1.2.3+rocm7"
    assert result.data["python"] == ".".join(map(str, sys.version_info[:3]))


def test_crashing_probe_reason(tmp_path):
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch/__init__.py").write_text("import os\nos.abort()\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    result = finish_probe("torch", start_probe("torch", python=sys.executable, timeout=30, env=env))
    assert not result.ok and "crashed (signal 6)" in result.reason()


def test_a_logged_run_keeps_a_progress_bars_redraws_on_the_line_that_began_them(tmp_path):
    # A bar as vLLM's worker draws it under Ray's prefix: read as text, each redraw would be a line of its own
    # with no prefix to say whose it is.
    draw = "print('(Worker pid=7) ' + ''.join(f'\\rCapturing: {k}/3' for k in range(4)))"
    run = run_tool([sys.executable, "-c", draw], timeout=30, log=tmp_path / "step.log")
    assert (
        run.ok
        and run.stdout == "(Worker pid=7) \rCapturing: 0/3\rCapturing: 1/3\rCapturing: 2/3\rCapturing: 3/3\n"
    )
