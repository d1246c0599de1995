"""The one status of every check, rule, stage, criterion and bench row: pass, warn, fail, skip, error.

A report's verdict is a separate boolean (``passed``); a status says how one thing went. ``warn`` ran and
has something to say but does not fail the run by itself; ``skip`` did not run (not asked for, not
applicable, or waived by the user); ``error`` could not judge (the probe or the tool crashed).

Files written before this vocabulary spelled some of these differently: a validate stage ``skipped``, a
rule ``ignored`` in a lock. Each reader of such a file maps exactly its own old spelling, never a general
table: an image's stage ``ok`` was never a pass and must not become one.
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"


FAILING = (Status.FAIL, Status.ERROR)  # what fails a run; warn and skip do not by themselves


def status_of(passed: object) -> Status:
    """A judged boolean as a status: only a real ``True`` passes, ``None`` (could not be measured) is a skip,
    and anything else, from whatever file it came, fails."""
    if passed is None:
        return Status.SKIP
    return Status.PASS if passed is True else Status.FAIL
