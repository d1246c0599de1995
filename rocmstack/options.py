"""Options shared by several commands, declared once: one spelling, one meaning, one help text."""

from __future__ import annotations

import typer

PATCHES_DIR_OPT = typer.Option(
    None,
    "--patches-dir",
    help="Patch specs folder (default: the recipe's patches_dir field, else the shipped patches/)",
)
