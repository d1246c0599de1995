"""A recipe's full closure: every git component at a commit and every Python package of every pip layer.

The pip layers are the recipe's layers in build order and, last, rocmstack's own runtime requirements
(``SELF_LAYER``: every image carries rocmstack). All are resolved together, so rocmstack's layer installs
only what no earlier layer does and moves no version an earlier layer installed. The closure records the
requirements its rocmstack layer was resolved for: a lock without them (or with others) is stale.

``closure(resolved, previous=...)`` keeps what the previous lock entry says wherever it still fits (git
commits of unchanged refs, package versions uv can keep) and moves only what ``refresh`` names, so a
floating ref or range never moves silently. How a lock entry differs from a closure is rocmstack.lock.drift's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.utils import canonicalize_name

from rocmstack.errors import NetworkError
from rocmstack.recipe.model import LAYER_ORDER, SELF_LAYER, Component
from rocmstack.recipe.resolve import Resolved
from rocmstack.resolver import git, release, uv
from rocmstack.resources import self_requirements


@dataclass(frozen=True, kw_only=True)
class Closure:
    packages: tuple[uv.LockedPackage, ...]
    git: dict[str, dict[str, str | None]]  # component -> {url, ref, commit}
    # What could not be locked (only with allow_unreachable): "component: why"; built from its ref as before.
    unresolved: tuple[str, ...] = ()
    requirements_unlocked: tuple[
        str, ...
    ] = ()  # git components whose requirements file pip resolves at build
    rocmstack_requirements: tuple[str, ...] = ()  # what the SELF_LAYER was resolved for
    # component -> the published release whose requirements stood in for its own (recipe's requirements_from)
    requirements_from: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "packages": [p.to_json() for p in self.packages],
            "git": self.git,
            "rocmstack_requirements": list(self.rocmstack_requirements),
        }
        if self.unresolved:
            doc["unresolved"] = list(self.unresolved)
        if self.requirements_unlocked:
            doc["requirements_unlocked"] = list(self.requirements_unlocked)
        if self.requirements_from:
            doc["requirements_from"] = dict(sorted(self.requirements_from.items()))
        return doc


def pip_spec(name: str, comp: Component) -> str:
    extras = f"[{','.join(comp.extras)}]" if comp.extras else ""
    version = comp.version or ""
    if version and version[0].isdigit():
        version = f"=={version}"
    return f"{comp.package or name}{extras}{version}"


def git_commits(
    resolved: Resolved,
    previous: Mapping[str, Any] | None = None,
    refresh: Iterable[str] | bool = (),
    *,
    unresolved: list[str] | None = None,
    retry_unresolved: bool = True,
) -> dict[str, dict[str, str | None]]:
    """component -> {url, ref, commit}; a ref already locked keeps its commit unless refreshed.

    With ``unresolved`` (a list to fill), an unreachable remote gives commit None and a note instead of
    NetworkError."""
    locked = (previous or {}).get("git") or {}
    refresh_all = refresh is True
    names = set() if refresh is True or refresh is False else set(refresh)
    out: dict[str, dict[str, str | None]] = {}
    for name, comp in sorted(resolved.recipe.components.items()):
        if comp.source != "git" or not comp.url or not comp.ref:
            continue
        old = locked.get(name) or {}
        same = old.get("url") == comp.url and old.get("ref") == comp.ref and old.get("commit")
        commit: str | None
        moved = refresh_all or name in names
        if same and not moved:
            commit = old["commit"]
        elif not retry_unresolved and not moved and name in locked and old.get("commit") is None:
            commit = None  # unlocked in the lock too: check compares against it as it is
            if unresolved is not None:
                unresolved.append(f"{name}: not locked in the lock file")
        else:
            try:
                commit = git.ls_remote(comp.url, comp.ref)
            except NetworkError as exc:
                if unresolved is None:
                    raise
                commit = None
                unresolved.append(f"{name}: {exc.message}")
        out[name] = {"url": comp.url, "ref": comp.ref, "commit": commit}
    return out


def inputs(
    resolved: Resolved,
    commits: Mapping[str, Mapping[str, str | None]],
    *,
    previous: Mapping[str, Any] | None = None,
    upgrade: tuple[str, ...] | bool = (),
    bumped: Mapping[str, str] | None = None,
    unresolved: list[str] | None = None,
    as_locked: bool = False,
) -> uv.Inputs:
    """The resolver's inputs for this recipe; ``bumped`` replaces pins (``outdated``'s what-if)."""
    recipe = resolved.recipe
    bumped = bumped or {}
    layers = []
    no_emit = {canonicalize_name(n) for n in recipe.base.frozen}
    for layer in LAYER_ORDER:
        lines: list[str] = []
        for name, comp in resolved.components_in(layer.value):
            if comp.source == "pypi":
                if name in bumped:
                    comp = comp.model_copy(update={"version": bumped[name]})
                lines.append(pip_spec(name, comp))
            elif comp.source == "git":
                no_emit.add(canonicalize_name(comp.package or name))
                # Requirements the recipe lists itself: resolved (and installed) with the layer, like a file's.
                lines += comp.requires
                if comp.requirements_from:
                    # The published release's own metadata, read by uv from the index: its requirements are
                    # resolved (and installed) with the layer; the release itself is never emitted, the
                    # component is installed from git. No commit is needed for it.
                    lines.append(comp.requirements_from)
                    no_emit.add(canonicalize_name(comp.requirements_from.partition("==")[0]))
                    continue
                commit = commits.get(name, {}).get("commit")
                # check (as_locked) takes an unpinned requirements file as the lock left it; lock retries it.
                unpinned = name in ((previous or {}).get("requirements_unlocked") or ())
                if not (comp.requirements and comp.url and commit):
                    continue  # an unknown commit is noted by closure()
                if as_locked and unpinned:
                    if unresolved is not None:
                        unresolved.append(f"{name}: {comp.requirements} not locked (as in the lock file)")
                else:
                    try:
                        lines += git.requirement_lines(comp.url, commit, comp.requirements, component=name)
                    except NetworkError as exc:
                        if unresolved is None:
                            raise
                        unresolved.append(f"{name}: {comp.requirements} not locked ({exc.message})")
            else:
                no_emit.add(canonicalize_name(comp.package or name))
        layers.append((layer.value, tuple(lines)))
    layers.append((SELF_LAYER, tuple(self_requirements())))
    overrides = []
    for conflict in recipe.accepted_conflicts:
        target = recipe.components.get(conflict.requires)
        spec = (
            pip_spec(conflict.requires, target) if target and target.source == "pypi" else conflict.requires
        )
        overrides.append(spec)
    preferences = tuple(
        f"{p['name']}=={p['version']}" for p in (previous or {}).get("packages") or () if p.get("version")
    )
    provided = uv.provided_dists(recipe.base.provides, recipe.base.torch)
    return uv.Inputs(
        layers=tuple((name, lines) for name, lines in layers if lines),
        provided=provided,
        no_emit=tuple(sorted(no_emit - {canonicalize_name(p.name) for p in provided})),
        overrides=tuple(sorted(overrides)),
        python=recipe.base.python,
        platform=f"x86_64-manylinux_{recipe.base.glibc.replace('.', '_')}",
        preferences=preferences,
        upgrade=upgrade,
    )


def _check_base_releases(resolved: Resolved, provided: Iterable[uv.ProvidedDist]) -> None:
    """A base component's stand-in release (``requirements_from``) against the versions the recipe declares
    for the image's other packages (uv never sees a base's packages' requirements): ResolutionError on the
    first one outside a range the release requires."""

    recipe = resolved.recipe
    standins = {
        n: c for n, c in sorted(recipe.components.items()) if c.source == "base" and c.requirements_from
    }
    if not standins:
        return
    declared: dict[str, str] = {canonicalize_name(p.name): uv.public_version(p.version) for p in provided}
    for name, comp in recipe.components.items():
        version = comp.version or ""
        exact = version.removeprefix("==")
        if exact[:1].isdigit() and not any(op in exact for op in "<>=!~*,"):
            declared.setdefault(canonicalize_name(comp.package or name), exact)
    found = []
    for comp in standins.values():
        assert comp.requirements_from is not None
        own = canonicalize_name(comp.requirements_from.partition("==")[0])
        requires = release.release_requires(comp.requirements_from)
        # The release's own version is its pin; a conflict the recipe accepts for it is not one.
        accepted = {
            canonicalize_name(c.requires)
            for c in recipe.accepted_conflicts
            if canonicalize_name(c.package) == own
        }
        others = {k: v for k, v in declared.items() if k != own and k not in accepted}
        found += release.conflicts(comp.requirements_from, requires, others, python=recipe.base.python)
    if found:
        raise uv.ResolutionError(
            f"unsatisfiable: {found[0]}" + (f" (and {len(found) - 1} more)" if len(found) > 1 else ""),
            detail="\n".join(found),
        )


def closure(
    resolved: Resolved,
    *,
    previous: Mapping[str, Any] | None = None,
    refresh: Iterable[str] | bool = (),
    cache: bool = True,
    allow_unreachable: bool = False,
    as_locked: bool = False,
) -> Closure:
    """Lock every git ref and resolve every pip layer (NetworkError / ResolutionError, nothing written).

    ``allow_unreachable``: a git remote out of reach leaves that component unlocked (commit None, listed in
    ``unresolved``, its requirements file installed at build time) instead of failing. ``as_locked``
    (``check``): what the previous entry left unlocked stays unlocked, so no remote is asked again."""
    refresh = refresh if isinstance(refresh, bool) else tuple(refresh)
    notes: list[str] = []
    tolerate = allow_unreachable or as_locked
    commits = git_commits(
        resolved, previous, refresh, unresolved=notes if tolerate else None, retry_unresolved=not as_locked
    )
    for name, comp in sorted(resolved.recipe.components.items()):
        if comp.requirements and commits.get(name, {}).get("commit") is None and name in commits:
            notes.append(f"{name}: {comp.requirements} not locked (its commit is unknown)")
    upgrade: tuple[str, ...] | bool = (
        True if refresh is True else tuple(canonicalize_name(n) for n in refresh) if refresh else ()
    )
    spec = inputs(
        resolved,
        commits,
        previous=previous,
        upgrade=upgrade,
        unresolved=notes if tolerate else None,
        as_locked=as_locked,
    )
    _check_base_releases(resolved, spec.provided)
    packages = uv.resolve(spec, refresh=not cache)
    unlocked = tuple(
        name
        for name, comp in sorted(resolved.recipe.components.items())
        if comp.requirements and any(n.startswith(f"{name}: {comp.requirements} not locked") for n in notes)
    )
    return Closure(
        packages=tuple(packages),
        git=commits,
        unresolved=tuple(notes),
        requirements_unlocked=unlocked,
        rocmstack_requirements=dict(spec.layers).get(SELF_LAYER, ()),
        requirements_from={
            name: comp.requirements_from
            for name, comp in sorted(resolved.recipe.components.items())
            if comp.requirements_from
        },
    )
