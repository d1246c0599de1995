"""Lock files: ``recipes/<name>.lock.json`` next to each recipe, one entry per GPU arch set.

An entry records what a build of that arch set is: the fully resolved pins (the same document the image
carries as /opt/rocmstack/lock.json), the base digest if the recipe gives one, the rule results, the render
hash, and the whole recipe as validated. ``render``/``build`` compare the recipe (without ``--set``
overrides, which are explicit per-run changes) against its entry and refuse on drift unless ``--relock``.

Drift is judged on the recipe fields only; a render hash that moved while the recipe did not (templates,
patches or rocmstack changed) is reported as a note, not an error. The lock holds no source revision of
rocmstack (a committed lock must be reproducible from any clean checkout); the image labels carry it.

A full lock (``rocmstack lock``, resolved by uv) adds per entry ``packages`` (every Python package of every
pip layer: name, version, hashes, layer) and ``git`` (component -> url, ref, commit); ``render``/``build``
then install exactly those (see rocmstack.resolver).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rocmstack.errors import InputError, RecipeError
from rocmstack.output import dumps
from rocmstack.recipe.load import load_recipe
from rocmstack.recipe.model import Recipe
from rocmstack.recipe.resolve import Resolved, resolve
from rocmstack.rules.engine import Result, Status, enforce

LOCK_FILE_SCHEMA = 1


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


def lock_path(source: Path) -> Path:
    return source.with_name(f"{source.stem}.lock.json")


def arch_key(archs: Iterable[str]) -> str:
    return ";".join(sorted(archs))


def default_arch_sets(recipe: Recipe) -> list[tuple[str, ...]]:
    """The recipe's default arch set, then each arch it supports on its own."""
    supported = sorted(set(recipe.gpu_archs) & set(recipe.base.torch_archs))
    sets = [tuple(sorted(recipe.default_gpu_archs))] + [(a,) for a in supported]
    return list(dict.fromkeys(sets))


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, Mapping) and node:
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: node}


def _recipe_fields(resolved: Resolved) -> dict[str, Any]:
    return resolved.recipe.model_dump(mode="json", by_alias=True)


def _render_hash(resolved: Resolved, ignored: tuple[str, ...], patches_dir: Path | None = None) -> str:
    """The render hash of this recipe with the shipped patches, as ``render`` computes it."""
    from rocmstack.patches import load_patches, select
    from rocmstack.render.context import render_hash

    recipe = resolved.recipe
    patches = select(recipe.patches, load_patches(patches_dir), dict(recipe.components), str(resolved.source))
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
    entry["base_digest"] = recipe.base.digest
    entry["pins"] = resolved.pins()
    entry["ignored_rules"] = sorted(ignored)
    # Reasons only where they say something (warn/fail/ignored): keeps the committed locks small.
    entry["rules"] = [
        {"id": r.id, "status": r.status, **({"reason": r.reason} if r.status != "pass" else {})}
        for r in results
    ]
    entry["recipe_fields"] = _recipe_fields(resolved)
    return entry


def read_lock(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: bad JSON or bad UTF-8
        raise RecipeError(
            f"{path}: unreadable lock file: {exc}", fix="delete it and run `rocmstack lock`"
        ) from None
    if (
        not isinstance(data, dict)
        or data.get("schema") != LOCK_FILE_SCHEMA
        or not isinstance(data.get("entries"), dict)
    ):
        raise RecipeError(
            f"{path}: not a rocmstack lock file (schema {LOCK_FILE_SCHEMA})",
            fix="run `rocmstack lock` to rewrite it",
        )
    return data


def write_lock(path: Path, recipe_name: str, entries: Mapping[str, Any], *, replace: bool = False) -> None:
    """Merge ``entries`` into the lock file (or replace all entries), atomically."""
    current = None if replace else read_lock(path)
    merged = dict(current["entries"]) if current else {}
    merged.update(entries)
    doc = {"schema": LOCK_FILE_SCHEMA, "recipe": recipe_name, "entries": dict(sorted(merged.items()))}
    text = dumps(doc)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a lock file is an ordinary committed file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def drift(entry: Mapping[str, Any], resolved: Resolved) -> list[str]:
    """Dotted recipe fields whose value differs between the lock entry and the recipe now."""
    locked = flatten(entry.get("recipe_fields", {}))
    now = flatten(_recipe_fields(resolved))
    return sorted(k for k in set(locked) | set(now) if locked.get(k, "<absent>") != now.get(k, "<absent>"))


def lock_resolved(
    resolved: Resolved,
    *,
    ignore: Iterable[str] = (),
    closure: Mapping[str, Any] | None = None,
    patches_dir: Path | None = None,
) -> dict[str, Any]:
    """Run the rules (RuleFailure if one fails: a failing set is never locked) and build its lock entry."""
    ignored = tuple(sorted(set(ignore)))
    results = enforce(resolved, ignored)
    return make_entry(resolved, results, ignored=ignored, closure=closure, patches_dir=patches_dir)


def recipe_arg(resolved: Resolved) -> str:
    """How a suggested command names this recipe: its name where the name finds this very file, else the
    path (a recipe given as a path is often on no search path, and ``rocmstack lock NAME`` would fail)."""
    import shlex

    from rocmstack.errors import RecipeError
    from rocmstack.recipe.load import find_recipe

    name = resolved.recipe.name
    try:
        if find_recipe(name).resolve() == resolved.source.resolve():
            return name
    except RecipeError:
        pass
    return shlex.quote(str(resolved.source))


def closure_of(entry: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The locked closure of an entry (None for an entry without resolved packages)."""
    if not entry or "packages" not in entry:
        return None
    out = {"packages": entry["packages"], "git": entry.get("git", {})}
    for key in ("unresolved", "requirements_unlocked"):
        if entry.get(key):
            out[key] = entry[key]
    if "rocmstack_requirements" in entry:  # absent: a lock from before rocmstack's own layer was locked
        out["rocmstack_requirements"] = entry["rocmstack_requirements"]
    return out


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
        previous = ((read_lock(path) or {}).get("entries") or {}).get(key)
        closure = None
        if closure_of(previous) is not None:
            from rocmstack.resolver.closure import closure as resolve_closure

            closure = resolve_closure(resolved, previous=previous).to_json()
        entry = lock_resolved(resolved, ignore=ignore, closure=closure, patches_dir=patches_dir)
        write_lock(path, name, {key: entry})
        return LockState(
            status="relocked", path=path, key=key, notes=(f"relocked {path.name} [{key}]",), entry=entry
        )
    data = read_lock(path)
    entry = (data or {}).get("entries", {}).get(key)
    if entry is None:
        return LockState(
            status="unlocked",
            path=path,
            key=key,
            notes=(
                f"{name} [{key}] has no lock entry in {path.name}: run `rocmstack lock {arg} --gpu-arch '{key}'`",
            ),
        )
    drifted = drift(entry, resolved)
    if drifted:
        shown = ", ".join(drifted[:8]) + (f" (+{len(drifted) - 8} more)" if len(drifted) > 8 else "")
        raise LockDrift(
            f"{name}: recipe drifted from {path.name} [{key}]: {shown}",
            fix=f"run `rocmstack lock {arg} --gpu-arch '{key}'` to accept the change, or pass --relock",
        )
    closure = closure_of(entry)
    if closure is not None:
        from rocmstack.resolver.closure import self_layer_drift
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
    state = verify(base, relock=relock, ignore=ignored if relock else (), patches_dir=patches_dir)
    closure = closure_of(state.entry)
    if closure is not None and not overrides:
        resolved = dataclasses.replace(resolved, locked=closure)
    results = enforce(resolved, ignored)
    notes = list(state.notes)
    if overrides:
        notes.append(f"--set on top of the lock: {', '.join(overrides)}")
        if closure is not None:
            notes.append("--set: Python packages install by pip's resolver at build time, not from the lock")
    if ignored:
        notes.append(f"rules ignored by --ignore-rule (recorded in the image labels): {', '.join(ignored)}")
    notes += [f"rule {r.id}: {r.reason}" for r in results if r.status == "warn"]
    return Gate(resolved=resolved, results=results, lock=state, ignored=ignored, notes=tuple(notes))


RESOLVER_SOURCE = "https://docs.astral.sh/uv/pip/compile/"


def resolver_result(
    resolved: Resolved, *, offline: bool = False, patches_dir: Path | None = None
) -> tuple[Result, str | None]:
    """The resolver as one check row (id ``resolver``) and, when it fails, uv's full explanation.

    Online: the pip layers are resolved (cached) starting from the lock entry (its commits and versions
    are preferred) and compared with it: unsatisfiable -> fail, a lock that no longer matches -> fail
    (drift). ``offline``: the lock entry only. NetworkError (exit 4) when the index is out of reach."""
    from rocmstack.resolver.closure import closure, package_drift
    from rocmstack.resolver.uv import ResolutionError

    data = read_lock(lock_path(resolved.source))
    entry = ((data or {}).get("entries") or {}).get(arch_key(resolved.gpu_archs))
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
    moved = package_drift(entry or {}, now)
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
