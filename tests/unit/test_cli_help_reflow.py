"""Help texts wrap at the terminal's width, never where the docstring's source lines broke."""

from __future__ import annotations

import re

import typer.main

from rocmstack.cli import make_app, reflow
from tests.conftest import run_cli


def _commands(command, path=("rocmstack",)):
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def test_reflow_joins_the_lines_of_a_paragraph_and_keeps_paragraphs_and_list_items():
    text = """First line of a sentence
    that goes on here.

    Second paragraph:
    - one item
    - another
    """
    assert (
        reflow(text)
        == "First line of a sentence that goes on here.\n\nSecond paragraph:\n- one item\n- another"
    )


def test_no_command_help_keeps_a_line_break_inside_a_paragraph():
    root = typer.main.get_command(make_app())
    broken = [
        " ".join(path)
        for path, command in _commands(root)
        for para in (command.help or "").split("\n\n")
        if re.search(r"\n(?!- |\* | )", para)
    ]
    assert broken == []


def test_a_wide_terminal_shows_a_paragraph_on_one_line():
    wide = run_cli("check", "--help", env={"COLUMNS": "400"})
    assert wide.code == 0
    assert any(
        "an unsatisfiable set fails with the conflict in one line" in line for line in wide.out.splitlines()
    ), wide.out
