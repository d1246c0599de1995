"""Options shared by several commands, declared once: one spelling, one meaning, one help text."""

from __future__ import annotations

import os
import re
import sys
from typing import Any

import typer

from rocmstack.errors import InputError, quoted

ADVISORIES_DIR_OPT = typer.Option(
    [],
    "--advisories-dir",
    metavar="DIR",
    help="Also match the advisories (*.yaml) in this folder, after the shipped ones (repeat)",
)
PATCHES_DIR_OPT = typer.Option(
    None,
    "--patches-dir",
    help="Patch specs folder (default: the recipe's patches_dir field, else the shipped patches/)",
)
RECIPE_HELP = "Recipe name (see `rocmstack recipes`) or path to a recipe .yaml"
RECIPE_ARG = typer.Argument(..., help=RECIPE_HELP)
RECIPE_ARG_OPTIONAL = typer.Argument(None, help=RECIPE_HELP)
ARCH_OPT = typer.Option(None, "--gpu-arch", help="GPU arch or ';'-list, e.g. gfx950 or 'gfx942;gfx950'")
SET_OPT = typer.Option(
    [], "--set", help="Override a field: component.field=value, base.python=3.12, env.NAME=value"
)
IGNORE_OPT = typer.Option(
    [], "--ignore-rule", help="Override a failing rule (repeatable); shown in the output and image labels"
)
RELOCK_OPT = typer.Option(False, "--relock", help="Accept recipe changes: rewrite its lock entry")
JSON_OPT = typer.Option(False, "--json", help="Print the result as JSON on stdout.")
SIGN_OPT = typer.Option(
    None,
    "--sign",
    metavar="KEY",
    help="Sign the pushed image's digest with this sigstore private key (cosign generate-key-pair): "
    "cosign where installed, else skopeo",
)
SIGN_PASSPHRASE_OPT = typer.Option(
    None,
    "--sign-passphrase-file",
    metavar="FILE",
    help="The --sign key's passphrase (default: COSIGN_PASSWORD)",
)
# the doctor's check ids left out, wherever a command runs the doctor (doctor, validate)
DOCTOR_SKIP_OPT = typer.Option(
    [], "--skip", metavar="ID", help="Leave these doctor check ids out (repeat or a,b)."
)


def old_spelling(old: str, metavar: str | None = None, *, repeatable: bool = False) -> Any:
    """A renamed option's previous spelling: hidden, kept for one release, read through ``renamed``."""
    return typer.Option([] if repeatable else None, old, hidden=True, metavar=metavar)


# Set by `validate` on its in-image run, whose arguments it writes in the previous release's spellings (which
# images it built understand): the deprecation notes are for what a user typed, so that run prints none.
HOST_ARGV_ENV = "ROCMSTACK_ARGV_FROM_HOST"


def renamed(new_value: Any, old_value: Any, old: str, new: str) -> Any:
    """The option's value from its new spelling or its old one; the old one prints a one-line note.

    Repeatable options (lists) take the values of both spellings."""
    if old_value is None or old_value is False or old_value == []:
        return new_value
    if os.environ.get(HOST_ARGV_ENV) != "1":  # the user typed it, not validate's host side
        sys.stderr.write(f"note: {old} is deprecated; use {new}\n")
    if isinstance(old_value, list):
        return [*(new_value or []), *old_value]
    return old_value


# `doctor --save-baseline` was a flag (save into the --baseline file) and now takes a FILE, as the bench's does.
# Its bare old form (last, or before another option) is read as this hidden flag for one release.
BARE_SAVE_BASELINE = "--save-baseline-bare"
BARE_OLD_FLAGS = {("doctor", "--save-baseline"): BARE_SAVE_BASELINE}  # (command, option) -> hidden flag


def bare_old_flags(argv: list[str], command: str | None) -> list[str]:
    """ARGV with each bare old flag of COMMAND (see BARE_OLD_FLAGS) as its hidden flag; the rest as given."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        if arg == "--":
            return out + argv[i:]
        hidden = BARE_OLD_FLAGS.get((command or "", arg))
        after = argv[i + 1] if i + 1 < len(argv) else None
        out.append(hidden if hidden and (after is None or after.startswith("-")) else arg)
    return out


# Previous spellings of repeatable options, kept hidden for one release.
DOCTOR_SKIP_OLD = old_spelling("--doctor-skip", "ID", repeatable=True)  # validate: now --skip
PUBLISH_REPORT_OLD = old_spelling("--report", "DIR", repeatable=True)  # publish: now --reports
ALLOW_SKIP_OLD = old_spelling("--allow-skip", "ID", repeatable=True)  # publish: now --accept-skipped


# Durations: every time option reads `90s`, `5m`, `1.5h` or plain seconds.
DURATION_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str, flag: str) -> float:
    """``10s``, ``2m``, ``1.5h`` or plain seconds -> seconds; InputError naming the option otherwise."""

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise InputError(f"{flag} {quoted(text)} is not a positive duration", fix=f"e.g. {flag} 10s or 2m")
    return float(m.group(1)) * DURATION_UNITS[m.group(2)]
