"""What a lock entry may hold, checked on every read: a lock is a file in a repository, so a pull request
can change it, and its values reach the Dockerfile (commits), the file system (a layer names a requirements
file) and pip (name, version and hashes are lines of a requirements file).

Every key is known, every value has its type, and each value that reaches the build context matches a
narrow pattern (``checked``: the same filter the renderer passes them through again). A value that does
not is one line, exit 2, naming the lock file, the entry, the field and the value, escaped.

The rules are pydantic models (``LockEntry`` and its parts). pydantic reports every error it finds; the one
named is the one a reader going through the document would meet first (``_first``): keys in the document's
order, an unknown key before a missing one before a bad value, and a fixed order of fields within a
package, a git pin and a rule row.
"""

from __future__ import annotations

import json
import re
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Union, get_args, get_origin

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import VERSION_PATTERN
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError

from rocmstack.errors import RecipeError, quoted
from rocmstack.recipe.model import LAYER_ORDER, SELF_LAYER
from rocmstack.status import Status

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
# A rule is pass, warn, fail or skip (ignored); "ignored" is how locks written before spelled skip.
_STATUSES = (*(s.value for s in Status if s is not Status.ERROR), "ignored")
_SHOWN = 80  # characters of a refused value shown in the message


class LockError(RecipeError):
    """A lock file holds a value rocmstack does not accept (exit 2); nothing is rendered or written."""


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


def _check(test: Callable[[Any], bool], why: str, *, none: bool = False) -> BeforeValidator:
    """A value passes ``test`` (or is None where ``none``) or is refused with ``why`` as the reason."""

    def check(value: Any) -> Any:
        if (value is None and none) or test(value):
            return value
        raise PydanticCustomError("lock", "{why}", {"why": why})

    return BeforeValidator(check)


def _is_text(v: object) -> bool:
    return isinstance(v, str) and v.isprintable()


def _matching(pattern: re.Pattern[str]) -> Callable[[object], bool]:
    return lambda v: isinstance(v, str) and pattern.fullmatch(v) is not None


def _requirement(value: Any) -> Any:
    why = "not a one-line string" if not _is_text(value) else None
    if why is None:
        try:
            Requirement(value)
        except InvalidRequirement:
            why = "not a PEP 508 requirement"
    if why is None:
        return value
    raise PydanticCustomError("lock", "{why}", {"why": why})


def _pattern(kind: str) -> BeforeValidator:
    test, what = PATTERNS[kind]
    return _check(test, f"not {what}")


_RELEASE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}==[0-9][A-Za-z0-9.+!_-]{0,63}$")
# A key of a map of components is refused at the map (``git = 'X'``), a key of a map of strings at its own
# field (``env.X = 'X'``): today's spelling, kept by the error type.
_AT_MAP = "lock_map_key"

_AnObject = _check(lambda v: isinstance(v, dict), "not an object")
_AList = _check(lambda v: isinstance(v, list), "not a list")
# A part given as null (pydantic names anything else that is no object itself); a built part passes.
_APart = _check(lambda v: v is not None, "not an object")
Text = Annotated[str, _check(_is_text, "not a one-line string")]
TextOrNone = Annotated[str | None, _check(_is_text, "not a one-line string", none=True)]
ComponentName = Annotated[str, _check(_matching(_COMPONENT), "not a component name")]
RuleId = Annotated[str, _check(_matching(_RULE_ID), "not a rule id")]
Arch = Annotated[str, _check(_matching(_ARCH), "not a GPU arch")]


def _component_key(value: Any) -> Any:
    if _matching(_COMPONENT)(value):
        return value
    raise PydanticCustomError(_AT_MAP, "{why}", {"why": "not a component name"})


ComponentKey = Annotated[str, BeforeValidator(_component_key)]
Texts = Annotated[list[Text] | None, _AList]
TextMap = Annotated[dict[Text, Text] | None, _AnObject]


class _Part(BaseModel):
    """Frozen, every key known. ``checked_in``: the fields in the order they are checked, where that is not
    the document's order."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    checked_in: ClassVar[tuple[str, ...] | None] = None


class Package(_Part):
    """One Python package of a pip layer: its requirements line and the layer it goes to."""

    checked_in = ("name", "version", "layer", "hashes")
    name: Annotated[str, _pattern("name")]
    version: Annotated[str, _pattern("version")]
    layer: Annotated[str, _pattern("layer")]
    hashes: Annotated[list[Annotated[str, _pattern("hash")]], _AList]


class GitPin(_Part):
    """A git component's url and ref, and the commit they resolved to (None: left unlocked)."""

    checked_in = ("url", "ref", "commit")
    url: Text
    ref: Text
    commit: Annotated[str | None, _check(_is_commit, f"not {PATTERNS['commit'][1]}", none=True)]


class RuleRow(_Part):
    """One rule's result; the reason only where it says something (warn, fail, skip)."""

    checked_in = ("id", "status", "reason")
    id: RuleId
    status: Annotated[str, _check(lambda v: v in _STATUSES, "not pass, warn, fail or skip")]
    reason: Annotated[str | None, _check(_is_text, "not a one-line string")] = None  # None: absent


class Base(_Part):
    """The base image the recipe builds on, and what it provides."""

    image: TextOrNone = None
    digest: TextOrNone = None
    rocm: TextOrNone = None
    python: TextOrNone = None
    torch: TextOrNone = None


class ComponentPin(_Part):
    """A component as the recipe gives it (pypi package and version, or git url and ref)."""

    source: TextOrNone = None
    package: TextOrNone = None
    version: TextOrNone = None
    url: TextOrNone = None
    ref: TextOrNone = None


class Stamp(_Part):
    """The rocmstack that wrote the entry (an image's lock.json also carries its revision)."""

    version: TextOrNone = None
    revision: TextOrNone = None


class LockEntry(_Part):
    """Every key an entry may have (Resolved.lock, prepare.make_entry and the closure); none is required,
    and a key that is there holds a value of its type (None only where the type says so). Those build
    plain dicts (rocmstack.recipe sits below this layer; the SBOM's entry has no render hash yet), which
    tests/unit/test_lock_schema.py checks round-trip through this model byte for byte."""

    schema_: Annotated[
        int | None, _check(lambda v: type(v) is int and v == ENTRY_SCHEMA, f"not {ENTRY_SCHEMA}")
    ] = Field(default=None, alias="schema")
    recipe: Annotated[str | None, _check(_is_text, "not a one-line string")] = None
    render_hash: Annotated[str | None, _check(_matching(_RENDER_HASH), "not 64 hex digits")] = None
    gpu_archs: Annotated[list[Arch] | None, _AList] = None
    base: Annotated[Base | None, _APart] = None
    components: Annotated[dict[ComponentKey, ComponentPin] | None, _AnObject] = None
    patches: Texts = None
    env: TextMap = None
    overrides: Texts = None
    unverified: Texts = None
    rocmstack: Annotated[Stamp | None, _APart] = None
    packages: Annotated[list[Package] | None, _AList] = None
    git: Annotated[dict[ComponentKey, GitPin] | None, _AnObject] = None
    unresolved: Texts = None
    requirements_unlocked: Annotated[list[ComponentName] | None, _AList] = None
    requirements_from: Annotated[
        dict[ComponentKey, Annotated[str, _check(_matching(_RELEASE), "not name==version")]] | None,
        _AnObject,
    ] = None
    rocmstack_requirements: Annotated[
        list[Annotated[str, BeforeValidator(_requirement)]] | None,
        _AList,
    ] = None
    base_digest: Annotated[
        str | None, _check(_matching(_HASH), "not null or sha256:<64 hex digits>", none=True)
    ] = None
    pins: TextMap = None
    ignored_rules: Annotated[list[RuleId] | None, _AList] = None
    rules: Annotated[list[RuleRow] | None, _AList] = None
    recipe_fields: Annotated[dict[Any, Any] | None, _AnObject] = None


class _Header(_Part):
    """A lock file around its entries (schema and entries are checked before, with their own message)."""

    checked_in = ("schema", "recipe", "entries")
    schema_: Any = Field(alias="schema")
    recipe: TextOrNone = None
    entries: Any = None


ENTRY_KEYS = frozenset(f.alias or name for name, f in LockEntry.model_fields.items())
_WHY = {  # pydantic's own errors, in today's words (every other error carries its reason)
    "missing": "missing",
    "extra_forbidden": "unknown key",
    "model_type": "not an object",
    "dict_type": "not an object",
    "list_type": "not a list",
}


def _bare(tp: Any) -> Any:
    """``tp`` without Annotated and without None: what a value of that field is when it is there."""
    while True:
        if get_origin(tp) is Annotated:
            tp = get_args(tp)[0]
        elif get_origin(tp) in (Union, types.UnionType):
            tp = next(a for a in get_args(tp) if a is not type(None))
        else:
            return tp


def _rank(err: ErrorDetails, data: Any, model: type[_Part]) -> tuple[tuple[int | str, ...], ...]:
    """Where ``err`` comes in a reading of ``data`` in today's order: level by level, the position of its
    step there (an object's unknown keys, then its missing keys by name, then its values)."""
    out: list[tuple[int | str, ...]] = []
    tp: Any = model
    node = data
    loc = err["loc"]
    for depth, step in enumerate(loc):
        last = depth == len(loc) - 1
        keys = list(node) if isinstance(node, dict) else []
        tp = _bare(tp)
        if isinstance(tp, type) and issubclass(tp, _Part):
            fields = {f.alias or name: f for name, f in tp.model_fields.items()}
            if last and err["type"] == "extra_forbidden":
                out.append((1, keys.index(step)))
            elif last and err["type"] == "missing":
                out.append((2, str(step)))
            else:
                order = tp.checked_in if tp.checked_in is not None else keys
                out.append((3, order.index(step)))
            tp = fields[step].annotation if step in fields else Any
        elif get_origin(tp) is list:
            out.append((3, int(step)))
            tp = get_args(tp)[0]
        else:  # a map, in the document's order: each key checked before its value
            keyed = not last and loc[depth + 1] == "[key]"
            out.append((3, keys.index(step), 0 if keyed else 1))
            if keyed:
                break
            tp = get_args(tp)[1] if get_origin(tp) is dict else Any
        if isinstance(node, dict):
            node = node.get(step)
        else:
            node = node[step] if isinstance(node, list) and isinstance(step, int) else None
    return tuple(out)


def _first(exc: ValidationError, data: Any, model: type[_Part]) -> tuple[str, object, str]:
    """The error today's reading meets first, as (field, value, why): dots for keys, [i] for list items."""
    errors = exc.errors()
    err = min(errors, key=lambda e: _rank(e, data, model))  # ties keep pydantic's order
    loc = list(err["loc"])
    value: object = err["input"]
    if loc and loc[-1] == "[key]":
        loc = loc[:-2] if err["type"] == _AT_MAP else loc[:-1]
    elif err["type"] == "extra_forbidden":
        value = loc[-1]
    elif err["type"] == "missing":
        value = None
    field = "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in loc).removeprefix(".")
    why = str((err.get("ctx") or {}).get("why") or _WHY.get(err["type"], err["msg"]))
    return field, value, why


def _fail(origin: object, where: str, field: str, value: object, why: str) -> LockError:
    return LockError(
        f"{origin}: {where}{field} = {quoted(_shown(value))}: {why}",
        fix="restore the lock file from version control, or delete it and run `rocmstack lock`",
    )


def _validated(model: type[_Part], data: object, origin: object, where: str) -> None:
    if not isinstance(data, dict):  # a model instance too: what is checked is a document read from JSON
        raise _fail(origin, where, "", data, "not an object")
    try:
        model.model_validate(data)
    except ValidationError as exc:
        raise _fail(origin, where, *_first(exc, data, model)) from None


def check_entry(entry: object, origin: object, key: str | None = None) -> dict[str, Any]:
    """One entry (or an image's lock.json, ``key`` None) checked key by key; LockError on the first bad one."""
    where = f"entry {quoted(key)}: " if key is not None else ""
    _validated(LockEntry, entry, origin, where)
    assert isinstance(entry, dict)  # _validated refused anything else
    archs = entry.get("gpu_archs")
    if key is not None and archs is not None and ";".join(archs) != key:
        raise _fail(origin, where, "gpu_archs", archs, f"not the entry's arch set {key}")
    return entry


def check_document(data: object, path: Path) -> dict[str, Any]:
    """A whole lock file: its header, then every entry (keyed by its arch set)."""
    doc: dict[str, Any] = data if isinstance(data, dict) else {}
    schema = doc.get("schema")  # bool is an int to isinstance: `true` is not schema 1
    if type(schema) is not int or schema != LOCK_FILE_SCHEMA or not isinstance(doc.get("entries"), dict):
        raise RecipeError(
            f"{path}: not a rocmstack lock file (schema {LOCK_FILE_SCHEMA})",
            fix="run `rocmstack lock` to rewrite it",
        )
    _validated(_Header, doc, path, "")
    entries: Mapping[str, Any] = doc["entries"]
    for key, entry in entries.items():
        if not all(_ARCH.fullmatch(a) for a in key.split(";")):
            raise _fail(path, "", "entries", key, "not an arch set key (gfx942;gfx950)")
        check_entry(entry, path, key)
    return doc
