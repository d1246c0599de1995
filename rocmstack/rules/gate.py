"""The gate every render/build runs first: the recipe against its lock entry (drift is exit 2 unless
``--relock``), then the rules (exit 1); and ``check``'s resolver row.

``render``/``build`` compare the recipe (without ``--set`` overrides, which are explicit per-run changes)
against its entry. The lock's format, validation and drift are rocmstack.lock's; this module decides what
they mean for a build and writes the entry a relock makes (rules results included).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rocmstack.errors import InputError
from rocmstack.lock.drift import drift, package_drift, recipe_fields, self_layer_drift
from rocmstack.lock.file import arch_key, closure_of, entry_of, lock_path, write_lock
from rocmstack.patches import chosen_patches_dir, load_patches
from rocmstack.recipe.load import load_recipe
from rocmstack.recipe.resolve import Resolved, resolve
from rocmstack.rules.engine import Result, Status, enforce


class LockDrift(InputError):
    """The recipe no longer matches its lock file (exit 2)."""


@dataclass(frozen=True, kw_only=True)
class LockState:
    status: Literal["locked", "relocked", "unlocked"]
    path: Path
    key: str
    notes: tuple[str, ...] = ()
    entry: Mapping[str, Any] | None = None  # the lock entry compared (written, when relocked)


@dataclass(frozen=True, kw_only=True)
class Gate:
    """What render/build may go on with: the resolved pins (with overrides), rule results and lock state."""

    resolved: Resolved
    results: list[Result]
    lock: LockState
    ignored: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    patches_dir: Path | None = None  # the folder chosen (None: shipped), for the render that follows


def _render_hash(resolved: Resolved, ignored: tuple[str, ...], patches_dir: Path | None = None) -> str:
    """The render hash of this recipe, as ``render`` computes it, with the patches of ``patches_dir``."""
    from rocmstack.patches import select
    from rocmstack.render.context import render_hash

    recipe = resolved.recipe
    folder = chosen_patches_dir(recipe, resolved.source, patches_dir)
    patches = select(recipe.patches, load_patches(folder), dict(recipe.components), str(resolved.source))
    return render_hash(resolved, patches, ignored)


def make_entry(
    resolved: Resolved,
    results: list[Result],
    *,
    ignored: tuple[str, ...],
    closure: Mapping[str, Any] | None = None,
    patches_dir: Path | None = None,
) -> dict[str, Any]:
    recipe = resolved.recipe
    if closure is not None:
        resolved = dataclasses.replace(resolved, locked=dict(closure))
    entry = resolved.lock(render_hash=_render_hash(resolved, ignored, patches_dir), revision="")
    entry["rocmstack"] = {"version": entry["rocmstack"]["version"]}
    for key in ("unresolved", "requirements_unlocked"):
        if closure is not None and closure.get(key):
            entry[key] = list(closure[key])
    if closure is not None and closure.get("requirements_from"):
        entry["requirements_from"] = dict(closure["requirements_from"])
    entry["base_digest"] = recipe.base.digest
    entry["pins"] = resolved.pins()
    entry["ignored_rules"] = sorted(ignored)
    # Reasons only where they say something (warn/fail/ignored): keeps the committed locks small.
    entry["rules"] = [
        {"id": r.id, "status": r.status, **({"reason": r.reason} if r.status != "pass" else {})}
        for r in results
    ]
    entry["recipe_fields"] = recipe_fields(resolved)
    return entry


def lock_resolved(
    resolved: Resolved,
    *,
    ignore: Iterable[str] = (),
    closure: Mapping[str, Any] | None = None,
    patches_dir: Path | None = None,
) -> dict[str, Any]:
    """Run the rules (RuleFailure if one fails: a failing set is never locked) and build its lock entry."""
    ignored = tuple(sorted(set(ignore)))
    patches_dir = chosen_patches_dir(resolved.recipe, resolved.source, patches_dir)
    results = enforce(resolved, ignored, patches=load_patches(patches_dir))
    return make_entry(resolved, results, ignored=ignored, closure=closure, patches_dir=patches_dir)


def recipe_arg(resolved: Resolved) -> str:
    """How a suggested command names this recipe so that it runs as printed, from the current folder: its
    name where the shipped search path finds this very file; its name and ``--recipes-dir DIR`` where only
    a folder of the search path (``--recipes-dir``, $ROCMSTACK_RECIPES_PATH) does; else its path (a recipe
    given as a path is often on no search path, and ``rocmstack lock NAME`` would fail). rocmstack takes
    ``--recipes-dir`` after the command too, so the result goes where a recipe argument goes."""
    return recipe_arg_for(resolved.recipe.name, resolved.source)


def _shown_path(path: Path) -> str:
    import shlex

    try:
        shown = str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        shown = str(path.resolve())
    return shlex.quote(shown)


def recipe_arg_for(name: str, source: Path) -> str:
    import shlex

    from rocmstack.errors import RecipeError
    from rocmstack.recipe.load import find_recipe, recipes_on_path
    from rocmstack.resources import recipes_dir

    target = source.resolve()
    if target.parent == recipes_dir().resolve() and recipes_on_path().get(name, source).resolve() == target:
        return name  # a shipped recipe that no folder of the search path shadows
    try:
        found = find_recipe(name).resolve() == target
    except RecipeError:
        found = False
    if found:
        return f"{name} --recipes-dir {_shown_path(target.parent)}"
    return shlex.quote(str(source))  # as it was given: from where it was given


def previous_entry(resolved: Resolved, lock: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The entry a new lock of this arch set starts from: the recipe's own (``lock``), else, for a child
    without one, its parent's (the same arch set, else the parent's widest), so that a child moves only
    what it changes. Returns (entry, a note naming the parent's lock when that is where it came from)."""
    from rocmstack.lock.file import read_lock
    from rocmstack.recipe.load import parent_file

    key = arch_key(resolved.gpu_archs)
    own = entry_of(lock, key)
    if own is not None:
        return own, None
    parent = parent_file(resolved.source)
    while parent is not None:
        entries = (read_lock(lock_path(parent)) or {}).get("entries") or {}
        full = {k: e for k, e in entries.items() if closure_of(e) is not None}
        if full:
            picked = key if key in full else max(full, key=lambda k: (k.count(";"), k))
            return dict(full[picked]), f"started from {lock_path(parent).name} [{picked}]"
        parent = parent_file(parent)  # a parent without a lock: its own parent's
    return None, None


def verify(
    resolved: Resolved,
    *,
    relock: bool = False,
    ignore: Iterable[str] = (),
    patches_dir: Path | None = None,
) -> LockState:
    """Compare a recipe (resolved without overrides) against its lock entry; LockDrift on drift unless relock."""
    path = lock_path(resolved.source)
    key = arch_key(resolved.gpu_archs)
    name = resolved.recipe.name
    arg = recipe_arg(resolved)
    if relock:
        previous, _ = previous_entry(resolved, path)
        closure = None
        if closure_of(previous) is not None:
            from rocmstack.resolver.closure import closure as resolve_closure

            closure = resolve_closure(resolved, previous=previous).to_json()
        entry = lock_resolved(resolved, ignore=ignore, closure=closure, patches_dir=patches_dir)
        write_lock(path, name, {key: entry})
        return LockState(
            status="relocked", path=path, key=key, notes=(f"relocked {path.name} [{key}]",), entry=entry
        )
    found = entry_of(path, key)
    if found is None:
        return LockState(
            status="unlocked",
            path=path,
            key=key,
            notes=(
                f"{name} [{key}] has no lock entry in {path.name}: run `rocmstack lock {arg} --gpu-arch '{key}'`",
            ),
        )
    entry = found
    drifted = drift(entry, resolved)
    if drifted:
        shown = ", ".join(drifted[:8]) + (f" (+{len(drifted) - 8} more)" if len(drifted) > 8 else "")
        raise LockDrift(
            f"{name}: recipe drifted from {path.name} [{key}]: {shown}",
            fix=f"run `rocmstack lock {arg} --gpu-arch '{key}'` to accept the change, or pass --relock",
        )
    closure = closure_of(entry)
    if closure is not None:
        from rocmstack.resources import self_requirements

        # A stale rocmstack layer is refused, never left to pip's resolver at build time.
        stale = self_layer_drift(entry, self_requirements())
        if stale:
            raise LockDrift(
                f"{name}: {path.name} [{key}] is out of date: {stale}",
                fix=f"run `rocmstack lock {arg} --gpu-arch '{key}'`, or pass --relock",
            )
    notes = []
    locked = dataclasses.replace(resolved, locked=closure)
    if _render_hash(locked, tuple(entry.get("ignored_rules", ())), patches_dir) != entry.get("render_hash"):
        notes.append(
            f"render hash moved since {path.name} [{key}] (templates, patches or rocmstack changed); "
            f"`rocmstack lock {arg}` refreshes it"
        )
    return LockState(status="locked", path=path, key=key, notes=tuple(notes), entry=entry)


def gate(
    recipe: str,
    gpu_arch: str | None,
    overrides: Iterable[str] = (),
    *,
    ignore: Iterable[str] = (),
    relock: bool = False,
    patches_dir: Path | None = None,
) -> Gate:
    """The check every render/build runs first: lock drift (exit 2), then the rules (exit 1).

    The lock is compared with the recipe as written; ``--set`` overrides apply on top and are reported."""
    overrides = tuple(overrides)
    ignored = tuple(sorted(set(ignore)))
    model, path = load_recipe(recipe, overrides)
    resolved = resolve(model, path, gpu_arch, overrides)
    base = resolved
    if overrides:
        plain, _ = load_recipe(recipe)
        base = resolve(plain, path, gpu_arch)
    # The lock is compared, the rules judged and the render made with the patches of one folder.
    patches_dir = chosen_patches_dir(model, path, patches_dir)
    state = verify(base, relock=relock, ignore=ignored if relock else (), patches_dir=patches_dir)
    closure = closure_of(state.entry)
    if closure is not None and not overrides:
        resolved = dataclasses.replace(resolved, locked=closure)
    results = enforce(resolved, ignored, patches=load_patches(patches_dir))
    notes = list(state.notes)
    if overrides:
        notes.append(f"--set on top of the lock: {', '.join(overrides)}")
        if closure is not None:
            notes.append("--set: Python packages install by pip's resolver at build time, not from the lock")
    if ignored:
        notes.append(f"rules ignored by --ignore-rule (recorded in the image labels): {', '.join(ignored)}")
    notes += [f"rule {r.id}: {r.reason}" for r in results if r.status == "warn"]
    return Gate(
        resolved=resolved,
        results=results,
        lock=state,
        ignored=ignored,
        notes=tuple(notes),
        patches_dir=patches_dir,
    )


RESOLVER_SOURCE = "https://docs.astral.sh/uv/pip/compile/"


def resolver_result(
    resolved: Resolved, *, offline: bool = False, patches_dir: Path | None = None
) -> tuple[Result, str | None]:
    """The resolver as one check row (id ``resolver``) and, when it fails, uv's full explanation.

    Online: the pip layers are resolved (cached) starting from the lock entry (its commits and versions
    are preferred) and compared with it: unsatisfiable -> fail, a lock that no longer matches -> fail
    (drift). ``offline``: the lock entry only. NetworkError (exit 4) when the index is out of reach."""
    from rocmstack.resolver.closure import closure
    from rocmstack.resolver.uv import ResolutionError

    entry = entry_of(lock_path(resolved.source), arch_key(resolved.gpu_archs))
    full = closure_of(entry) is not None and not resolved.overrides

    def row(status: Status, reason: str, fix: str = "") -> Result:
        return Result(id="resolver", status=status, reason=reason, fix=fix, source=RESOLVER_SOURCE)

    def unlocked(notes: Iterable[str]) -> str:
        return "not locked (built from the ref): " + ", ".join(sorted({u.split(":", 1)[0] for u in notes}))

    relock = f"rocmstack lock {recipe_arg(resolved)} --gpu-arch '{resolved.arch_list}'"
    reachable = f"run `{relock}` where their git remotes are reachable"
    if offline:
        if not full:
            return row("warn", "offline: no full lock entry to check against", f"run `{relock}`"), None
        count = len(entry["packages"]) if entry else 0
        if entry and entry.get("unresolved"):  # the lock says so itself: no need to ask a remote
            return row(
                "warn", f"offline: {count} locked packages; {unlocked(entry['unresolved'])}", reachable
            ), None
        return row("pass", f"offline: {count} locked packages (not re-resolved)"), None
    try:
        now = closure(resolved, previous=entry if full else None, as_locked=True)
    except ResolutionError as exc:
        return row(
            "fail", exc.message, "change the pins, or declare the conflict under accepted_conflicts"
        ), exc.detail
    if not full:
        why = "--set overrides: not compared with the lock" if resolved.overrides else "no full lock entry"
        return row("warn", f"{len(now.packages)} packages resolve ({why})", f"run `{relock}`"), None
    moved = package_drift(entry or {}, now.to_json())
    if moved:
        shown = ", ".join(moved[:6]) + (f" (+{len(moved) - 6} more)" if len(moved) > 6 else "")
        return row("fail", f"lock out of date: {shown}", f"run `{relock}` to accept it"), None
    if now.unresolved:
        return row(
            "warn",
            f"{len(now.packages)} packages resolve exactly as locked; {unlocked(now.unresolved)}",
            reachable,
        ), None
    return row("pass", f"{len(now.packages)} packages resolve exactly as locked"), None
