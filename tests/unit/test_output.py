"""Shared output: tables never cut what users copy (names, ids, refs, URLs), warnings obey --quiet."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from rocmstack.output import print_table, table, warn

NAME = "vime-megatron-vllm-rocm7.14"
REF = "0801cc05ed202544e2e5c67d6b0a1d454de54fca"
URL = "https://github.com/vllm-project/vllm/blob/main/docs/getting_started/installation/gpu.rocm.inc.md"


@pytest.mark.parametrize("width", [40, 80, 200])
@pytest.mark.parametrize("edge", [True, False])
def test_kept_columns_are_never_cut_and_other_text_wraps(width, edge):
    tab = table("name", "ref", "source", "description", keep=("name", "ref", "source"), show_edge=edge)
    long_text = "a description long enough that it has to wrap onto several lines " * 3
    tab.add_row(NAME, REF, URL, long_text)
    buf = io.StringIO()
    print_table(tab, Console(file=buf, width=width, color_system=None))
    text = buf.getvalue()
    for value in (NAME, REF, URL):
        assert value in text
    assert "…" not in text
    # Every word of the wrapped column is there, whole.
    assert " ".join(text.split()).count("several") == 3


def test_a_table_that_fits_keeps_the_console_width():
    tab = table("name", "what", keep=("name",))
    tab.add_row("short", "text")
    buf = io.StringIO()
    print_table(tab, Console(file=buf, width=80, color_system=None))
    assert max(len(line) for line in buf.getvalue().splitlines()) <= 80


def test_warn_is_silenced_by_quiet(monkeypatch, capsys):
    warn("[gfx942;gfx950] is data, not markup")
    assert capsys.readouterr().err == "warning: [gfx942;gfx950] is data, not markup\n"
    monkeypatch.setenv("ROCMSTACK_QUIET", "1")
    warn("hidden")
    assert capsys.readouterr().err == ""


def test_a_log_hears_from_a_long_command_when_nothing_happens(monkeypatch):
    import io
    import time

    from rocmstack.output import log_lines

    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)

    def beats() -> list[str]:
        return [ln for ln in err.getvalue().splitlines() if ln.startswith("smoke grpo: still running after ")]

    with log_lines("smoke grpo", every_s=0.5) as say:
        say("colocated on cpu, 3 steps")
        deadline = time.monotonic() + 30
        while len(beats()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        say("step 1/3: reward 0.05, 0.22 s")
    lines = err.getvalue().splitlines()
    assert lines[0] == "smoke grpo: colocated on cpu, 3 steps"
    assert len(beats()) >= 2 and all(ln.endswith("s (last: colocated on cpu, 3 steps)") for ln in beats())
    assert lines[-1] == "smoke grpo: step 1/3: reward 0.05, 0.22 s"


# --- what a log or a pipe hears from a long command -------------------------------------------------------
# Every long command prints its progress through output.progress_lines / log_lines / waiting: a CI runner that
# ends a job silent for minutes, or a reader of its log, can tell a slow command from a hung one. Each
# command below runs its real option parsing and printing; only the long domain call is a stand-in that says
# one thing, stays busy past a few heartbeats, and ends the command with one bad-input line.

BEAT = 0.2


def _slow(progress) -> None:
    import time

    from rocmstack.errors import InputError

    progress("first news")
    time.sleep(BEAT * 4)
    raise InputError("stand-in finished", fix="-")


def _beats(err: str, label: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith(f"{label}: still running after ")]


LONG_COMMANDS = {
    # label: (argv, the domain call it runs, how that call receives its progress)
    "validate": (["validate", "--in-place"], "rocmstack.validate.pipeline.run_in_place", "progress"),
    "doctor": (["doctor", "--level", "2"], "rocmstack.doctor.runner.run_doctor", "progress"),
    "doctor cluster": (
        ["doctor", "--level", "2", "--ray-address", "127.0.0.1:6379"],
        "rocmstack.doctor.cluster.run_cluster",
        "progress",
    ),
    "bench rollout": (
        ["bench", "rollout", "--device", "cpu", "--batch", "1", "--prompt-len", "8", "--new-tokens", "2"],
        "rocmstack.bench.rollout.run_rollout",
        "progress",
    ),
    "preflight": (
        ["preflight", "--", "python3", "-c", "pass"],
        "rocmstack.preflight.runner.run_preflight",
        "progress",
    ),
    "soak": (["soak", "--runs", "2", "--", "--level", "1"], "rocmstack.doctor.soak.soak", "progress"),
    "smoke framework": (
        ["smoke", "framework", "verl-0.9.0-rocm10"],
        "rocmstack.smoke.framework.run_command",
        "progress",
    ),
    "patch test": (["patch", "test", "verl-0.9.0-rocm10"], "rocmstack.patch_trial.trial", 3),
}


@pytest.mark.parametrize("label", sorted(LONG_COMMANDS))
def test_a_long_command_says_it_still_runs_into_a_log(label, monkeypatch, capsys):
    from rocmstack.cli import main

    argv, target, how = LONG_COMMANDS[label]
    label = label.removesuffix(" cluster")  # the cluster's run speaks as the doctor

    def stand_in(*args, **kwargs):
        _slow(args[how] if isinstance(how, int) else kwargs[how])

    monkeypatch.setattr("rocmstack.output.HEARTBEAT_S", BEAT)
    monkeypatch.setattr(target, stand_in)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    assert f"{label}: first news" in err.splitlines()
    assert len(_beats(err, label)) >= 2, err
    assert all(ln.endswith("(last: first news)") for ln in _beats(err, label))


def test_a_build_in_a_log_names_each_step_and_says_it_still_runs(monkeypatch, capsys, tmp_path):
    """The real engine runner on a real child that prints podman's step lines and stays in step 2."""
    from types import SimpleNamespace

    from rocmstack.build.pipeline import run_engine
    from rocmstack.container.engine import STEP_PROGRESS
    from rocmstack.output import stderr

    monkeypatch.setattr("rocmstack.output.HEARTBEAT_S", BEAT)
    child = "echo 'STEP 1/2: FROM base'; echo 'STEP 2/2: RUN make'; sleep 1; echo '--> 0123abcd'"
    plan = SimpleNamespace(
        command=("sh", "-c", child), log=tmp_path / "build.log", recipe="r",
        engine=SimpleNamespace(progress=STEP_PROGRESS),
    )  # fmt: skip
    result = run_engine(plan, stderr())  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert result.ok, err
    assert "build: step 2/2: RUN make" in err.splitlines()
    assert len(_beats(err, "build")) >= 2, err
    assert "(last: step 2/2: RUN make)" in _beats(err, "build")[-1]


@pytest.mark.parametrize("terminal", [False, True])
def test_a_silent_step_is_shown_once_in_a_log_and_beside_a_spinner_on_a_terminal(terminal, monkeypatch):
    import io
    import time

    from rich.console import Console

    from rocmstack.output import waiting

    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    monkeypatch.setattr("rocmstack.output.HEARTBEAT_S", BEAT)
    console = Console(file=io.StringIO(), force_terminal=terminal)
    with waiting(console, "publish", "pushing r:1 ..."):
        time.sleep(BEAT * 4)
    if terminal:
        assert err.getvalue() == ""  # the spinner is the console's
    else:
        assert err.getvalue().splitlines()[0] == "publish: pushing r:1 ..."
        assert len(_beats(err.getvalue(), "publish")) >= 2


def test_progress_on_a_terminal_is_a_line_a_message_without_beats(monkeypatch):
    import io
    import time

    from rich.console import Console

    from rocmstack.output import progress_lines

    screen = io.StringIO()
    monkeypatch.setattr(
        "rocmstack.output.stderr", lambda: Console(file=screen, force_terminal=True, width=200)
    )
    monkeypatch.setattr("rocmstack.output.HEARTBEAT_S", BEAT)
    with progress_lines("doctor") as say:
        say("[red]not markup[/red] \x1b[2J")
        time.sleep(BEAT * 3)
    text = screen.getvalue()
    assert "[red]not markup[/red] \\x1b[2J" in text and "\x1b[2J" not in text
    assert "still running" not in text
