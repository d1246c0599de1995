"""For each pin of a recipe: the newest upstream release (the index's JSON API; git tags where the remote is
reachable) and what ``check`` would say with the pin bumped to it (the rules and the resolver run on the
bumped set), so an upgrade is a decision made in seconds."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from rocmstack.errors import NetworkError, RocmstackError
from rocmstack.output import console
from rocmstack.recipe.resolve import Resolved, recipe_arg
from rocmstack.resolver import git
from rocmstack.resolver.closure import closure
from rocmstack.resolver.release import index_json
from rocmstack.resolver.uv import ResolutionError
from rocmstack.rules.engine import evaluate_rules

PYPI_JSON = "https://pypi.org/pypi"


@dataclass(frozen=True, kw_only=True)
class Row:
    name: str
    source: str
    pinned: str
    locked: str | None  # the version/commit the lock installs
    latest: str | None
    status: str  # current | outdated | in-range | unknown | base
    verdict: str = ""  # what check says with the bump ("ok", "rule X fails: ...", "unsatisfiable: ...")

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def index_json_url() -> str:
    return os.environ.get("ROCMSTACK_PYPI_JSON", PYPI_JSON).rstrip("/")


def latest_release(package: str, *, timeout: float = 20) -> str | None:
    """The newest final release of ``package`` on the index (None if the index does not know it)."""

    url = f"{index_json_url()}/{package}/json"
    data = index_json(url, timeout)
    if data is None:
        return None
    versions = []
    for text, files in (data.get("releases") or {}).items():
        try:
            v = Version(text)
        except InvalidVersion:
            continue
        if not v.is_prerelease and files and not all(f.get("yanked") for f in files):
            versions.append(v)
    return str(max(versions)) if versions else data.get("info", {}).get("version")


def latest_tag(url: str) -> str | None:
    """The highest version-like tag at ``url`` (``v1.2.3`` or ``1.2.3``); None when out of reach or none."""

    try:
        proc = git._git("ls-remote", "--tags", "--refs", "--", url, timeout=60)
    except NetworkError:
        return None
    if proc.returncode != 0:
        return None
    best: tuple[Version, str] | None = None
    for line in proc.stdout.splitlines():
        tag = line.partition("\t")[2].removeprefix("refs/tags/")
        m = re.fullmatch(r"v?(\d+(?:\.\d+)*(?:\.post\d+)?)", tag)
        if not m:
            continue
        v = Version(m.group(1))
        if best is None or v > best[0]:
            best = (v, tag)
    return best[1] if best else None


def _git_row(name: str, url: str, ref: str, locked: str | None, arg: str) -> Row:
    """A version tag: the newest tag. A branch: its head now against the locked commit. A commit: newest tag."""

    row = Row(name=name, source="git", pinned=ref, locked=locked, latest=None, status="unknown")
    is_tag = re.fullmatch(r"v?\d+(\.\d+)*(\.post\d+)?", ref) is not None
    if is_tag or re.fullmatch(r"[0-9a-f]{7,40}", ref):
        latest = latest_tag(url)
        if latest is None:
            return dataclasses.replace(row, verdict="remote out of reach or no version tags")
        current = latest == ref if is_tag else None
        status = "current" if current else ("outdated" if is_tag else "pinned")
        said = (
            ""
            if current
            else f"newest tag {latest}: try it: `rocmstack check {arg} --set {name}.ref={latest}`"
        )
        return dataclasses.replace(row, latest=latest, status=status, verdict=said)
    try:
        head = git.ls_remote(url, ref)
    except RocmstackError as exc:
        return dataclasses.replace(row, verdict=exc.message)
    if head == locked:
        return dataclasses.replace(row, latest=head, status="current")
    return dataclasses.replace(
        row, latest=head, status="outdated", verdict=f"branch moved: `rocmstack lock {arg} --refresh {name}`"
    )


def _bumped(resolved: Resolved, name: str, version: str) -> Resolved:
    recipe = resolved.recipe
    comps = dict(recipe.components)
    comps[name] = comps[name].model_copy(update={"version": version})
    return dataclasses.replace(resolved, recipe=recipe.model_copy(update={"components": comps}))


def verdict(bumped: Resolved, entry: Mapping[str, Any] | None, *, resolve: bool = True) -> str:
    """What check says for the bumped set: the first failing rule, else the resolver's answer."""

    failed = [r for r in evaluate_rules(bumped) if r.status == "fail"]
    if failed:
        more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
        return f"rule {failed[0].id} fails: {failed[0].reason}{more}"
    if not resolve:
        return "rules pass (resolver not run)"
    try:
        found = closure(bumped, previous=entry, as_locked=True)
    except ResolutionError as exc:
        return exc.message
    except RocmstackError as exc:
        return f"resolver: {exc.message}"
    return f"ok: {len(found.packages)} packages resolve"


def outdated(
    resolved: Resolved, entry: Mapping[str, Any] | None = None, *, resolve: bool = True
) -> list[Row]:
    arg = recipe_arg(resolved)  # every command a row suggests runs as printed
    locked = {p["name"]: p["version"] for p in (entry or {}).get("packages") or ()}
    commits = {n: g.get("commit") for n, g in ((entry or {}).get("git") or {}).items()}
    rows = []
    for name, comp in sorted(resolved.recipe.components.items()):
        package = comp.package or name
        if comp.source in ("base", "sdk"):
            rows.append(
                Row(
                    name=name,
                    source=comp.source,
                    pinned=comp.version or "-",
                    locked=None,
                    latest=None,
                    status="base",
                )
            )
            continue
        if comp.source == "git":
            rows.append(_git_row(name, comp.url or "", comp.ref or "", commits.get(name), arg))
            continue
        pinned = comp.version or ""
        latest = latest_release(package)
        have = locked.get(re.sub(r"[-_.]+", "-", package).lower())
        if latest is None:
            status, said = "unknown", "not on the index"
        elif pinned[:1].isdigit():
            status = "current" if Version(latest) <= Version(pinned) else "outdated"
            said = (
                verdict(_bumped(resolved, name, latest), entry, resolve=resolve)
                if status == "outdated"
                else ""
            )
        elif Version(latest) in SpecifierSet(pinned):
            status = "current" if have == latest else "in-range"
            said = (
                "" if status == "current" else f"the range allows it: `rocmstack lock {arg} --refresh {name}`"
            )
        else:
            status = "outdated"
            said = verdict(_bumped(resolved, name, f"=={latest}"), entry, resolve=resolve)
        rows.append(
            Row(
                name=name,
                source="pypi",
                pinned=pinned,
                locked=have,
                latest=latest,
                status=status,
                verdict=said,
            )
        )
    return rows


def print_outdated(title: str, rows: list[Row]) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(title), title_justify="left")
    for column in ("component", "source", "pinned", "locked", "latest", "status", "if bumped"):
        table.add_column(column, overflow="fold")
    style = {"outdated": "yellow", "in-range": "cyan", "current": "green"}
    for r in rows:
        table.add_row(
            r.name,
            r.source,
            escape(r.pinned),
            escape(r.locked or ""),
            escape(r.latest or ""),
            f"[{style.get(r.status, 'dim')}]{r.status}[/]",
            escape(r.verdict),
        )
    # Piped output gets a wide table: names and commits are never cut.
    console(highlight=False, width=None if sys.stdout.isatty() else 200).print(table)
