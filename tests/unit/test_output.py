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
