"""rocmstack.options: a shared option has one help text everywhere; a renamed option's old spelling still
works and says once what replaced it."""

from __future__ import annotations

import pytest

from rocmstack.errors import InputError
from rocmstack.options import BARE_SAVE_BASELINE, bare_old_flags, parse_duration, renamed


def test_the_new_spelling_alone_prints_nothing(capsys):
    assert renamed(3, None, "--smoke-steps", "--steps") == 3
    assert renamed(["a"], [], "--doctor-skip", "--skip") == ["a"]
    assert renamed(True, False, "--old", "--new") is True
    assert capsys.readouterr().err == ""


def test_the_old_spelling_gives_its_value_and_one_note(capsys):
    assert renamed(None, 5, "--smoke-steps", "--steps") == 5
    assert capsys.readouterr().err == "note: --smoke-steps is deprecated; use --steps\n"


def test_repeatable_options_take_both_spellings(capsys):
    assert renamed(["a"], ["b"], "--doctor-skip", "--skip") == ["a", "b"]
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize(("text", "seconds"), [("10s", 10), ("2m", 120), ("1.5h", 5400), ("45", 45)])
def test_durations(text, seconds):
    assert parse_duration(text, "--budget") == seconds


@pytest.mark.parametrize("text", ["", "0s", "-1s", "10 minutes", "2d", "s"])
def test_bad_durations_name_the_value(text):
    with pytest.raises(InputError, match=r"--budget .* is not a positive duration"):
        parse_duration(text, "--budget")


def test_a_flag_that_now_takes_a_value_reads_its_bare_old_form_as_the_hidden_flag():
    bare = BARE_SAVE_BASELINE
    assert bare_old_flags(["doctor", "--save-baseline"], "doctor") == ["doctor", bare]
    assert bare_old_flags(["doctor", "--save-baseline", "--json"], "doctor") == ["doctor", bare, "--json"]
    given = ["doctor", "--save-baseline", "b.json", "--json"]
    assert bare_old_flags(given, "doctor") == given  # a value: the new form
    assert bare_old_flags(["bench", "rollout", "--save-baseline"], "bench") == [
        "bench",
        "rollout",
        "--save-baseline",
    ]
    assert bare_old_flags(["doctor", "--", "--save-baseline"], "doctor") == [
        "doctor",
        "--",
        "--save-baseline",
    ]


def _every_option() -> list[tuple[str, str, object]]:
    """(command path, option name, its click parameter) for every option of every rocmstack command."""
    import click
    import typer

    from rocmstack.cli import make_app

    out = []

    def walk(cmd: click.Command, path: str) -> None:
        for param in cmd.params:
            for name in param.opts:
                out.append((path, name, param))
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(typer.main.get_command(make_app()), "rocmstack")
    return out


@pytest.mark.parametrize("flag", ["--json", "--set", "--patches-dir", "--skip"])
def test_a_shared_option_has_one_help_text_wherever_a_command_takes_it(flag):
    shown = [(path, p.help) for path, name, p in _every_option() if name == flag and not p.hidden]
    assert len(shown) >= 2 and len({help for _, help in shown}) == 1, shown
