"""Matching advisories against what is known: an inventory (component versions, GPU archs, environment) of
a recipe before its build or of a node, and the text of a failure.

A match needs every fact the advisory names to be known and to hold: an unknown version, arch or variable
never makes a match (a false alarm costs as much as a miss), and is said as such by ``unknown_facts``."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from rocmstack.advisories.model import Advisory

UNSET = "<unset>"


@dataclass(frozen=True)
class Inventory:
    where: str  # "recipe verl-0.9.0-rocm10 [gfx942]", "this node"
    versions: Mapping[str, str] = field(default_factory=dict)  # component -> version
    archs: frozenset[str] = frozenset()
    env: Mapping[str, str] | None = None  # None: the environment is not known (a recipe sets only its own)


@dataclass(frozen=True)
class Match:
    advisory: Advisory
    why: str  # "rocm 7.2.1 in >=7.2.0,<7.3; gfx942"


def _versions(text: str) -> tuple[Version, ...]:
    """A version as advisories compare it: itself (its local build tag dropped: 2.9.0+rocm7.0 is 2.9.0) and,
    for a pre-release, dev or post build, the release it is of (0.27.0rc1 carries 0.27.0's bugs)."""
    m = re.match(r"\s*v?(\d+(?:\.\d+)*(?:(?:a|b|rc|\.?post|\.?dev)\d*)*)", text)
    try:
        public = Version(m.group(1)) if m else None
    except InvalidVersion:
        return ()
    return () if public is None else tuple(dict.fromkeys((public, Version(public.base_version))))


def _holds(advisory: Advisory, inv: Inventory) -> tuple[bool, list[str]]:
    why: list[str] = []
    for affected in advisory.affects:
        given = inv.versions.get(affected.component)
        spec = SpecifierSet(affected.versions)
        if not given or not any(spec.contains(v, prereleases=True) for v in _versions(given)):
            return False, []
        why.append(f"{affected.component} {given} in {affected.versions}")
    if advisory.arch:
        hit = sorted(set(advisory.arch) & inv.archs)
        if not hit:
            return False, []
        why.append(", ".join(hit))
    if advisory.env:
        if inv.env is None:
            return False, []
        for name, pattern in advisory.env.items():
            value = inv.env.get(name, UNSET)
            if not re.fullmatch(pattern, value):
                return False, []
            why.append(f"{name}={value}")
    return True, why


def match(advisories: Iterable[Advisory], inv: Inventory) -> list[Match]:
    """The advisories whose versions (arch, env) this inventory has, but those marked to match by their
    failure's words only (``versions_alone: none``)."""
    out = []
    for advisory in advisories:
        if advisory.versions_alone == "none":
            continue
        ok, why = _holds(advisory, inv)
        if ok:
            out.append(Match(advisory, "; ".join(why)))
    return out


def match_text(advisories: Iterable[Advisory], text: str) -> list[tuple[Advisory, str]]:
    """Advisories whose signatures match ``text``, each with the line it matched (first match); a progress
    bar's redraw (``\r``) counts as a line of its own."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    found = []
    for advisory in advisories:
        for pattern in advisory.signatures:
            hit = re.search(pattern, text, flags=re.M)
            if hit:
                start = text.rfind("\n", 0, hit.start()) + 1
                end = text.find("\n", hit.end())
                found.append((advisory, text[start : end if end >= 0 else len(text)].strip()[:300]))
                break
    return found


def recipe_inventory(
    where: str, base: Mapping[str, str], components: Mapping[str, str], archs: Iterable[str]
) -> Inventory:
    """A recipe's pins as an inventory: the base's rocm, torch and python, each component's version by its
    distribution name."""
    versions = {k: v for k, v in base.items() if v}
    versions.update({name: v for name, v in components.items() if v})
    return Inventory(where, versions, frozenset(archs), None)


def known_causes(text: str, extra_dirs: Iterable[Path] = ()) -> list[dict[str, str]]:
    """What a failure's text names, as a report carries it: each advisory whose signature matches, with its
    fix, source and the line it matched (empty when none does)."""
    from rocmstack.advisories.load import load_all

    return [
        {"id": a.id, "title": a.title, "fix": a.fix, "source": a.source, "matched": line}
        for a, line in match_text(load_all(extra_dirs), text)
    ]
