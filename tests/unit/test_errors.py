"""Every error prints as one line, whatever user text it quotes."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from rocmstack.errors import ExitCode, RecipeError, printable, quoted


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain name", "plain name"),
        ("a\nb", "a\\nb"),
        ("\x1b[31mred", "\\x1b[31mred"),
        ("no\xa0break", "no\\xa0break"),
        ("line\u2028sep", "line\\u2028sep"),
        ("zero\u200bwidth", "zero\\u200bwidth"),
        ("gfx950 é 中", "gfx950 é 中"),
    ],
)
def test_printable_escapes_only_what_could_break_or_hide_a_line(text, shown):
    assert printable(text) == shown


def test_quoted_shows_empty_and_padded_values():
    assert quoted("") == "''" and quoted(" x ") == "' x '" and quoted("it's") == "'it\\'s'"


@pytest.mark.property
@given(st.text(), st.one_of(st.none(), st.text()))
@example("key\n", "fix\r\n")
def test_one_line_is_one_printable_line(message, fix):
    line = RecipeError(message, fix=fix).one_line()
    assert line.isprintable() and "\n" not in line
    assert RecipeError(message).exit_code == ExitCode.USAGE


@pytest.mark.parametrize(
    "sequence",
    [
        "\x1b[2J",  # ESC CSI: clear the screen
        "\x9b31m",  # the one-byte C1 CSI
        "\x1b]0;title\x07",  # OSC: set the window title
        "\x1b]8;;https://evil/\x1b\\link\x1b]8;;\x1b\\",  # OSC 8: a disguised hyperlink
        "\x90q\x9c",  # DCS ... ST (C1)
        "\x7f\x08\r",  # DEL, backspace, carriage return
    ],
)
def test_no_terminal_escape_survives_printable_even_in_multi_line_output(sequence):
    """Image-provided text goes through printable() before it is printed (issue 20); ``keep`` lets a
    multi-line document (an SBOM on stdout) keep its line breaks and tabs, never a control sequence."""
    shown = printable(f"a{sequence}b\n\tc", keep="\n\t")
    assert shown.endswith("b\n\tc")
    assert not any((ord(ch) < 0x20 and ch not in "\n\t") or 0x7F <= ord(ch) <= 0x9F for ch in shown)


def test_did_you_mean_names_only_a_near_miss():
    from rocmstack.errors import did_you_mean

    assert did_you_mean("sglnag", ["sglang", "vllm"]) == "did you mean 'sglang'? "
    assert did_you_mean("descripton", {"description": 1, "env": 2}) == "did you mean 'description'? "
    assert did_you_mean("torch", ["sglang", "vllm"]) == ""
    assert did_you_mean("x", []) == ""
