"""rocmstack.options: a shared option has one help text everywhere; a renamed option's old spelling still
works and says once what replaced it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ci"))

import gen_docs  # a script of ci/, not a package

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


def _every_option() -> list[tuple[str, str, Any]]:
    """(command path, option name, its click parameter) for every option of every rocmstack command."""
    return gen_docs.every_option()


@pytest.mark.parametrize("flag", ["--json", "--set", "--patches-dir", "--skip"])
def test_a_shared_option_has_one_help_text_wherever_a_command_takes_it(flag):
    shown = [(path, p.help) for path, name, p in _every_option() if name == flag and not p.hidden]
    assert len(shown) >= 2 and len({help for _, help in shown}) == 1, shown


def _shared_spellings() -> set[str]:
    """Every visible spelling that two or more commands take."""
    commands: dict[str, set[str]] = {}
    for path, name, param in _every_option():
        if not param.hidden:
            commands.setdefault(name, set()).add(path)
    return {name for name, paths in commands.items() if len(paths) > 1}


def declared_by_hand(source: str, shared: set[str]) -> list[str]:
    """``line: flag`` of each option in a command module's source that spells a shared option itself
    (``typer.Option(..., "--flag")`` anywhere: a parameter's default, a table's entry, a dataclass field; or one
    without a flag, named after its parameter or field), and of every previous spelling declared there
    (``old_spelling``: they all live in rocmstack.options, each with what replaced it)."""
    import ast

    tree = ast.parse(source)
    # an option given no flag is spelt after the parameter, or the field (doctor's groups), it declares
    named: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            params = [*node.args.args, *node.args.kwonlyargs]
            defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + [*node.args.defaults]
            defaults += node.args.kw_defaults
            for param, default in zip(params, defaults, strict=True):
                for inner in ast.walk(default) if default is not None else ():
                    named.setdefault(id(inner), param.arg)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            for inner in ast.walk(node.value):
                named.setdefault(id(inner), node.target.id)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if called not in ("Option", "old_spelling"):
            continue
        flags = [a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("-")]
        if not flags and id(node) in named:
            flags = [f"--{named[id(node)].replace('_', '-')}"]
        for flag in flags:
            if flag in shared or called == "old_spelling":
                found.append((node.lineno, node.col_offset, flag))
    return [f"{line}: {flag}" for line, _, flag in sorted(found)]


def test_no_command_declares_a_shared_option_by_itself():
    shared = _shared_spellings()
    assert {"--json", "--gpu-arch", "--output", "--engine", "--timeout"} <= shared
    commands = Path(__file__).resolve().parents[2] / "rocmstack" / "commands"
    found = {
        path.name: hits
        for path in sorted(commands.glob("*.py"))
        if (hits := declared_by_hand(path.read_text(encoding="utf-8"), shared))
    }
    assert not found, f"declare these once in rocmstack/options.py: {found}"


def test_an_option_spelt_by_hand_is_found():
    source = (
        "import typer\n"
        "def cmd(a: bool = typer.Option(False, '--json', help='mine'),\n"
        "        markdown: bool = typer.Option(False, help='mine'),\n"
        "        old: str = old_spelling('--minutes'),\n"
        "        own: int = typer.Option(1, '--mine')):\n"
        "    pass\n"
    )
    assert declared_by_hand(source, {"--json", "--markdown", "--timeout"}) == [
        "2: --json",
        "3: --markdown",
        "4: --minutes",
    ]


def test_an_option_spelt_by_hand_in_a_table_is_found():
    # not a parameter's default: a table of options (doctor's groups), a dataclass field, a module constant
    source = (
        "import typer\n"
        "@dataclass(frozen=True)\n"
        "class Output(Group):\n"
        "    json_out: bool = opt(typer.Option(False, '--json', help='mine'))\n"
        "    markdown: bool = opt(typer.Option(False, help='mine'))\n"
        "    own: int = opt(typer.Option(1, '--mine'))\n"
        "TABLE = (('timeout', str, typer.Option('30s', '--timeout')), ('x', int, old_spelling('--minutes')))\n"
    )
    assert declared_by_hand(source, {"--json", "--markdown", "--timeout"}) == [
        "4: --json",
        "5: --markdown",
        "7: --timeout",
        "7: --minutes",
    ]


def test_every_shared_option_says_its_declared_meaning_wherever_a_command_takes_it():
    declared = gen_docs._declarations()
    for flag, commands in gen_docs.option_uses().items():
        if len(commands) < 2:
            continue
        text = declared[flag][0]
        helps = {(path, p.help) for path, name, p in _every_option() if name == flag and not p.hidden}
        assert all(help.startswith(text) for _, help in helps), (flag, helps)
