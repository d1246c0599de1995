"""Compatibility rules: every shipped rule fails and passes on its own examples; loading, enforcing,
ignoring and the validated-together sets."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rocmstack.errors import InputError, RecipeError, RuleFailure
from rocmstack.recipe.load import (
    _raw_with_parents,
    apply_overrides,
    find_recipe,
    load_recipe,
    parse_override,
    recipe_files,
    validate,
)
from rocmstack.recipe.resolve import Resolved, resolve
from rocmstack.rules import enforce, evaluate_rules, load_rules
from rocmstack.rules.engine import rules_dir

DEFAULT_RECIPE = "verl-0.9.0-rocm10"
RULES = load_rules()
ISSUE_RULES = {  # issue 3 "Cover at least these", in its order
    "verl-vllm-floor",
    "vllm-rocm-python",
    "vllm-torch-2.12-validated",
    "vllm-sleep-mode",
    "gpu-arch-in-torch",
    "patches-apply",
    "sglang-rmsnorm-no-aiter",
    "sglang-attention-triton",
    "expandable-segments-custom-allreduce",
    "cupy-rocm",
    "verl-0.9-megatron-core",
}


def example_resolved(example: dict) -> Resolved:
    """A shipped recipe with the example's --set overrides, removed keys (``unset``) and archs applied.
    Archs bypass parse_archs on purpose: rules must also hold for Resolved objects built elsewhere."""
    path = find_recipe(example.get("recipe", DEFAULT_RECIPE))
    raw = _raw_with_parents(path, None)
    for dotted in example.get("unset", []):
        *parents, leaf = dotted.split(".")
        node = raw
        for part in parents:
            node = node[part]
        del node[leaf]
    overrides = tuple(example.get("set", []))
    recipe = validate(apply_overrides(raw, [parse_override(o) for o in overrides]), str(path))
    archs = example.get("archs")
    gpu_archs = tuple(sorted(archs.split(";"))) if archs else tuple(sorted(recipe.default_gpu_archs))
    return Resolved(recipe=recipe, source=path, gpu_archs=gpu_archs, overrides=overrides)


def _cases():
    for rule in RULES:
        for kind in ("pass", "fail"):
            for i, example in enumerate(rule.examples.get(kind, [])):
                yield pytest.param(rule, kind, example, id=f"{rule.id}:{kind}{i}")


@pytest.mark.parametrize(("rule", "kind", "example"), list(_cases()))
def test_rule_example(rule, kind, example):
    results = {r.id: r for r in evaluate_rules(example_resolved(example), rules=(rule,))}
    got = results[rule.id]
    if kind == "pass":
        assert got.status == "pass", got.reason
    else:
        assert got.status == rule.severity, got.reason
        assert not got.reason.startswith(("cannot decide", "may apply")), got.reason


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_every_rule_has_a_failing_and_a_passing_example_and_a_source(rule):
    assert rule.examples.get("pass") and rule.examples.get("fail"), f"{rule.id}: needs pass and fail examples"
    assert rule.source.startswith("https://") and rule.fix and rule.description


def test_the_rule_set_covers_the_issue_and_more():
    ids = {r.id for r in RULES}
    assert ids >= ISSUE_RULES
    assert len(ids) >= 15
    assert {p.stem for p in rules_dir().glob("*.yaml")} >= {"vllm", "verl", "sglang", "platform", "env"}


@pytest.mark.parametrize("name", sorted(recipe_files()))
def test_shipped_recipes_pass_every_rule(name):
    recipe, path = load_recipe(name)
    results = enforce(resolve(recipe, path, None))
    assert not [r for r in results if r.status == "fail"]
    assert len(results) == len(RULES) + len(recipe.validated_together)


def test_enforce_raises_naming_the_rule_and_fix():
    resolved = example_resolved({"set": ["base.python=3.11"]})
    with pytest.raises(RuleFailure) as err:
        enforce(resolved)
    line = err.value.one_line()
    assert "rule vllm-rocm-python failed: vLLM on ROCm needs Python 3.12, the base has Python 3.11" in line
    assert "--ignore-rule vllm-rocm-python" in line
    assert int(err.value.exit_code) == 1
    assert {r.id: r.status for r in err.value.results}["vllm-rocm-python"] == "fail"


def test_ignore_turns_a_failure_into_ignored_and_says_what_it_was():
    resolved = example_resolved({"set": ["base.python=3.11"]})
    results = {r.id: r for r in enforce(resolved, ignore=["vllm-rocm-python"])}
    assert results["vllm-rocm-python"].status == "skip"
    assert "was fail: vLLM on ROCm needs Python 3.12" in results["vllm-rocm-python"].reason


def test_ignoring_an_unknown_rule_is_an_input_error():
    recipe, path = load_recipe(DEFAULT_RECIPE)
    with pytest.raises(InputError, match="--ignore-rule vllm-rocm-pyton: no such rule"):
        enforce(resolve(recipe, path, None), ignore=["vllm-rocm-pyton"])


def test_validated_together_warns_revalidate_when_a_member_moves():
    resolved = example_resolved({"set": ["vllm.ref=v0.28.0", "vllm.version=0.28.0"]})
    results = {r.id: r for r in enforce(resolved)}
    row = results["validated:sglang-on-primus-vllm"]
    assert row.status == "warn"
    assert row.reason == "re-validate sglang: components.vllm.ref v0.27.0 -> v0.28.0"
    untouched = {r.id: r for r in enforce(example_resolved({"set": ["ray.version=2.58.0"]}))}
    assert untouched["validated:sglang-on-primus-vllm"].status == "pass"
    moved_base = {r.id: r for r in enforce(example_resolved({"set": ["base.tag=v26.8"]}))}
    assert (
        moved_base["validated:sglang-on-primus-vllm"].reason == "re-validate sglang: base.tag v26.7 -> v26.8"
    )


def test_validated_together_can_be_ignored():
    resolved = example_resolved({"set": ["vllm.ref=v0.28.0", "vllm.version=0.28.0"]})
    results = {r.id: r for r in enforce(resolved, ignore=["validated:sglang-on-primus-vllm"])}
    assert results["validated:sglang-on-primus-vllm"].status == "skip"


def test_range_pins_decide_patch_applicability():
    # z3-solver is pinned ==4.15.*: the whole range lies inside the patch's >=4.15,<4.16, so it applies.
    ok = {r.id: r for r in enforce(example_resolved({}))}
    assert ok["patches-apply"].status == "pass"
    bad = {r.id: r for r in evaluate_rules(example_resolved({"set": ["z3-solver.version===4.16.*"]}))}
    assert bad["patches-apply"].status == "fail"
    assert "z3-solver ==4.16.* is outside >=4.15,<4.16 (patch libz3-soname)" in bad["patches-apply"].reason


def test_fixed_upstream_patch_says_drop():
    results = {r.id: r for r in evaluate_rules(example_resolved({"set": ["sglang.version=0.5.20"]}))}
    assert results["patches-apply"].status == "fail"
    assert "drop patch sglang-qwen3-asr" in results["patches-apply"].reason


def _write_rules(tmp_path: Path, rules: list[dict], name: str = "x") -> Path:
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump({"rules": rules}))
    return tmp_path


GOOD = {
    "id": "r1",
    "description": "d",
    "severity": "fail",
    "source": "https://example.org/1",
    "fix": "f",
    "require": {"present": "base.python"},
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"colour": "red"}, "unknown key(s) colour"),
        ({"severity": "error"}, "severity 'error' must be fail or warn"),
        ({"source": "http://example.org"}, "must be an https URL"),
        ({"id": "R 1"}, "rule id 'R 1' must be lowercase"),
        ({"require": {"bogus": 1}}, "require: unknown op 'bogus'"),
        ({"when": {"version": {"pin": "a"}}}, "when.version: expected keys pin, spec"),
        ({"examples": {"pass": [{}], "flail": [{}]}}, "examples must be {pass: [...], fail: [...]}"),
        ({"message": ["x"]}, "message must be one line of text"),
    ],
)
def test_bad_rule_files_are_one_line_errors(tmp_path, change, message):
    with pytest.raises(RecipeError) as err:
        load_rules(_write_rules(tmp_path, [{**GOOD, **change}]))
    assert message in err.value.one_line() and str(tmp_path) in err.value.one_line()


def test_missing_fields_and_duplicate_ids_are_rejected(tmp_path):
    with pytest.raises(RecipeError, match="missing fix, require"):
        load_rules(_write_rules(tmp_path, [{k: v for k, v in GOOD.items() if k not in ("fix", "require")}]))
    _write_rules(tmp_path, [GOOD], "x")
    _write_rules(tmp_path, [GOOD], "y")
    with pytest.raises(RecipeError, match="rule id 'r1' is also defined in"):
        load_rules(tmp_path)


def test_warn_severity_and_message_placeholders(tmp_path):
    rule = {
        **GOOD,
        "severity": "warn",
        "message": "Python {base.python} lacks {detail}",
        "require": {"equals": {"pin": "base.python", "value": "3.13"}},
    }
    rules = load_rules(_write_rules(tmp_path, [rule]))
    recipe, path = load_recipe(DEFAULT_RECIPE)
    (got,) = [r for r in evaluate_rules(resolve(recipe, path, None), rules=rules) if r.id == "r1"]
    assert (got.status, got.reason) == ("warn", "Python 3.12 lacks base.python = 3.12 (not 3.13)")


def test_rules_page_lists_every_rule():
    page = (Path(__file__).resolve().parents[2] / "docs" / "rules-and-locks.md").read_text(encoding="utf-8")
    section = page.split("<!-- rules:begin -->", 1)[1].split("<!-- rules:end -->", 1)[0]
    missing = [r.id for r in RULES if f"| `{r.id}` |" not in section]
    assert not missing, f"add these rules to the rules table of docs/rules-and-locks.md: {missing}"
    assert f"All {len(RULES)} rules" in section


def _one(example: dict, rule_id: str):
    rule = next(r for r in RULES if r.id == rule_id)
    return evaluate_rules(example_resolved(example), rules=(rule,))[0]


def test_a_git_component_declaring_no_dependencies_is_refused_with_the_fix():
    """Issue #33: vime (git, no requirements) would lose its dependencies in a locked build: check names the
    file, the component, what is missing and how to declare it."""
    got = _one(
        {"recipe": "vime-megatron-vllm-rocm7.14", "unset": ["components.vime.requirements"]},
        "git-dependencies-declared",
    )
    assert got.status == "fail"
    assert "vime-megatron-vllm-rocm7.14.yaml: component vime (git) declares no dependencies" in got.reason
    assert "requirements: <file in the repo>" in got.fix and "requirements_from:" in got.fix


def test_sglang_built_no_deps_lists_its_runtime_needs_no_source_declares():
    got = _one({"unset": ["components.sglang.requires"]}, "sglang-runtime-needs")
    assert got.status == "fail"
    for name in ("fastapi", "uvicorn", "orjson", "pyzmq", "msgspec"):
        assert name in got.reason
    # transformers is a component of the recipe: declared, so never listed
    assert "transformers" not in got.reason
    partial = _one({"set": ["sglang.requires=[fastapi, uvicorn]"]}, "sglang-runtime-needs")
    assert partial.status == "fail" and "fastapi" not in partial.reason and "orjson" in partial.reason


@pytest.mark.parametrize("name", sorted(recipe_files()))
def test_every_shipped_recipe_declares_its_git_dependencies_and_sglangs_needs(name):
    ids = ("git-dependencies-declared", "sglang-runtime-needs")
    for rid in ids:
        got = _one({"recipe": name}, rid)
        assert got.status == "pass", f"{name}: {rid}: {got.reason}"
