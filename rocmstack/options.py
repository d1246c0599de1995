"""Options shared by several commands, declared once: one spelling, one meaning, one help text.

A spelling that two commands take is declared here and nowhere else (a test reads the command modules for
one declared by hand); README.md's options table is generated from the CLI these declarations make.
A ``Shared`` option lets each command give its own default; the rest is fixed here.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Shared:
    """An option several commands take. Call it with the command's default (a list makes it repeatable)."""

    flags: tuple[str, ...]
    help: str
    metavar: str | None = None

    def __call__(
        self, default: Any = None, *, detail: str = "", hidden: bool = False, min: float | None = None
    ) -> Any:
        """The option with this command's default; ``detail`` adds what it is here (OUTPUT: which file);
        ``min`` is typer's bound on a number."""
        text = f"{self.help} {detail}" if detail else self.help
        return typer.Option(default, *self.flags, help=text, metavar=self.metavar, hidden=hidden, min=min)


GPU_ARCH = Shared(
    ("--gpu-arch",),
    "GPU arch or ';'-list (an arch set), e.g. gfx950 or 'gfx942;gfx950'. Default: the recipe's arch sets (diff, "
    "outdated: the widest one's lock entry; matrix: repeat for several sets); doctor, checkpoint: this node's GPUs.",
    "ARCH",
)
ARCH_OPT = GPU_ARCH()
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
ALL_RECIPES_OPT = typer.Option(
    False,
    "--all",
    help="Every recipe `rocmstack recipes` lists (--recipes-dir and $ROCMSTACK_RECIPES_PATH first, when given) "
    "x its default arch sets",
)
REGISTRY_OPT = typer.Option(
    None, "--registry", help="Registry prefix for the tags, e.g. ghcr.io/acme or localhost:5000"
)
ALIAS_OPT = typer.Option([], "--alias", help="Extra floating alias, e.g. latest (repeatable)")
INSECURE = Shared(
    ("--insecure-registry",),
    "The registry is plain HTTP or self-signed (podman/skopeo: --tls-verify=false); for build, the "
    "--base-from mirror too",
)
INSECURE_OPT = INSECURE(False)
PROMOTE = Shared(
    ("--promote",),
    "Point RECIPE's descriptive tag and aliases at its pushed content tag (registry side), only when the gate "
    "opens on --reports for the image it holds",
)
DRY_RUN = Shared(("--dry-run",), "Print what would run (the plan, the exact commands); change nothing.")
MARKDOWN = Shared(("--markdown",), "Print the result as Markdown (a PR comment, a CI job summary).")
CONTAINER_ENGINE = Shared(
    ("--engine",),
    "Container engine: auto | docker | podman | buildah; auto takes the first that works of those that can do "
    "what the command needs (build, tags, inspect, diff: docker, podman; validate: docker, podman, buildah, "
    "which runs --isolation chroot; base-freeze: docker, buildah; publish: docker, podman, buildah, which "
    "means podman's store).",
)
DEVICE = Shared(
    ("--device",), "Where torch runs: auto (a GPU when torch sees one), cuda (ROCm GPUs too) or cpu."
)
STEPS = Shared(("--steps",), "Training steps of the smoke job (default: the job's own).", "N")
ROLLOUT = Shared(
    ("--rollout",),
    "The rollout engine: reference (rocmstack's own decoder) or an engine of the image, by its catalogue name "
    "(rocmstack.gpu.rollout).",
)
SEED = Shared(("--seed",), "Seed for model init, prompts and sampling.")
EXPECT_GPUS = Shared(
    ("--expect-gpus",),
    "GPUs a node must show, after the visibility masks (matrix: GPUs each GPU runner has).",
    "N",
)
ALLOW_RECIPE_COMMAND = Shared(
    ("--allow-recipe-command",),
    "On a node that is no rocmstack image: run the recipe's framework smoke command (it is code from the "
    "recipe; it gets a minimal environment, never the caller's secrets).",
)
KV_CACHE_DTYPE = Shared(
    ("--kv-cache-dtype",), "The engine's KV-cache dtype setting (auto, fp8, ...).", "DTYPE"
)
ONLY = Shared(
    ("--only",), "Only these ids (repeat or a,b): the doctor's check ids, a recipe's patch ids.", "ID"
)
COMPONENT = Shared(
    ("--component",),
    "A recipe component (rocm, vllm, sglang, ...): the one a new patch is for; advisories that name it.",
    "NAME",
)
RECIPE_NAME = Shared(
    ("--recipe",),
    "Recipe name (matrix: repeat; default every recipe `rocmstack recipes` lists; validate --in-place on a node "
    "that is no rocmstack image: the recipe whose engines and framework it holds).",
    "NAME",
)
TIMEOUT = Shared(
    ("--timeout",), "Time limit of the run, e.g. 90s, 5m or 1.5h (a plain number is seconds).", "TIME"
)
OUTPUT = Shared(
    ("-o", "--output"),
    "Where the command writes: a file or a folder, as its help says.",
    "PATH",
)
BASELINE = Shared(
    ("--baseline",),
    "A rollout bench baseline file: a decode rate below it (beyond its tolerance) fails.",
    "FILE",
)
# the doctor's check ids left out, wherever a command runs the doctor (doctor, validate)
DOCTOR_SKIP_OPT = typer.Option(
    [], "--skip", metavar="ID", help="Leave these doctor check ids out (repeat or a,b)."
)


def split_ids(values: list[str]) -> tuple[str, ...]:
    """A repeatable list option's values: ``--only a --only b`` and ``--only a,b`` alike."""
    return tuple(v.strip() for item in values for v in item.split(",") if v.strip())


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
REPORT_OLD = old_spelling("--report", "DIR")  # smoke grpo, smoke framework, validate: now -o/--output
OUT_DIR_OLD = old_spelling("--out-dir", "DIR")  # build, lock: now -o/--output
ROLLOUT_ENGINE_OLD = old_spelling("--engine")  # bench rollout: now --rollout; smoke grpo: now --decoder
SMOKE_STEPS_OLD = old_spelling("--smoke-steps", "N")  # validate: now --steps
WORK_DIR_OLD = old_spelling("--work-dir", "DIR")  # preflight: now -o/--output
SMOKE_SHAPE_OLD = old_spelling(
    "--shape"
)  # smoke grpo: now --size (bench rollout's --shape is a model config)
MINUTES_OLD = old_spelling("--minutes", "N")  # doctor: now --burn-in TIME
PROBE_TIMEOUT_OLD = old_spelling(
    "--timeout", "S"
)  # doctor: now --probe-timeout (--timeout limits a whole run)
BUSBW_BASELINE_OLD = old_spelling(
    "--baseline", "FILE"
)  # doctor: now --busbw-baseline (--baseline: the bench's)
SAVE_BUSBW_BASELINE_OLD = old_spelling("--save-baseline", "FILE")  # doctor: now --save-busbw-baseline


# Durations: every time option reads `90s`, `5m`, `1.5h` or plain seconds.
DURATION_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str, flag: str) -> float:
    """``10s``, ``2m``, ``1.5h`` or plain seconds -> seconds; InputError naming the option otherwise."""

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise InputError(f"{flag} {quoted(text)} is not a positive duration", fix=f"e.g. {flag} 10s or 2m")
    return float(m.group(1)) * DURATION_UNITS[m.group(2)]
