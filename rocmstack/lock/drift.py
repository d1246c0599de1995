"""How a lock entry differs: from the recipe as written now (its fields), from rocmstack's own requirements
now, and from a closure resolved now (packages and commits).

Recipe drift is judged on the recipe fields only; a render hash that moved while the recipe did not
(templates, patches or rocmstack changed) is the gate's note, not drift.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rocmstack.recipe.resolve import Resolved


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, Mapping) and node:
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: node}


def recipe_fields(resolved: Resolved) -> dict[str, Any]:
    return resolved.recipe.model_dump(mode="json", by_alias=True)


def drift(entry: Mapping[str, Any], resolved: Resolved) -> list[str]:
    """Dotted recipe fields whose value differs between the lock entry and the recipe now."""
    locked = flatten(entry.get("recipe_fields", {}))
    now = flatten(recipe_fields(resolved))
    return sorted(
        k
        for k in set(locked) | set(now)
        if locked.get(k) != now.get(k) and not (is_empty(locked.get(k)) and is_empty(now.get(k)))
    )


def is_empty(value: Any) -> bool:
    """A field left empty (null, [], {}) is the same recipe as one without it: a lock written before an
    optional field existed (requirements_from, models, prebuild_aiter) has not drifted, and diff shows no row."""
    return value is None or value == [] or value == {}


def self_layer_drift(entry: Mapping[str, Any], now: Iterable[str]) -> str | None:
    """How a full lock entry's rocmstack layer differs from rocmstack's requirements NOW (None: it fits)."""
    if "rocmstack_requirements" not in entry:
        return "rocmstack's own layer is not locked (a lock from before it was)"
    old, new = set(entry["rocmstack_requirements"] or ()), set(now)
    if old == new:
        return None
    moved = [f"-{r}" for r in sorted(old - new)] + [f"+{r}" for r in sorted(new - old)]
    return f"rocmstack's own requirements changed ({', '.join(moved)})"


def package_drift(entry: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """How the lock entry's packages and commits differ from a closure resolved now (its JSON; empty: none)."""
    locked = {p["name"]: p for p in entry.get("packages") or ()}
    fresh = {p["name"]: p for p in now.get("packages") or ()}
    out = [f"+{n}=={fresh[n]['version']}" for n in sorted(set(fresh) - set(locked))]
    out += [f"-{n}=={locked[n]['version']}" for n in sorted(set(locked) - set(fresh))]
    for n in sorted(set(locked) & set(fresh)):
        old, new = locked[n], fresh[n]
        if old["version"] != new["version"]:
            out.append(f"{n} {old['version']}->{new['version']}")
        elif old.get("layer") != new["layer"]:
            out.append(f"{n} layer {old.get('layer')}->{new['layer']}")
        elif sorted(old.get("hashes") or ()) != sorted(new["hashes"]):
            out.append(f"{n} hashes changed")
    old_git = entry.get("git") or {}
    for n, g in sorted((now.get("git") or {}).items()):
        if (old_git.get(n) or {}).get("commit") != g.get("commit"):
            out.append(f"{n} commit {(old_git.get(n) or {}).get('commit')}->{g.get('commit')}")
    own = self_layer_drift(entry, now.get("rocmstack_requirements") or ())
    return [own, *out] if own else out  # first: it explains the packages it adds
