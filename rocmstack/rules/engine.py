"""Compatibility rules: load ``recipes/_rules/*.yaml``, evaluate them against resolved pins, enforce them.

A rule is data: id, description, severity, public source, fix, and two conditions in the language of
``rocmstack.rules.conditions`` -- ``when`` (does the rule apply to these pins?) and ``require`` (what must
hold if it does). No rule has code of its own. ``fixes`` (optional) lists ``{when, fix}`` alternatives: the
first whose condition holds for the recipe is the fix reported, so a hint never names a patch for a component
the recipe lacks; ``fix`` is the one used when none holds.

Outcome of one rule (``when`` / ``require`` are three-valued):
  when False                 -> pass  ("n/a: ...")
  require True               -> pass
  require None (undecidable) -> warn  ("cannot decide: ...")
  require False, when True   -> the rule's severity (fail or warn)
  require False, when None   -> warn  ("may apply: ...")
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from packaging.utils import canonicalize_name

from rocmstack.errors import InputError, RecipeError, RuleFailure, did_you_mean
from rocmstack.patches import Patch, applicability, load_patches
from rocmstack.recipe.load import YAML_LOADER
from rocmstack.recipe.resolve import Resolved
from rocmstack.resources import recipes_dir
from rocmstack.rules.conditions import Facts, check_condition, evaluate, show, version_verdict
from rocmstack.status import Status

Severity = Literal["fail", "warn"]
_ID = re.compile(r"^[a-z0-9][a-z0-9.-]{0,63}$")
_URL = re.compile(r"^https://\S+$")
_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_.-]+)\}")
_KEYS = {
    "id",
    "description",
    "severity",
    "source",
    "fix",
    "fixes",
    "message",
    "when",
    "require",
    "refs",
    "examples",
}
TOGETHER_PREFIX = "validated:"


@dataclass(frozen=True, kw_only=True)
class Rule:
    id: str
    description: str
    severity: Severity
    source: str
    fix: str
    require: Any
    when: Any = None
    message: str | None = None
    refs: tuple[str, ...] = ()
    fixes: tuple[tuple[Any, str], ...] = ()  # (condition, fix): the first that holds replaces ``fix``
    domain: str = ""
    examples: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Result:
    id: str
    status: Status
    reason: str
    fix: str
    source: str
    severity: Severity = "fail"
    description: str = ""

    def to_json(self) -> dict[str, str]:
        return {
            "id": self.id,
            "status": str(self.status),
            "severity": self.severity,
            "reason": self.reason,
            "fix": self.fix,
            "source": self.source,
            "description": self.description,
        }


def rules_dir() -> Path:
    return recipes_dir() / "_rules"


def _parse_rule(raw: Any, origin: str, domain: str) -> Rule:
    if not isinstance(raw, dict):
        raise RecipeError(f"{origin}: a rule must be a mapping, got {type(raw).__name__}")
    rid = raw.get("id")
    where = f"{origin}: rule {rid!r}"
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise RecipeError(
            f"{where}: unknown key(s) {', '.join(unknown)}", fix=f"valid keys: {', '.join(sorted(_KEYS))}"
        )
    missing = sorted({"id", "description", "severity", "source", "fix", "require"} - set(raw))
    if missing:
        raise RecipeError(f"{where}: missing {', '.join(missing)}")
    if not isinstance(rid, str) or not _ID.fullmatch(rid):
        raise RecipeError(f"{origin}: rule id {rid!r} must be lowercase letters, digits, '.' and '-'")
    if raw["severity"] not in ("fail", "warn"):
        raise RecipeError(f"{where}: severity {raw['severity']!r} must be fail or warn")
    for url in (raw["source"], *raw.get("refs", ())):
        if not isinstance(url, str) or not _URL.fullmatch(url):
            raise RecipeError(f"{where}: source {url!r} must be an https URL of a public issue, PR or doc")
    if not isinstance(raw.get("message", ""), str):
        raise RecipeError(f"{where}: message must be one line of text")
    examples = raw.get("examples") or {}
    if (
        not isinstance(examples, dict)
        or set(examples) - {"pass", "fail"}
        or not all(isinstance(v, list) and all(isinstance(e, dict) for e in v) for v in examples.values())
    ):
        raise RecipeError(
            f"{where}: examples must be {{pass: [...], fail: [...]}} with one mapping per example"
        )
    problems = check_condition(raw["require"], f"{where}: require")
    if raw.get("when") is not None:
        problems += check_condition(raw["when"], f"{where}: when")
    fixes = raw.get("fixes") or []
    if not isinstance(fixes, list) or not all(
        isinstance(f, dict) and set(f) == {"when", "fix"} and isinstance(f["fix"], str) for f in fixes
    ):
        raise RecipeError(f"{where}: fixes must be a list of {{when: <condition>, fix: <text>}} mappings")
    for i, alternative in enumerate(fixes):
        problems += check_condition(alternative["when"], f"{where}: fixes[{i}].when")
    if problems:
        raise RecipeError(problems[0])
    return Rule(
        id=rid,
        description=str(raw["description"]),
        severity=raw["severity"],
        source=raw["source"],
        fix=str(raw["fix"]),
        require=raw["require"],
        when=raw.get("when"),
        message=raw.get("message"),
        refs=tuple(raw.get("refs", ())),
        fixes=tuple((f["when"], f["fix"]) for f in fixes),
        domain=domain,
        examples=raw.get("examples") or {},
    )


def load_rules(directory: Path | None = None) -> tuple[Rule, ...]:
    """Every rule of every ``*.yaml`` in the rules folder, in file then document order; ids are unique."""
    root = directory or rules_dir()
    rules: list[Rule] = []
    seen: dict[str, str] = {}
    for path in sorted(root.glob("*.yaml")):
        try:
            data = yaml.load(path.read_text(encoding="utf-8"), Loader=YAML_LOADER)
        except (OSError, yaml.YAMLError) as exc:
            raise RecipeError(f"{path}: cannot read rules: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
            raise RecipeError(f"{path}: expected a mapping with a 'rules' list")
        for raw in data["rules"]:
            rule = _parse_rule(raw, str(path), path.stem)
            if rule.id in seen:
                raise RecipeError(f"{path}: rule id {rule.id!r} is also defined in {seen[rule.id]}")
            seen[rule.id] = str(path)
            rules.append(rule)
    return tuple(rules)


def _patch_status(resolved: Resolved, patches: Mapping[str, Patch]) -> dict[str, tuple[str, str]]:
    components = resolved.recipe.components
    status: dict[str, tuple[str, str]] = {}
    for pid in resolved.recipe.patches:
        patch = patches.get(pid)
        if patch is None:
            status[pid] = (
                "mismatch",
                f"unknown patch {pid}: {did_you_mean(pid, patches)}no {pid}.yaml in the patch folder; for a "
                "patch of your own, name its folder with the recipe's patches_dir field or --patches-dir",
            )
            continue
        comp = components.get(patch.component)
        if comp is None:
            status[pid] = (
                "mismatch",
                f"patch {pid} targets component {patch.component}, which the recipe lacks",
            )
            continue
        state, reason = applicability(patch, comp)
        pinned = comp.version or ""
        # applicability() only compares exact versions; a range pin can still be decided when the whole range
        # lies inside (or outside) what the patch was made for.
        if state == "unknown" and pinned and patch.applies_to.versions:
            if patch.fixed_in and version_verdict(pinned, f">={patch.fixed_in}") is True:
                state, reason = (
                    "drop",
                    f"{patch.component} {pinned} already contains the fix: drop patch {pid}",
                )
            else:
                verdict = version_verdict(pinned, patch.applies_to.versions)
                if verdict is not None:
                    state = "ok" if verdict else "mismatch"
                    word = "within" if verdict else "outside"
                    reason = f"{patch.component} {pinned} is {word} {patch.applies_to.versions} (patch {pid})"
        if state == "mismatch" and pid not in reason:
            reason = f"patch {pid}: {reason}"
        status[pid] = (state, reason)
    return status


def facts_of(resolved: Resolved, patches: Mapping[str, Patch]) -> Facts:
    """The recipe as nested data (the same dotted paths as --set) plus derived facts:
    ``archs`` (the archs of this build), ``packages`` (every component's distribution name, normalised) and
    ``installed`` (those rocmstack installs: pypi and git) and ``versions`` (normalised package name -> version)."""
    recipe = resolved.recipe
    data = recipe.model_dump(mode="json", by_alias=True)
    data["archs"] = list(resolved.gpu_archs)
    data["file"] = _shown(resolved.source)
    data["packages"] = sorted(canonicalize_name(c.package or n) for n, c in recipe.components.items())
    data["installed"] = sorted(
        canonicalize_name(c.package or n) for n, c in recipe.components.items() if c.source in ("pypi", "git")
    )
    data["versions"] = {
        canonicalize_name(c.package or n): c.version for n, c in recipe.components.items() if c.version
    }
    return Facts(data=data, patch_status=_patch_status(resolved, patches))


def _shown(path: Path) -> str:
    """A recipe file as a message names it: relative to the current folder where it lies below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def _fill(template: str, facts: Facts, detail: str) -> str:
    def sub(match: re.Match[str]) -> str:
        key = match.group(1)
        return detail if key == "detail" else show(facts.get(key))

    return _PLACEHOLDER.sub(sub, template)


def fix_for(rule: Rule, facts: Facts) -> str:
    """The fix this recipe can apply: the first ``fixes`` alternative whose condition holds, else ``fix``."""
    return next((text for condition, text in rule.fixes if evaluate(condition, facts)[0] is True), rule.fix)


def judge(rule: Rule, facts: Facts) -> Result:
    fix = fix_for(rule, facts)

    def result(status: Status, reason: str) -> Result:
        return Result(
            id=rule.id,
            status=status,
            reason=reason,
            fix=fix,
            source=rule.source,
            severity=rule.severity,
            description=rule.description,
        )

    applies, when_text = evaluate(rule.when, facts) if rule.when is not None else (True, "")
    if applies is False:
        return result(Status.PASS, f"n/a: {when_text}")
    holds, text = evaluate(rule.require, facts)
    if holds:
        return result(Status.PASS, text)
    if holds is None:
        return result(Status.WARN, f"cannot decide: {text}")
    reason = _fill(rule.message, facts, text) if rule.message else text
    if applies is None:
        return result(Status.WARN, f"may apply ({when_text}): {reason}")
    return result(Status(rule.severity), reason)


def together(resolved: Resolved, facts: Facts) -> list[Result]:
    """One row per validated-together set: warn "re-validate X" when a member no longer has its recorded value."""
    out = []
    for vset in resolved.recipe.validated_together:
        moved = []
        for path, recorded in sorted(vset.members.items()):
            now = facts.get(path)
            if show(now) != recorded:
                moved.append(f"{path} {recorded} -> {show(now)}")
        base: dict[str, Any] = {
            "id": f"{TOGETHER_PREFIX}{vset.id}",
            "source": vset.source,
            "severity": "warn",
            "description": f"{', '.join(sorted(vset.members))} were validated together ({vset.note or vset.id})",
            "fix": f"re-validate {vset.revalidate} with the new values,"
            f" then record them in validated_together.{vset.id}",
        }
        if moved:
            out.append(
                Result(
                    status=Status.WARN, reason=f"re-validate {vset.revalidate}: {'; '.join(moved)}", **base
                )
            )
        else:
            out.append(Result(status=Status.PASS, reason=f"{len(vset.members)} members as validated", **base))
    return out


def evaluate_rules(
    resolved: Resolved,
    *,
    ignore: Iterable[str] = (),
    rules: tuple[Rule, ...] | None = None,
    patches: Mapping[str, Patch] | None = None,
) -> list[Result]:
    """Every rule (and validated-together set) against one resolved recipe, in rule order. Never raises on a
    failing rule; unknown ``ignore`` ids are an InputError."""
    rules = load_rules() if rules is None else rules
    facts = facts_of(resolved, load_patches() if patches is None else patches)
    results = [judge(rule, facts) for rule in rules] + together(resolved, facts)
    ignored = set(ignore)
    known = {r.id for r in results}
    unknown = sorted(ignored - known)
    if unknown:
        raise InputError(
            f"--ignore-rule {unknown[0]}: no such rule", fix=f"rule ids: {', '.join(sorted(known))}"
        )
    return [
        Result(
            id=r.id,
            status=Status.SKIP,
            reason=f"ignored by --ignore-rule (was {r.status}: {r.reason})",
            fix=r.fix,
            source=r.source,
            severity=r.severity,
            description=r.description,
        )
        if r.id in ignored
        else r
        for r in results
    ]


def enforce(
    resolved: Resolved,
    ignore: Iterable[str] = (),
    *,
    rules: tuple[Rule, ...] | None = None,
    patches: Mapping[str, Patch] | None = None,
) -> list[Result]:
    """evaluate_rules, raising RuleFailure (exit 1) naming the first failed rule when any rule fails."""
    results = evaluate_rules(resolved, ignore=ignore, rules=rules, patches=patches)
    failed = [r for r in results if r.status == "fail"]
    if failed:
        first = failed[0]
        more = (
            f" (and {len(failed) - 1} more: {', '.join(r.id for r in failed[1:])})" if len(failed) > 1 else ""
        )
        exc = RuleFailure(
            f"{resolved.recipe.name}: rule {first.id} failed: {first.reason}{more}",
            fix=f"{first.fix}; or --ignore-rule {first.id}",
        )
        exc.results = results  # type: ignore[attr-defined]  # the caller reports every result of the gate
        raise exc
    return results
