"""Every failure class rocmstack reports, each with its own exit code.

A RocmstackError is printed as one line (``rocmstack: error: ...``) with no traceback; the message says
what was wrong and how to fix it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from enum import IntEnum


def printable(text: object, keep: str = "") -> str:
    """``text`` with every character Python does not call printable escaped (``\\n``, ``\\x1b``, ``\\xa0``,
    ``\\u2028``): nothing can break, hide or disguise part of the line. Use it wherever a message quotes
    user input, and on all text an image provides before it is printed: every terminal escape sequence
    (ESC, CSI, OSC; C0 and C1 controls, DEL, bidi overrides) starts with such a character, so none reaches
    the terminal. Characters in ``keep`` (``"\\n"`` for multi-line output) pass as they are."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(
        ch if ch.isprintable() or ch in keep else ch.encode("unicode_escape").decode("ascii") for ch in s
    )


def quoted(text: object) -> str:
    """User input named in a message: quoted, so empty or space-padded values show, and escaped like
    ``printable``."""
    return "'" + printable(text).replace("'", "\\'") + "'"


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1  # a check, rule, verdict or validation failed
    USAGE = 2  # bad input: recipe, override, argument
    BUILD = 3  # the container build itself failed
    ENGINE = 4  # no usable container engine, or a registry/base image out of reach
    NOTHING_JUDGED = 5  # the doctor ran but judged no check (all skipped or over --budget): not a pass
    BREAKER_OPEN = 6  # a Slurm hook would drain, but the fleet's circuit breaker holds it back
    INTERRUPTED = 130


class RocmstackError(Exception):
    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, *, fix: str | None = None, detail: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix
        self.detail = detail  # printed below the one line (e.g. a resolver's full explanation)

    def one_line(self) -> str:
        # The last guard: whatever a message quoted, it prints as exactly one line.
        return printable(f"{self.message} ({self.fix})" if self.fix else self.message)


class InputError(RocmstackError):
    """Bad input from the command line or a file."""


class RecipeError(InputError):
    """A recipe file (or an override of it) is invalid."""


class RuleFailure(RocmstackError):
    """A compatibility rule failed; render/build refuse to go on."""

    exit_code = ExitCode.FAILED


class BuildError(RocmstackError):
    exit_code = ExitCode.BUILD


class EngineError(RocmstackError):
    """No container engine usable, or the registry / base image cannot be reached."""

    exit_code = ExitCode.ENGINE


class Interrupted(RocmstackError):
    """Ctrl-C: the message says where the work stopped and what it kept."""

    exit_code = ExitCode.INTERRUPTED


class CheckFailed(RocmstackError):
    """A doctor check, smoke verdict, bench gate or validation did not pass."""

    exit_code = ExitCode.FAILED


class NetworkError(EngineError):
    """A package index or git remote cannot be reached (exit 4); nothing was written."""


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"did you mean 'x'? "`` for the closest of CHOICES to a misspelt WORD, else ``""`` (a prefix for a fix)."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean {quoted(close[0])}? " if close else ""
