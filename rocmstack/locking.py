"""``rocmstack lock`` as a domain call: which recipe files a run may write the locks of, every arch set
resolved and its entry made, and nothing written until every one did."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocmstack.errors import InputError, NetworkError
from rocmstack.lock.file import arch_key, default_arch_sets, entry_of, left_unlocked, lock_path, write_lock
from rocmstack.output import print_table, table, warn
from rocmstack.prepare import lock_resolved, previous_entry, rehashed
from rocmstack.recipe.load import load_every, load_recipe, recipes_for_all
from rocmstack.recipe.resolve import Resolved, recipe_arg, resolve
from rocmstack.resolver.closure import closure
from rocmstack.rules.targets import one_or_all
from rocmstack.status import Status

# The counts a lock row shows, in this order (a lock's rules are never an error).
RULE_COUNTS = tuple(str(s) for s in (Status.PASS, Status.FAIL, Status.WARN, Status.SKIP))


@dataclass(frozen=True)
class LockRequest:
    recipe: str | None = None
    every: bool = False
    gpu_arch: str | None = None
    names: tuple[str, ...] = ()  # with refresh: only these components / packages move
    refresh: bool = False
    ignore: tuple[str, ...] = ()
    out_dir: Path | None = None  # None: next to each recipe file
    pins_only: bool = False
    hash_only: bool = False
    allow_unreachable_git: bool = False
    patches_dir: Path | None = None


@dataclass(frozen=True)
class Planned:
    """One lock file, ready to write: every entry of it resolved."""

    dest: Path
    recipe: str
    entries: Mapping[str, dict[str, Any]]


def _in_installed_package(path: Path) -> bool:
    resolved = path.resolve()
    return "_data" in resolved.parts and "site-packages" in str(resolved)


def lock_row(name: str, archs: str, entry: Mapping[str, Any], dest: Path) -> dict[str, Any]:
    """What ``lock --json`` prints of one entry."""
    return {
        "recipe": name,
        "gpu_archs": archs,
        "render_hash": entry["render_hash"],
        "lock": str(dest),
        "packages": len(entry.get("packages", ())),
        "git": {k: v["commit"] for k, v in entry.get("git", {}).items()},
        "unresolved": entry.get("unresolved", []),
        "rules": {s: sum(1 for r in entry["rules"] if r["status"] == s) for s in RULE_COUNTS},
    }


def lock_targets(request: LockRequest) -> list[str]:
    """The recipe files this run locks. ``--all`` takes what ``rocmstack recipes`` lists; the installed
    package's own recipes (their locks ship with it, not the user's to rewrite) only with an output folder."""
    one_or_all(request.recipe, request.every, "lock")
    if request.names and not request.refresh:
        raise InputError(
            f"names given without --refresh: {', '.join(request.names)}",
            fix="add --refresh to move just those, or drop the names",
        )
    if not request.every:
        return [str(request.recipe)]
    targets, skipped = [], []
    for listed in recipes_for_all().values():
        if not request.out_dir and _in_installed_package(listed):
            skipped.append(listed.stem)
        else:
            targets.append(str(listed))
    if skipped:
        warn(
            f"--all: not locked: {', '.join(skipped)}: recipes of the installed rocmstack package (their "
            "locks ship with it); pass --output DIR to lock them there"
        )
    load_every(targets)  # every broken recipe named before any is locked
    return targets


def _resolved_closure(
    request: LockRequest, resolved: Resolved, previous: dict[str, Any] | None
) -> dict[str, Any]:
    """Every package and git commit of the entry; a git remote that did not answer fails with the command
    that leaves it unlocked, unless the run (or the entry it starts from) allows it."""
    model = resolved.recipe
    # What the entry started from already left unlocked may stay so (a child of a shipped recipe locks
    # offline from its parent's lock); any other remote must answer.
    kept = () if request.refresh else left_unlocked(previous, model)
    arch = f" --gpu-arch {shlex.quote(request.gpu_arch)}" if request.gpu_arch else ""
    where = f" --output {shlex.quote(str(request.out_dir))}" if request.out_dir else ""
    again = f"rocmstack lock {recipe_arg(resolved)}{arch}{where} --allow-unreachable-git"
    try:
        found = closure(
            resolved,
            previous=previous,
            refresh=(request.names or True) if request.refresh else (),
            allow_unreachable=request.allow_unreachable_git or bool(kept),
        ).to_json()
        missed = [
            f"{n}: {g['url']} ({g['ref']}) did not answer"
            for n, g in sorted(found["git"].items())
            if g.get("commit") is None and n not in kept
        ]
        if missed and not request.allow_unreachable_git:
            raise NetworkError(f"git remote of {missed[0]}")
    except NetworkError as exc:
        if not exc.message.startswith("git remote "):
            raise
        # The way on without that remote, as a command that runs as printed.
        raise NetworkError(
            f"{model.name}: {exc.message}",
            fix=f"check the network and retry, or run `{again}` to leave it unlocked "
            "(listed in the lock, built from its ref)",
        ) from None
    for note in found.get("unresolved", ()):
        warn(f"{model.name}: not locked: {note}")
    return found


def _entry(
    request: LockRequest, resolved: Resolved, dest: Path, say: Callable[[str], None]
) -> dict[str, Any]:
    model = resolved.recipe
    if request.hash_only:
        locked = entry_of(dest, resolved.arch_list)
        if locked is None:
            raise InputError(
                f"--hash-only: {model.name} [{resolved.arch_list}] has no entry in {dest.name}",
                fix=f"lock it first: rocmstack lock {recipe_arg(resolved)}",
            )
        return rehashed(resolved, locked, request.patches_dir)
    # A child without a lock of its own starts from its parent's: it moves only what it changes.
    previous, started = previous_entry(resolved, dest)
    found = None
    if not request.pins_only:
        if started and not request.refresh:
            say(f"{model.name} [{resolved.arch_list}]: {started}")
        say(f"resolving {model.name} [{resolved.arch_list}] ...")
        found = _resolved_closure(request, resolved, previous)
    return lock_resolved(resolved, ignore=request.ignore, closure=found, patches_dir=request.patches_dir)


def plan_locks(
    request: LockRequest, say: Callable[[str], None]
) -> tuple[list[Planned], list[dict[str, Any]]]:
    """Every lock file of the run, resolved (nothing written), and its rows; ``say`` gets the progress."""
    planned, rows = [], []
    for name in lock_targets(request):
        model, path = load_recipe(name)
        dest = (request.out_dir / lock_path(path).name) if request.out_dir else lock_path(path)
        if not request.out_dir and _in_installed_package(path):
            raise InputError(
                f"{model.name} is a recipe of the installed rocmstack package; its lock is not yours to rewrite",
                fix="pass --output DIR, or copy the recipe into your repository and lock that file",
            )
        sets = [request.gpu_arch] if request.gpu_arch else [arch_key(s) for s in default_arch_sets(model)]
        entries = {}
        for arch in sets:
            resolved = resolve(model, path, arch)
            entry = _entry(request, resolved, dest, say)
            entries[resolved.arch_list] = entry
            rows.append(lock_row(model.name, resolved.arch_list, entry, dest))
        planned.append(Planned(dest, model.name, entries))
    return planned, rows


def lock(request: LockRequest, say: Callable[[str], None]) -> list[dict[str, Any]]:
    """Resolve every lock of the run, then write them: a failure (or Ctrl-C) before the end leaves every
    lock as it was. Returns the rows ``lock --json`` prints."""
    planned, rows = plan_locks(request, say)
    if request.out_dir and planned:
        request.out_dir.mkdir(parents=True, exist_ok=True)
    for p in planned:
        write_lock(p.dest, p.recipe, dict(p.entries), replace=not request.gpu_arch)
    return rows


def print_locks(rows: list[dict[str, Any]]) -> None:
    tab = table(
        "recipe",
        "archs",
        "packages",
        "render hash",
        "rules",
        "lock file",
        keep=("recipe", "archs", "render hash", "lock file"),
    )
    for row in rows:
        rules = ", ".join(f"{n} {s}" for s, n in row["rules"].items() if n)
        tab.add_row(
            row["recipe"], row["gpu_archs"], str(row["packages"]), row["render_hash"][:16], rules, row["lock"]
        )
    print_table(tab)
