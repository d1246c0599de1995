"""CLI commands for this concern (registered by rocmstack.cli)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Work in progress: this concern registers no command yet."""
