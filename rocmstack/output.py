"""Shared output helpers: one JSON style for every --json, one rich console per stream."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
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


def check_output_dir(path: Path, flag: str) -> None:
    """Refuse, before any work, a folder a command could not write its files into at the end."""
    from rocmstack.errors import InputError, quoted

    if path.exists() and not path.is_dir():
        raise InputError(
            f"{flag} {quoted(path)}: exists and is not a folder (several files are written into it)",
            fix=f"pass a new folder, e.g. {flag} {quoted(path.with_name(path.name + '.d'))}",
        )
    parent = path
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(
            f"{flag} {quoted(path)}: {quoted(parent)} is not a writable folder",
            fix="pass a folder you can write",
        )


def check_output_file(path: Path, flag: str) -> None:
    """Refuse, before any work, a file path a command could not write at the end."""
    from rocmstack.errors import InputError, quoted

    if path.is_dir():
        raise InputError(
            f"{flag} {quoted(path)}: is a folder", fix=f"name a file, e.g. {flag} {quoted(path / 'out.json')}"
        )
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(
            f"{flag} {quoted(path)}: {quoted(parent)} is not a writable folder",
            fix="create the folder first, or name a file in a folder you can write",
        )
