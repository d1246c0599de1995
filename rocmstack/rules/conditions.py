"""The condition language of the compatibility rules: plain functions over the facts of one resolved recipe.

A condition is a one-key mapping ``{op: args}`` (``all``/``any`` take a list, ``not`` one condition; a bare
list means ``all``). Every op returns ``(verdict, text)`` where the verdict is three-valued: True, False, or
None when the pins cannot decide it (a version *range* such as ``>=5.12`` against ``>=5.13``). ``text`` is a
short phrase naming the pins and values it looked at, used in the one-line reason.

Ops (``pin`` is a dotted path such as ``components.vllm.version``, ``base.rocm``, ``env.NAME``, ``gpu_archs``):
  version   {pin, spec}       PEP 440 specifier over an exact pin or a range pin (three-valued)
  equals    {pin, value}      string equality (a missing pin is not equal)
  one_of    {pin, values}
  present   pin               the pin exists and is not null/empty
  contains  {pin, value}      a list pin holds the value, or a string pin contains the substring
  subset    {pin, of}         every item of list pin is in list ``of`` (another pin)
  same      [pin, pin]        two pins are equal
  matches   {pin, pattern}    some item of a list pin (or the string) matches the fnmatch pattern
  patches_apply {}            every listed patch targets its component's pin (rocmstack.patches.applicability)
  tags_match_versions {}      every git component pinned to a tag vX.Y.Z declares version X.Y.Z
  dependencies_declared {}    every git component pip installs with its dependencies (no no_deps, no
                              setup_script) declares them: a requirements file, a requirements_from release
                              or a requires list
  declares {component, packages}  every package is one the recipe installs or the base provides: a
                              component, base.provides, a requires entry, a requirements_from release
                              standing in for the component (False lists those missing)
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet
from packaging.version import InvalidVersion, Version

Verdict = bool | None
Outcome = tuple[Verdict, str]
_MISSING = object()
_TAG = re.compile(r"^v?([0-9]+(?:\.[0-9]+){1,3})$")


@dataclass(frozen=True, kw_only=True)
class Facts:
    """What a condition may look at: the recipe as nested data plus what only code can derive."""

    data: Mapping[str, Any]
    patch_status: Mapping[str, tuple[str, str]]  # patch id -> applicability (status, reason)

    def get(self, path: str) -> Any:
        node: Any = self.data
        for part in path.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return _MISSING
            node = node[part]
        return node


def show(value: Any) -> str:
    if value is _MISSING or value is None:
        return "unset"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


# ---- three-valued version matching -------------------------------------------------------------


@dataclass(frozen=True)
class _Interval:
    lo: Version | None
    lo_incl: bool
    hi: Version | None
    hi_incl: bool

    def empty(self) -> bool:
        if self.lo is None or self.hi is None:
            return False
        return self.lo > self.hi or (self.lo == self.hi and not (self.lo_incl and self.hi_incl))

    def point(self) -> bool:
        return self.lo is not None and self.lo == self.hi and self.lo_incl and self.hi_incl

    def within(self, other: _Interval) -> bool:
        lo_ok = other.lo is None or (
            self.lo is not None
            and (self.lo > other.lo or (self.lo == other.lo and (other.lo_incl or not self.lo_incl)))
        )
        hi_ok = other.hi is None or (
            self.hi is not None
            and (self.hi < other.hi or (self.hi == other.hi and (other.hi_incl or not self.hi_incl)))
        )
        return lo_ok and hi_ok

    def meet(self, other: _Interval) -> _Interval:
        lo, lo_incl = self.lo, self.lo_incl
        if other.lo is not None and (lo is None or other.lo > lo or (other.lo == lo and not other.lo_incl)):
            lo, lo_incl = other.lo, other.lo_incl
        hi, hi_incl = self.hi, self.hi_incl
        if other.hi is not None and (hi is None or other.hi < hi or (other.hi == hi and not other.hi_incl)):
            hi, hi_incl = other.hi, other.hi_incl
        return _Interval(lo, lo_incl, hi, hi_incl)


_ALL = _Interval(None, False, None, False)


def _next_release(release: tuple[int, ...]) -> Version:
    return Version(".".join(map(str, (*release[:-1], release[-1] + 1))))


def _clause(spec: Specifier) -> tuple[_Interval, bool] | None:
    """A specifier clause as an interval, and whether it is negated (``!=``). None: not representable."""
    op, text = spec.operator, spec.version
    if text.endswith(".*"):
        base = Version(text[:-2])
        interval = _Interval(base, True, _next_release(base.release), False)
        return (interval, op == "!=") if op in ("==", "!=") else None
    v = Version(text)
    table = {
        ">=": _Interval(v, True, None, False),
        ">": _Interval(v, False, None, False),
        "<=": _Interval(None, False, v, True),
        "<": _Interval(None, False, v, False),
        "==": _Interval(v, True, v, True),
        "!=": _Interval(v, True, v, True),
    }
    if op == "~=":
        return _Interval(v, True, _next_release(v.release[:-1]), False), False
    if op not in table:
        return None
    return table[op], op == "!="


def _pin_interval(text: str) -> _Interval | None:
    """An exact version is a point; a range pin (``>=5.12``, ``==4.15.*``) the interval of its clauses."""
    try:
        v = Version(text)
        return _Interval(v, True, v, True)
    except InvalidVersion:
        pass
    try:
        spec = SpecifierSet(text)
    except InvalidSpecifier:
        return None
    interval = _ALL
    for clause in spec:
        parsed = _clause(clause)
        if parsed is None:
            return None
        part, negated = parsed
        if not negated:  # a != clause only narrows the range: leaving it out keeps the answer sound
            interval = interval.meet(part)
    return interval


def version_verdict(pin: str, spec: str) -> Verdict:
    """Is every version the pin allows in spec (True), none of them (False), or some (None)?"""
    pinned = _pin_interval(pin)
    if pinned is None:
        return None
    if pinned.point() and pinned.lo is not None:
        return pinned.lo in SpecifierSet(spec, prereleases=True)
    verdicts = []
    for clause in SpecifierSet(spec):
        parsed = _clause(clause)
        if parsed is None:
            return None
        interval, negated = parsed
        inside, outside = pinned.within(interval), pinned.meet(interval).empty()
        if negated:
            inside, outside = outside, inside
        verdicts.append(True if inside else False if outside else None)
    if False in verdicts:
        return False
    return None if None in verdicts else True


# ---- ops ----------------------------------------------------------------------------------------


def _version(facts: Facts, args: Mapping[str, Any]) -> Outcome:
    value = facts.get(args["pin"])
    name = args["pin"]
    if value is _MISSING:  # the component (or key) is absent: nothing is installed that could match
        return False, f"{name} is absent"
    if value is None:  # present without a declared version: cannot tell
        return None, f"{name} is unset (wanted {args['spec']})"
    verdict = version_verdict(str(value), args["spec"])
    word = {True: "matches", False: "does not match", None: "may or may not match"}[verdict]
    return verdict, f"{name} {value} {word} {args['spec']}"


def _equals(facts: Facts, args: Mapping[str, Any]) -> Outcome:
    value = facts.get(args["pin"])
    ok = value is not _MISSING and value is not None and str(value) == str(args["value"])
    return ok, f"{args['pin']} = {show(value)} ({'is' if ok else 'not'} {args['value']})"


def _one_of(facts: Facts, args: Mapping[str, Any]) -> Outcome:
    value = facts.get(args["pin"])
    ok = value is not _MISSING and value is not None and str(value) in {str(v) for v in args["values"]}
    return ok, f"{args['pin']} = {show(value)} ({'in' if ok else 'not in'} {show(args['values'])})"


def _present(facts: Facts, args: Any) -> Outcome:
    value = facts.get(args)
    ok = value is not _MISSING and value is not None and value != "" and value != [] and value != {}
    return ok, f"{args} is {'set' if ok else 'unset'}"


def _contains(facts: Facts, args: Mapping[str, Any]) -> Outcome:
    value = facts.get(args["pin"])
    if value is _MISSING or value is None:
        return False, f"{args['pin']} is unset"
    ok = (str(args["value"]) in value) if isinstance(value, str) else (args["value"] in list(value))
    return ok, f"{args['pin']} {'contains' if ok else 'lacks'} {args['value']}"


def _subset(facts: Facts, args: Mapping[str, Any]) -> Outcome:
    items, pool = facts.get(args["pin"]), facts.get(args["of"])
    items = [] if items is _MISSING or items is None else list(items)
    pool = [] if pool is _MISSING or pool is None else list(pool)
    extra = [i for i in items if i not in pool]
    if extra:
        return False, f"{args['pin']} {show(extra)} not in {args['of']} {show(pool)}"
    return True, f"{args['pin']} {show(items)} within {args['of']} {show(pool)}"


def _same(facts: Facts, args: list[str]) -> Outcome:
    a, b = (facts.get(p) for p in args)
    ok = a is not _MISSING and a == b
    return ok, f"{args[0]} = {show(a)}, {args[1]} = {show(b)}"


def _matches(facts: Facts, args: Mapping[str, Any]) -> Outcome:
    value = facts.get(args["pin"])
    items = [] if value is _MISSING or value is None else [value] if isinstance(value, str) else list(value)
    hits = [i for i in items if fnmatch.fnmatchcase(str(i), args["pattern"])]
    if hits:
        return True, f"{args['pin']} has {show(hits)} matching {args['pattern']}"
    return False, f"nothing in {args['pin']} matches {args['pattern']}"


def _patches_apply(facts: Facts, args: Mapping[str, Any]) -> Outcome:
    bad = [r for s, r in facts.patch_status.values() if s in ("drop", "mismatch")]
    unknown = [f"{pid}: {r}" for pid, (s, r) in facts.patch_status.items() if s == "unknown"]
    if bad:
        return False, "; ".join(bad)
    if unknown:
        return None, "; ".join(unknown)
    return True, f"{len(facts.patch_status)} patches target their pins"


def _tags_match_versions(facts: Facts, args: Mapping[str, Any]) -> Outcome:
    wrong = []
    for name, comp in sorted(facts.data.get("components", {}).items()):
        tag = _TAG.match(comp.get("ref") or "") if comp.get("source") == "git" else None
        if tag and comp.get("version") and Version(tag.group(1)) != _safe_version(comp["version"]):
            wrong.append(f"{name} ref {comp['ref']} vs version {comp['version']}")
    if wrong:
        return False, "; ".join(wrong)
    return True, "git tags agree with declared versions"


def _dependencies_declared(facts: Facts, args: Mapping[str, Any]) -> Outcome:
    where = facts.data.get("file") or facts.data.get("name") or "recipe"
    bare = [
        name
        for name, comp in sorted(facts.data.get("components", {}).items())
        if comp.get("source") == "git"
        and not comp.get("no_deps")
        and not comp.get("setup_script")  # `python setup.py install`: the same step locked or not
        and not (comp.get("requirements") or comp.get("requirements_from") or comp.get("requires"))
    ]
    if bare:
        return False, "; ".join(
            f"{where}: component {name} (git) declares no dependencies: no requirements:, "
            "requirements_from: or requires: (a locked build would install it --no-deps without them)"
            for name in bare
        )
    return True, "every git component declares its dependencies (or installs with no_deps)"


def _requirement_name(text: str) -> str:
    return _canonical(re.split(r"[\s\[<>=!~;(@]", text.strip(), maxsplit=1)[0])


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declares(facts: Facts, args: Mapping[str, Any]) -> Outcome:
    components = facts.data.get("components", {})
    owner = components.get(args["component"]) or {}
    source = owner.get("requirements_from") or owner.get("requirements")
    if source:  # a release standing in for it, or a file of its tree: the lock resolves what they list
        return True, f"{args['component']}'s requirements come from {source}"
    declared = {_canonical(c.get("package") or n) for n, c in components.items()}
    declared |= {_canonical(p["name"]) for p in (facts.data.get("base") or {}).get("provides") or ()}
    for comp in components.values():
        declared |= {_requirement_name(r) for r in comp.get("requires") or ()}
    missing = [p for p in args["packages"] if _canonical(p) not in declared]
    if missing:
        return False, f"{args['component']} needs {', '.join(missing)}, which no declared source installs"
    return True, f"{args['component']}'s {len(args['packages'])} runtime needs are declared"


def _safe_version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _all(facts: Facts, args: list[Any]) -> Outcome:
    outcomes = [evaluate(c, facts) for c in args]
    for wanted in (False, None):
        picked = [t for v, t in outcomes if v is wanted]
        if picked:
            return wanted, "; ".join(picked)
    return True, "; ".join(t for _, t in outcomes)


def _any(facts: Facts, args: list[Any]) -> Outcome:
    outcomes = [evaluate(c, facts) for c in args]
    for wanted in (True, None):
        picked = [t for v, t in outcomes if v is wanted]
        if picked:
            return wanted, picked[0] if wanted else "; ".join(picked)
    return False, "; ".join(t for _, t in outcomes)


def _not(facts: Facts, args: Any) -> Outcome:
    verdict, text = evaluate(args, facts)
    return (None if verdict is None else not verdict), text


Op = Callable[[Facts, Any], Outcome]
OPS: dict[str, Op] = {
    "version": _version,
    "equals": _equals,
    "one_of": _one_of,
    "present": _present,
    "contains": _contains,
    "subset": _subset,
    "same": _same,
    "matches": _matches,
    "patches_apply": _patches_apply,
    "tags_match_versions": _tags_match_versions,
    "dependencies_declared": _dependencies_declared,
    "declares": _declares,
    "all": _all,
    "any": _any,
    "not": _not,
}
# Argument shape per op: required keys of a mapping, or the Python type of the argument.
SHAPES: dict[str, tuple[str, ...] | type] = {
    "version": ("pin", "spec"),
    "equals": ("pin", "value"),
    "one_of": ("pin", "values"),
    "present": str,
    "contains": ("pin", "value"),
    "subset": ("pin", "of"),
    "same": list,
    "matches": ("pin", "pattern"),
    "patches_apply": dict,
    "tags_match_versions": dict,
    "dependencies_declared": dict,
    "declares": ("component", "packages"),
    "all": list,
    "any": list,
    "not": dict,
}


def evaluate(condition: Any, facts: Facts) -> Outcome:
    if isinstance(condition, list):
        return _all(facts, condition)
    ((op, args),) = condition.items()
    return OPS[op](facts, args)


def check_condition(condition: Any, where: str) -> list[str]:
    """Problems with a condition's shape (empty list: fine). Run once at load, so evaluation needs no checks."""
    if isinstance(condition, list):
        return [p for i, c in enumerate(condition) for p in check_condition(c, f"{where}[{i}]")]
    if not isinstance(condition, dict) or len(condition) != 1:
        return [f"{where}: a condition is a mapping with exactly one op ({', '.join(OPS)})"]
    ((op, args),) = condition.items()
    if op not in OPS:
        return [f"{where}: unknown op {op!r} (known: {', '.join(OPS)})"]
    shape = SHAPES[op]
    if isinstance(shape, type):
        if not isinstance(args, shape):
            return [f"{where}.{op}: expected a {shape.__name__}, got {type(args).__name__}"]
    elif not isinstance(args, dict) or set(args) != set(shape):
        return [f"{where}.{op}: expected keys {', '.join(shape)}"]
    if op == "same" and len(args) != 2:
        return [f"{where}.same: expected two pins"]
    if op == "version":
        try:
            SpecifierSet(args["spec"])
        except InvalidSpecifier:
            return [f"{where}.version: {args['spec']!r} is not a PEP 440 specifier"]
    if op in ("all", "any"):
        return [p for i, c in enumerate(args) for p in check_condition(c, f"{where}.{op}[{i}]")]
    if op == "not":
        return check_condition(args, f"{where}.not")
    return []
