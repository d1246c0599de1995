"""What a lock entry may hold, checked on every read: a lock is a file in a repository, so a pull request
can change it, and its values reach the Dockerfile (commits), the file system (a layer names a requirements
file) and pip (name, version and hashes are lines of a requirements file).

Every key is known, every value has its type, and each value that reaches the build context matches a
narrow pattern (``checked``: the same filter the renderer passes them through again). A value that does
not is one line, exit 2, naming the lock file, the entry, the field and the value, escaped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import VERSION_PATTERN

from rocmstack.errors import RecipeError, quoted
from rocmstack.recipe.model import LAYER_ORDER, SELF_LAYER

LOCK_FILE_SCHEMA = 1
ENTRY_SCHEMA = 1  # rocmstack.recipe.resolve.LOCK_SCHEMA: the document an entry (and an image) carries

_COMMIT = re.compile(r"[0-9a-f]{40}")
_HASH = re.compile(r"sha256:[0-9a-f]{64}")
_RENDER_HASH = re.compile(r"[0-9a-f]{64}")
# PEP 508 names (PEP 503 normalises them); the lock records them normalised, as uv writes them.
_PACKAGE = re.compile(r"[a-z0-9]([a-z0-9._-]*[a-z0-9])?")
# PEP 440, without the surrounding whitespace packaging's own pattern allows.
_VERSION = re.compile(VERSION_PATTERN, re.VERBOSE | re.IGNORECASE)
_COMPONENT = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")  # rocmstack.recipe.model's names
_ARCH = re.compile(r"gfx[0-9a-f]{3,4}")
_RULE_ID = re.compile(r"(validated:)?[a-z0-9][a-z0-9.-]{0,63}")  # rocmstack.rules.engine's result ids
_LAYERS = frozenset([*(layer.value for layer in LAYER_ORDER), SELF_LAYER])
_STATUSES = ("pass", "warn", "fail", "ignored")
_SHOWN = 80  # characters of a refused value shown in the message


class LockError(RecipeError):
    """A lock file holds a value rocmstack does not accept (exit 2); nothing is rendered or written."""


class _Bad(Exception):
    """One refused value: where in the entry, and why (turned into a LockError naming the file)."""

    def __init__(self, field: str, value: object, why: str) -> None:
        super().__init__(field)
        self.field, self.value, self.why = field, value, why


def _is_commit(v: object) -> bool:
    return isinstance(v, str) and _COMMIT.fullmatch(v) is not None


def _is_version(v: object) -> bool:
    return isinstance(v, str) and _VERSION.fullmatch(v) is not None


# The values that reach the build context, each with what it must be. ``checked`` is the filter.
PATTERNS: dict[str, tuple[Callable[[object], bool], str]] = {
    "commit": (_is_commit, "a git commit: 40 lowercase hex digits"),
    "hash": (lambda v: isinstance(v, str) and _HASH.fullmatch(v) is not None, "sha256:<64 hex digits>"),
    "name": (
        lambda v: isinstance(v, str) and _PACKAGE.fullmatch(v) is not None,
        "a normalised PEP 503 package name",
    ),
    "version": (_is_version, "a PEP 440 version"),
    "layer": (
        lambda v: isinstance(v, str) and v in _LAYERS,
        f"one of the layers {', '.join(sorted(_LAYERS))}",
    ),
}


def checked(kind: str, value: object) -> str:
    """``value`` if it is a well-formed lock value of ``kind``; LockError otherwise. The renderer passes
    every lock value it writes through this again, so nothing can reach the context by another road."""
    test, what = PATTERNS[kind]
    if not test(value):
        raise LockError(
            f"refusing to render lock value {quoted(_shown(value))}: not {what}",
            fix="check the lock file, or delete it and run `rocmstack lock`",
        )
    return str(value)


def _shown(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=repr)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def _want(ok: bool, field: str, value: object, why: str) -> None:
    if not ok:
        raise _Bad(field, value, why)


def _text(field: str, value: object, *, none: bool = False) -> None:
    if value is None and none:
        return
    _want(isinstance(value, str) and value.isprintable(), field, value, "not a one-line string")


def _pattern(field: str, kind: str, value: object) -> None:
    test, what = PATTERNS[kind]
    _want(test(value), field, value, f"not {what}")


def _keys(
    field: str, value: object, allowed: set[str], required: set[str] | frozenset[str] = frozenset()
) -> dict:
    _want(isinstance(value, dict), field, value, "not an object")
    assert isinstance(value, dict)
    for key in value:
        _want(key in allowed, f"{field}.{key}" if field else str(key), key, "unknown key")
    for key in sorted(required - set(value)):
        raise _Bad(f"{field}.{key}" if field else key, None, "missing")
    return value


def _list(field: str, value: object) -> list:
    _want(isinstance(value, list), field, value, "not a list")
    assert isinstance(value, list)
    return value


def _texts(field: str, value: object) -> None:
    for i, item in enumerate(_list(field, value)):
        _text(f"{field}[{i}]", item)


def _str_map(field: str, value: object) -> None:
    _want(isinstance(value, dict), field, value, "not an object")
    assert isinstance(value, dict)
    for key, item in value.items():
        _text(f"{field}.{key}", key)
        _text(f"{field}.{key}", item)


def _package(field: str, value: object) -> None:
    pkg = _keys(field, value, {"name", "version", "hashes", "layer"}, {"name", "version", "hashes", "layer"})
    _pattern(f"{field}.name", "name", pkg["name"])
    _pattern(f"{field}.version", "version", pkg["version"])
    _pattern(f"{field}.layer", "layer", pkg["layer"])
    for i, h in enumerate(_list(f"{field}.hashes", pkg["hashes"])):
        _pattern(f"{field}.hashes[{i}]", "hash", h)


def _git(field: str, value: object) -> None:
    _want(isinstance(value, dict), field, value, "not an object")
    assert isinstance(value, dict)
    for name, item in value.items():
        _component_name(field, name)
        where = f"{field}.{name}"
        g = _keys(where, item, {"url", "ref", "commit"}, {"url", "ref", "commit"})
        _text(f"{where}.url", g["url"])
        _text(f"{where}.ref", g["ref"])
        if g["commit"] is not None:
            _pattern(f"{where}.commit", "commit", g["commit"])


def _requirement(field: str, value: object) -> None:
    _text(field, value)
    try:
        Requirement(str(value))
    except InvalidRequirement:
        raise _Bad(field, value, "not a PEP 508 requirement") from None


_RELEASE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}==[0-9][A-Za-z0-9.+!_-]{0,63}$")


def _requirements_from(field: str, value: object) -> None:
    """component -> the published release (name==version) whose requirements stood in for its own."""
    _want(isinstance(value, dict), field, value, "not an object")
    assert isinstance(value, dict)
    for name, release in value.items():
        _component_name(field, name)
        _want(
            isinstance(release, str) and _RELEASE.fullmatch(release) is not None,
            f"{field}.{name}",
            release,
            "not name==version",
        )


def _rules(field: str, value: object) -> None:
    for i, item in enumerate(_list(field, value)):
        rule = _keys(f"{field}[{i}]", item, {"id", "status", "reason"}, {"id", "status"})
        _rule_id(f"{field}[{i}].id", rule["id"])
        status = rule["status"]
        _want(status in _STATUSES, f"{field}[{i}].status", status, "not pass, warn, fail or ignored")
        if "reason" in rule:
            _text(f"{field}[{i}].reason", rule["reason"])


def _components(field: str, value: object) -> None:
    _want(isinstance(value, dict), field, value, "not an object")
    assert isinstance(value, dict)
    for name, item in value.items():
        _component_name(field, name)
        comp = _keys(f"{field}.{name}", item, {"source", "package", "version", "url", "ref"})
        for key, v in comp.items():
            _text(f"{field}.{name}.{key}", v, none=True)


def _int_one(field: str, value: object) -> None:
    _want(type(value) is int and value == ENTRY_SCHEMA, field, value, f"not {ENTRY_SCHEMA}")


def _matches(pattern: re.Pattern[str], why: str) -> Callable[[str, object], None]:
    def check(field: str, value: object) -> None:
        _want(isinstance(value, str) and pattern.fullmatch(value) is not None, field, value, why)

    return check


def _each(check: Callable[[str, Any], None]) -> Callable[[str, object], None]:
    def check_list(field: str, value: object) -> None:
        for i, item in enumerate(_list(field, value)):
            check(f"{field}[{i}]", item)

    return check_list


def _texts_of(allowed: set[str]) -> Callable[[str, object], None]:
    def check(field: str, value: object) -> None:
        for key, item in _keys(field, value, allowed).items():
            _text(f"{field}.{key}", item, none=True)

    return check


def _base_digest(field: str, value: object) -> None:
    if value is not None:
        _matches(_HASH, "not null or sha256:<64 hex digits>")(field, value)


def _recipe_fields(field: str, value: object) -> None:
    _want(isinstance(value, dict), field, value, "not an object")


_component_name = _matches(_COMPONENT, "not a component name")
_rule_id = _matches(_RULE_ID, "not a rule id")

# Every key an entry may have (Resolved.lock, prepare.make_entry and the closure), and its check.
_ENTRY: dict[str, Callable[[str, Any], None]] = {
    "schema": _int_one,
    "recipe": _text,
    "render_hash": _matches(_RENDER_HASH, "not 64 hex digits"),
    "gpu_archs": _each(_matches(_ARCH, "not a GPU arch")),
    "base": _texts_of({"image", "digest", "rocm", "python", "torch"}),
    "components": _components,
    "patches": _texts,
    "env": _str_map,
    "overrides": _texts,
    "unverified": _texts,
    "rocmstack": _texts_of({"version", "revision"}),
    "packages": _each(_package),
    "git": _git,
    "unresolved": _texts,
    "requirements_unlocked": _each(_component_name),
    "requirements_from": _requirements_from,
    "rocmstack_requirements": _each(_requirement),
    "base_digest": _base_digest,
    "pins": _str_map,
    "ignored_rules": _each(_rule_id),
    "rules": _rules,
    "recipe_fields": _recipe_fields,
}
ENTRY_KEYS = frozenset(_ENTRY)


def _fail(origin: object, where: str, bad: _Bad) -> LockError:
    return LockError(
        f"{origin}: {where}{bad.field} = {quoted(_shown(bad.value))}: {bad.why}",
        fix="restore the lock file from version control, or delete it and run `rocmstack lock`",
    )


def check_entry(entry: object, origin: object, key: str | None = None) -> dict[str, Any]:
    """One entry (or an image's lock.json, ``key`` None) checked key by key; LockError on the first bad one."""
    where = f"entry {quoted(key)}: " if key is not None else ""
    try:
        doc = _keys("", entry, set(ENTRY_KEYS))
        for name, value in doc.items():
            _ENTRY[name](name, value)
        archs = doc.get("gpu_archs")
        if key is not None and archs is not None:
            _want(";".join(archs) == key, "gpu_archs", archs, f"not the entry's arch set {key}")
    except _Bad as bad:
        raise _fail(origin, where, bad) from None
    return doc


def check_document(data: object, path: Path) -> dict[str, Any]:
    """A whole lock file: its header, then every entry (keyed by its arch set)."""
    doc: dict[str, Any] = data if isinstance(data, dict) else {}
    schema = doc.get("schema")  # bool is an int to isinstance: `true` is not schema 1
    if type(schema) is not int or schema != LOCK_FILE_SCHEMA or not isinstance(doc.get("entries"), dict):
        raise RecipeError(
            f"{path}: not a rocmstack lock file (schema {LOCK_FILE_SCHEMA})",
            fix="run `rocmstack lock` to rewrite it",
        )
    try:
        _keys("", doc, {"schema", "recipe", "entries"})
        _text("recipe", doc.get("recipe"), none=True)
    except _Bad as bad:
        raise _fail(path, "", bad) from None
    entries: Mapping[str, Any] = doc["entries"]
    for key, entry in entries.items():
        if not all(_ARCH.fullmatch(a) for a in key.split(";")):
            raise _fail(path, "", _Bad("entries", key, "not an arch set key (gfx942;gfx950)"))
        check_entry(entry, path, key)
    return doc
