"""How a probe that runs GPU work reports a failure: one line naming the exception, in the result, never
raised, so one broken probe leaves the others' results and the report whole."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

LINE_MAX = 400


def error_line(exc: BaseException) -> str:
    """``Type: first line of the message``, at most LINE_MAX characters."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"[:LINE_MAX]


def guarded(fn: Callable[[], Any]) -> Any:
    """``fn()``, or ``{"error": error_line(exc)}`` when it raises an Exception."""
    try:
        return fn()
    except Exception as exc:
        return {"error": error_line(exc)}
