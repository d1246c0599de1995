"""The build pipeline up to a build context, the one path ``render``, ``build``, ``tags`` and ``matrix``
take: load -> resolve -> verify the lock (drift is exit 2 unless ``--relock``) -> enforce the rules (exit 1)
-> render.

The patch folder is read once, and the context (with its SBOM) is drafted once: the draft whose hash the
lock is compared against is the one that is rendered, whenever the two are the same inputs.

``render``/``build`` compare the recipe (without ``--set`` overrides, which are explicit per-run changes)
against its entry. The lock's format, validation and drift are rocmstack.lock's; this module decides what
they mean for a build and writes the entry a relock makes (rules results included).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rocmstack.errors import InputError
from rocmstack.lock.drift import drift, recipe_fields, self_layer_drift
from rocmstack.lock.file import arch_key, closure_of, entry_of, lock_path, read_lock, write_lock
from rocmstack.output import warn
from rocmstack.patches import Patch, chosen_patches_dir, load_patches, select
from rocmstack.recipe.load import load_recipe, parent_file
from rocmstack.recipe.resolve import Resolved, recipe_arg, resolve, unverified_warnings
from rocmstack.render.context import Draft, Rendered, draft, finish, source_revision
from rocmstack.resolver.closure import closure as resolve_closure
from rocmstack.resources import self_requirements
from rocmstack.rules.engine import Result, enforce


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
    patches_dir: Path | None = None  # the folder chosen (None: shipped)
    draft: Draft  # the context render writes, drafted once (its hash is the render hash)


# The render hash of (resolved, ignored rules): drafts the context, or returns one already drafted.
HashOf = Callable[[Resolved, tuple[str, ...]], str]


class Drafts:
    """The drafts of one pipeline run, so the lock check and the render share one: nothing outlives the run."""

    def __init__(self, available: dict[str, Patch]) -> None:
        self.available = available
        self.made: list[Draft] = []

    def get(self, resolved: Resolved, ignored: tuple[str, ...]) -> Draft:
        for made in self.made:
            if made.resolved == resolved and made.ignored_rules == ignored:
                return made
        recipe = resolved.recipe
        patches = select(recipe.patches, self.available, dict(recipe.components), str(resolved.source))
        made = draft(resolved, patches, ignored)
        self.made.append(made)
        return made

    def hash_of(self, resolved: Resolved, ignored: tuple[str, ...]) -> str:
        return self.get(resolved, ignored).render_hash


def render_hash_of(resolved: Resolved, ignored: tuple[str, ...], patches_dir: Path | None = None) -> str:
    """The render hash of this recipe, as ``render`` computes it, with the patches of ``patches_dir``."""
    folder = chosen_patches_dir(resolved.recipe, resolved.source, patches_dir)
    return Drafts(load_patches(folder)).hash_of(resolved, ignored)


def rehashed(resolved: Resolved, entry: Mapping[str, Any], patches_dir: Path | None = None) -> dict[str, Any]:
    """``entry`` with the render hash its locked inputs give now (templates, patches or rocmstack moved):
    nothing resolved again, no network. The same hash ``verify`` compares with."""
    locked = dataclasses.replace(resolved, locked=closure_of(entry))
    digest = render_hash_of(locked, tuple(entry.get("ignored_rules", ())), patches_dir)
    return {**entry, "render_hash": digest}


def make_entry(
    resolved: Resolved,
    results: list[Result],
    *,
    ignored: tuple[str, ...],
    closure: Mapping[str, Any] | None = None,
    patches_dir: Path | None = None,
    hash_of: HashOf | None = None,
) -> dict[str, Any]:
    recipe = resolved.recipe
    if closure is not None:
        resolved = dataclasses.replace(resolved, locked=dict(closure))
    digest = hash_of(resolved, ignored) if hash_of else render_hash_of(resolved, ignored, patches_dir)
    entry = resolved.lock(render_hash=digest, revision="")
    entry["rocmstack"] = {"version": entry["rocmstack"]["version"]}
    for key in ("unresolved", "requirements_unlocked"):
        if closure is not None and closure.get(key):
            entry[key] = list(closure[key])
    if closure is not None and closure.get("requirements_from"):
        entry["requirements_from"] = dict(closure["requirements_from"])
    entry["base_digest"] = recipe.base.digest
    entry["pins"] = resolved.pins()
    entry["ignored_rules"] = sorted(ignored)
    # Reasons only where they say something (warn/fail/skip): keeps the committed locks small.
    entry["rules"] = [
        {"id": r.id, "status": str(r.status), **({"reason": r.reason} if r.status != "pass" else {})}
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
    drafts: Drafts | None = None,
) -> dict[str, Any]:
    """Run the rules (RuleFailure if one fails: a failing set is never locked) and build its lock entry."""
    ignored = tuple(sorted(set(ignore)))
    if drafts is None:
        drafts = Drafts(load_patches(chosen_patches_dir(resolved.recipe, resolved.source, patches_dir)))
    results = enforce(resolved, ignored, patches=drafts.available)
    return make_entry(resolved, results, ignored=ignored, closure=closure, hash_of=drafts.hash_of)


def previous_entry(resolved: Resolved, lock: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The entry a new lock of this arch set starts from: the recipe's own (``lock``), else, for a child
    without one, its parent's (the same arch set, else the parent's widest), so that a child moves only
    what it changes. Returns (entry, a note naming the parent's lock when that is where it came from)."""
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
    drafts: Drafts | None = None,
) -> LockState:
    """Compare a recipe (resolved without overrides) against its lock entry; LockDrift on drift unless relock."""
    if drafts is None:
        drafts = Drafts(load_patches(chosen_patches_dir(resolved.recipe, resolved.source, patches_dir)))
    path = lock_path(resolved.source)
    key = arch_key(resolved.gpu_archs)
    name = resolved.recipe.name
    arg = recipe_arg(resolved)
    if relock:
        previous, _ = previous_entry(resolved, path)
        closure = None
        if closure_of(previous) is not None:
            closure = resolve_closure(resolved, previous=previous).to_json()
        entry = lock_resolved(resolved, ignore=ignore, closure=closure, drafts=drafts)
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
        # A stale rocmstack layer is refused, never left to pip's resolver at build time.
        stale = self_layer_drift(entry, self_requirements())
        if stale:
            raise LockDrift(
                f"{name}: {path.name} [{key}] is out of date: {stale}",
                fix=f"run `rocmstack lock {arg} --gpu-arch '{key}'`, or pass --relock",
            )
    notes = []
    locked = dataclasses.replace(resolved, locked=closure)
    if drafts.hash_of(locked, tuple(entry.get("ignored_rules", ()))) != entry.get("render_hash"):
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
    # The lock is compared, the rules judged and the render made with the patches of one folder, read once.
    patches_dir = chosen_patches_dir(model, path, patches_dir)
    drafts = Drafts(load_patches(patches_dir))
    state = verify(base, relock=relock, ignore=ignored if relock else (), drafts=drafts)
    closure = closure_of(state.entry)
    if closure is not None and not overrides:
        resolved = dataclasses.replace(resolved, locked=closure)
    results = enforce(resolved, ignored, patches=drafts.available)
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
        draft=drafts.get(resolved, ignored),
    )


def prepare(
    recipe: str,
    gpu_arch: str | None,
    overrides: Iterable[str] = (),
    *,
    ignore: Iterable[str] = (),
    relock: bool = False,
    patches_dir: Path | None = None,
) -> tuple[Gate, Rendered, tuple[str, str], list[str]]:
    """The whole pipeline: the gate (lock drift exit 2, then the rules exit 1), its warnings printed, then
    the render of the gate's draft. Returns (gate, rendered, source revision, warnings)."""
    checked = gate(recipe, gpu_arch, overrides, ignore=ignore, relock=relock, patches_dir=patches_dir)
    notes = [*unverified_warnings(checked.resolved.recipe), *checked.notes]
    for note in notes:
        warn(note)
    revision = source_revision()
    return checked, finish(checked.draft, revision), revision, notes
