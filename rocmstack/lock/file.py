"""The lock file's format: ``recipes/<name>.lock.json`` next to each recipe, one entry per GPU arch set.

An entry records what a build of that arch set is: the fully resolved pins (the same document the image
carries as /opt/rocmstack/lock.json), the base digest if the recipe gives one, the rule results, the render
hash, and the whole recipe as validated. A full lock (``rocmstack lock``, resolved by uv) adds per entry
``packages`` (every Python package of every pip layer: name, version, hashes, layer) and ``git`` (component
-> url, ref, commit); ``render``/``build`` then install exactly those.

``read_lock`` is the only reader: every entry is validated (rocmstack.lock.schema) before anyone sees it.
The lock holds no source revision of rocmstack (a committed lock must be reproducible from any clean
checkout); the image labels carry it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rocmstack.errors import RecipeError
from rocmstack.lock.schema import LOCK_FILE_SCHEMA, check_document, check_entry
from rocmstack.output import dumps
from rocmstack.recipe.model import Recipe

__all__ = [
    "LOCK_FILE_SCHEMA",
    "arch_key",
    "closure_of",
    "default_arch_sets",
    "entry_of",
    "lock_path",
    "read_lock",
    "write_lock",
]


def lock_path(source: Path) -> Path:
    return source.with_name(f"{source.stem}.lock.json")


def arch_key(archs: Iterable[str]) -> str:
    return ";".join(sorted(archs))


def default_arch_sets(recipe: Recipe) -> list[tuple[str, ...]]:
    """The recipe's default arch set, then each arch it supports on its own."""
    supported = sorted(set(recipe.gpu_archs) & set(recipe.base.torch_archs))
    sets = [tuple(sorted(recipe.default_gpu_archs))] + [(a,) for a in supported]
    return list(dict.fromkeys(sets))


def read_lock(path: Path) -> dict[str, Any] | None:
    """The lock file at ``path``, every entry validated (None if there is none); RecipeError (exit 2) if
    it is unreadable, not a lock file, or holds a value rocmstack does not accept."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: bad JSON or bad UTF-8
        raise RecipeError(
            f"{path}: unreadable lock file: {exc}", fix="delete it and run `rocmstack lock`"
        ) from None
    return check_document(data, path)


def entry_of(path: Path, key: str) -> dict[str, Any] | None:
    """The validated entry for arch set ``key`` of the lock at ``path`` (None: no lock, or no such entry)."""
    entry = ((read_lock(path) or {}).get("entries") or {}).get(key)
    return dict(entry) if entry is not None else None


def write_lock(path: Path, recipe_name: str, entries: Mapping[str, Any], *, replace: bool = False) -> None:
    """Merge ``entries`` into the lock file (or replace all entries), atomically; an entry that would not
    read back is refused before anything is written."""
    current = None if replace else read_lock(path)
    merged = dict(current["entries"]) if current else {}
    merged.update(entries)
    for key, entry in entries.items():
        check_entry(json.loads(dumps(entry)), path, key)
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


def closure_of(entry: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The locked closure of an entry (None for an entry without resolved packages)."""
    if not entry or "packages" not in entry:
        return None
    out = {"packages": entry["packages"], "git": entry.get("git", {})}
    for key in ("unresolved", "requirements_unlocked", "requirements_from"):
        if entry.get(key):
            out[key] = entry[key]
    if "rocmstack_requirements" in entry:  # absent: a lock from before rocmstack's own layer was locked
        out["rocmstack_requirements"] = entry["rocmstack_requirements"]
    return out


def left_unlocked(previous: Mapping[str, Any] | None, recipe: Recipe) -> tuple[str, ...]:
    """The git components the entry a lock starts from (its own, or a child's parent's) already left
    unlocked (commit null: its remote was out of reach, `--allow-unreachable-git`) at the recipe's very url
    and ref. A new lock may leave these unlocked again without the flag when the remote is still out of
    reach: the decision is the lock's, recorded and listed, as a commit it already pins is kept."""
    git = (previous or {}).get("git") or {}
    out = []
    for name, comp in sorted(recipe.components.items()):
        old = git.get(name) or {}
        unlocked = comp.source == "git" and name in git and old.get("commit") is None
        if unlocked and old.get("url") == comp.url and old.get("ref") == comp.ref:
            out.append(name)
    return tuple(out)
