"""Shared output helpers: one JSON style for every --json, one rich console per stream."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console


def stdout() -> Console:
    return Console(highlight=False, soft_wrap=True)


def stderr() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def dumps(obj: Any) -> str:
    """Canonical JSON: sorted keys, stable separators, so outputs diff and hash cleanly."""
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n"


def print_json(obj: Any) -> None:
    sys.stdout.write(dumps(obj))
    sys.stdout.flush()


def warn(message: str) -> None:
    stderr().print(f"[yellow]warning:[/yellow] {message}")
