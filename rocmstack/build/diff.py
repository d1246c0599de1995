"""What changed between two locks, two recipes, or two images (or any mix): packages added, removed, up or
down, git commits, component pins, env, patches, base image and digest.

Each side is reduced to one ``Side`` first: a lock file (``*.lock.json``, one arch entry), a recipe (name
or ``.yaml``: its pins as written; the full package list only from a lock), or an image (its labels and
/opt/rocmstack/lock.json through the container engine).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from rocmstack.container import engine as engines
from rocmstack.contract import LOCK_PATH, RENDER_HASH_LABEL
from rocmstack.errors import InputError, printable, quoted
from rocmstack.lock.drift import flatten, is_empty, recipe_fields
from rocmstack.lock.file import arch_key, closure_of, entry_of, lock_path, read_lock
from rocmstack.lock.schema import check_entry
from rocmstack.prepare import render_hash_of
from rocmstack.recipe.load import load_recipe, recipes_on_path
from rocmstack.recipe.resolve import plain_value, resolve


@dataclass(frozen=True, kw_only=True)
class Side:
    label: str
    kind: str  # lock | recipe | image
    base: dict[str, Any]
    components: dict[str, str]  # name -> pin (version, range or git ref)
    packages: dict[str, str] | None  # name -> version (None: this side has no resolved package list)
    git: dict[str, str] | None  # component -> locked commit (None: this side has no commits)
    env: dict[str, str]
    patches: tuple[str, ...]
    # Every other recipe field, dotted (None: this side does not carry the recipe, e.g. an image).
    fields: dict[str, str] | None = None
    render_hash: str | None = None


@dataclass(frozen=True, kw_only=True)
class Change:
    section: str  # base | component | package | git | env | patch | recipe | render
    name: str
    change: str  # added | removed | up | down | changed
    old: str | None = None
    new: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "section": self.section,
            "name": self.name,
            "change": self.change,
            "old": self.old,
            "new": self.new,
        }


@dataclass(frozen=True, kw_only=True)
class Diff:
    a: str
    b: str
    changes: tuple[Change, ...] = field(default_factory=tuple)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for c in self.changes:
            counts[c.change] = counts.get(c.change, 0) + 1
        return {
            "a": self.a,
            "b": self.b,
            "summary": counts,
            "changes": [c.to_json() for c in self.changes],
            "notes": list(self.notes),
        }


def _pick_entry(doc: Mapping[str, Any], origin: str, gpu_arch: str | None) -> dict[str, Any]:
    entries = doc.get("entries") or {}
    if not entries:
        raise InputError(f"{origin}: the lock has no entries", fix="run `rocmstack lock` for it")
    if gpu_arch:
        key = ";".join(sorted(a.strip() for a in gpu_arch.replace(",", ";").split(";") if a.strip()))
        if key not in entries:
            raise InputError(
                f"{origin}: no lock entry for --gpu-arch {quoted(gpu_arch)}",
                fix=f"entries: {', '.join(entries)}",
            )
        return dict(entries[key])
    # The widest arch set: the recipe's default build.
    return dict(entries[max(entries, key=lambda k: (k.count(";"), k))])


def side_from_lock(entry: Mapping[str, Any], label: str, kind: str = "lock") -> Side:
    base = entry.get("base") or {}
    comps = {
        n: str(c.get("ref") if c.get("source") == "git" else c.get("version") or c.get("source"))
        for n, c in (entry.get("components") or {}).items()
    }
    packages = (
        {p["name"]: p["version"] for p in entry["packages"]}
        if isinstance(entry.get("packages"), list)
        else None
    )
    git = (
        {n: str(g.get("commit") or f"unlocked ({g.get('ref')})") for n, g in entry["git"].items()}
        if isinstance(entry.get("git"), dict)
        else None
    )
    fields = entry.get("recipe_fields")
    return Side(
        label=label,
        kind=kind,
        base={"image": base.get("image"), "digest": base.get("digest") or entry.get("base_digest")},
        components=comps,
        packages=packages,
        git=git,
        env=dict(entry.get("env") or {}),
        patches=tuple(entry.get("patches") or ()),
        fields=other_fields(fields) if isinstance(fields, dict) else None,
        render_hash=entry.get("render_hash") or None,
    )


# Shown in sections of their own (base, component, env, patch), or saying nothing about the image.
_NOT_RECIPE_ROWS = ("name", "extends", "schema", "description", "sources", "env", "patches")
_OWN_ROWS = ("base.image", "base.tag", "base.digest")


def other_fields(recipe_fields: Mapping[str, Any]) -> dict[str, str]:
    """The recipe fields that no other section shows, dotted, each value as the recipe writes it: what
    changes the image or where it is published besides the pins (gpu_archs, build_args, user, publish,
    guards, base.provides, component extras and build env, ...)."""

    out = {}
    for key, value in flatten(recipe_fields).items():
        parts = key.split(".")
        if parts[0] in _NOT_RECIPE_ROWS or key in _OWN_ROWS:
            continue
        if parts[0] == "components" and len(parts) == 3 and parts[2] in ("version", "ref"):
            continue  # the component section's pin
        if is_empty(value):
            continue  # the same as a field that is not there
        out[key] = plain_value(value, sort_keys=True)
    return out


def side_from_recipe(name_or_path: str, gpu_arch: str | None = None, patches_dir: Path | None = None) -> Side:
    import dataclasses

    recipe, path = load_recipe(name_or_path)
    resolved = resolve(recipe, path, gpu_arch)
    # The hash `render` would print now: with the recipe's lock entry, where it has one.
    closure = closure_of(entry_of(lock_path(path), arch_key(resolved.gpu_archs)))
    render_hash = render_hash_of(dataclasses.replace(resolved, locked=closure), (), patches_dir)
    comps = {
        n: str(c.ref if c.source == "git" else c.version or c.source) for n, c in recipe.components.items()
    }
    return Side(
        label=name_or_path,
        kind="recipe",
        base={"image": f"{recipe.base.image}:{recipe.base.tag}", "digest": recipe.base.digest},
        components=comps,
        packages=None,
        git=None,
        env=dict(recipe.env),
        patches=tuple(recipe.patches),
        fields=other_fields(recipe_fields(resolved)),
        render_hash=render_hash,
    )


def side_from_image(ref: str, engine: str | None) -> Side:

    found = engines.detect(engine or "auto")
    info = engines.inspect_image(found, ref)
    raw = engines.read_file(found, ref, LOCK_PATH)
    if not raw:
        raise InputError(f"{printable(ref)}: {LOCK_PATH} is missing: not a rocmstack image")
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        raise InputError(f"{printable(ref)}: {LOCK_PATH} is not JSON") from None
    side = side_from_lock(check_entry(doc, f"{printable(ref)}: {LOCK_PATH}"), ref, kind="image")
    digest = info["labels"].get("org.opencontainers.image.base.digest") or side.base.get("digest")
    render_hash = info["labels"].get(RENDER_HASH_LABEL) or side.render_hash
    return Side(**{**side.__dict__, "base": {**side.base, "digest": digest}, "render_hash": render_hash})


def load_side(
    spec: str, *, gpu_arch: str | None = None, engine: str | None = None, patches_dir: Path | None = None
) -> Side:
    """A lock file, a recipe (name or .yaml) or an image reference."""
    path = Path(spec)
    if spec.endswith(".json"):
        if not path.is_file():
            raise InputError(f"{quoted(spec)}: no such lock file")
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            raise InputError(f"{quoted(spec)}: unreadable lock file: {exc}") from None
        if isinstance(doc, dict) and "entries" in doc:  # a lock file: read (and validated) as every lock is
            return side_from_lock(_pick_entry(read_lock(path) or {}, spec, gpu_arch), spec)
        return side_from_lock(check_entry(doc, spec), spec)  # an image's lock.json
    if spec.endswith((".yaml", ".yml")):
        return side_from_recipe(spec, gpu_arch, patches_dir)

    if spec in recipes_on_path():  # what `rocmstack recipes` lists (--recipes-dir too)
        return side_from_recipe(spec, gpu_arch, patches_dir)
    if not spec.strip():
        raise InputError("diff: empty argument", fix="give a lock file, a recipe or an image reference")
    return side_from_image(spec, engine)


def _version_change(old: str, new: str) -> str:
    try:
        return "up" if Version(new) > Version(old) else "down"
    except InvalidVersion:
        return "changed"


def _mapping(
    section: str, a: Mapping[str, str], b: Mapping[str, str], versions: bool = False
) -> list[Change]:
    out = []
    for name in sorted(set(a) | set(b)):
        old, new = a.get(name), b.get(name)
        if old == new:
            continue
        if old is None:
            out.append(Change(section=section, name=name, change="added", new=new))
        elif new is None:
            out.append(Change(section=section, name=name, change="removed", old=old))
        else:
            kind = _version_change(old, new) if versions else "changed"
            out.append(Change(section=section, name=name, change=kind, old=old, new=new))
    return out


def diff(a: Side, b: Side) -> Diff:
    changes: list[Change] = []
    for key in ("image", "digest"):
        if a.base.get(key) != b.base.get(key):
            changes.append(
                Change(
                    section="base",
                    name=key,
                    change="changed",
                    old=str(a.base.get(key)),
                    new=str(b.base.get(key)),
                )
            )
    changes += _mapping("component", a.components, b.components, versions=True)
    notes = []
    if a.packages is not None and b.packages is not None:
        changes += _mapping("package", a.packages, b.packages, versions=True)
    else:
        without = [s.label for s in (a, b) if s.packages is None]
        notes.append(f"no resolved package list for {', '.join(without)}: packages not compared")
    if a.git is not None and b.git is not None:
        changes += _mapping("git", a.git, b.git)
    else:
        without = [s.label for s in (a, b) if s.git is None]
        notes.append(f"no locked git commits for {', '.join(without)}: git refs compared as pins only")
    changes += _mapping("env", a.env, b.env)
    changes += _mapping("patch", dict.fromkeys(a.patches, "on"), dict.fromkeys(b.patches, "on"))
    if a.fields is not None and b.fields is not None:
        changes += _mapping("recipe", a.fields, b.fields)
    else:
        without = [s.label for s in (a, b) if s.fields is None]
        notes.append(
            f"no recipe fields for {', '.join(without)}: archs, build args, user, publish and the other "
            "recipe fields not compared"
        )
    if a.render_hash and b.render_hash and a.render_hash != b.render_hash:
        # The last word: two different builds are never "no changes", whatever the rows above caught.
        changes.append(
            Change(
                section="render", name="render_hash", change="changed", old=a.render_hash, new=b.render_hash
            )
        )
        if len(changes) == 1:
            notes.append(
                "only the render hash differs: templates, patches or rocmstack changed since one side was locked"
            )
    return Diff(a=a.label, b=b.label, changes=tuple(changes), notes=tuple(notes))


_SYMBOL = {"added": "+", "removed": "-", "up": "↑", "down": "↓", "changed": "~"}


def markdown(d: Diff) -> str:
    """A PR comment: a summary line and one table of the changes."""
    counts = d.to_json()["summary"]
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no changes"
    lines = [f"### rocmstack diff `{d.a}` → `{d.b}`", "", summary, ""]
    if d.changes:
        lines += ["| section | name | change | old | new |", "|---|---|---|---|---|"]
        for c in d.changes:
            lines.append(
                f"| {c.section} | `{c.name}` | {_SYMBOL[c.change]} {c.change} | {c.old or ''} | {c.new or ''} |"
            )
    lines += [f"\n_{n}_" for n in d.notes]
    return "\n".join(lines) + "\n"
