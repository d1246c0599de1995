"""Shared output helpers: one JSON style for every --json, one rich console per stream."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape


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
    # The message is data (it may hold "ray[default]" or "[gfx942;gfx950]"): never read as markup.
    stderr().print(f"[yellow]warning:[/yellow] {escape(message)}")
