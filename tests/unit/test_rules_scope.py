"""A rule reaches only the recipes its source speaks of, and the fix it prints is one the recipe can apply:
a warning must be clearable by its own hint."""

from __future__ import annotations

import re

import pytest

from rocmstack.errors import RecipeError
from rocmstack.patches import load_patches
from rocmstack.recipe.load import load_recipe, recipe_files
from rocmstack.recipe.resolve import resolve
from rocmstack.rules import evaluate_rules
from rocmstack.rules.engine import load_rules

VIME = "vime-megatron-vllm-rocm7.14"
VERL = "verl-0.9.0-rocm10"
_PATCH = re.compile(r"\bpatch ([a-z0-9][a-z0-9-]*)")


def _results(name: str, *overrides: str) -> dict:
    recipe, path = load_recipe(name, overrides)
    return {r.id: r for r in evaluate_rules(resolve(recipe, path, None, tuple(overrides)))}


@pytest.mark.parametrize("name", sorted(recipe_files()))
def test_every_patch_a_hint_names_targets_a_component_of_the_recipe(name):
    recipe, _ = load_recipe(name)
    patches = load_patches()
    for result in _results(name).values():
        if result.status == "pass":
            continue
        for pid in _PATCH.findall(result.fix):
            assert pid in patches, f"{result.id}: fix names unknown patch {pid}"
            assert patches[pid].component in recipe.components, (
                f"{name}: {result.id} says to apply patch {pid}, which targets"
                f" {patches[pid].component}, a component {name} lacks: {result.fix}"
            )


def test_vimes_ipc_warning_is_cleared_by_the_fix_it_names():
    warned = _results(VIME)["ipc-legacy-custom-allreduce"]
    assert warned.status == "warn" and "verl-rollout-defaults" not in warned.fix, warned
    (applied,) = re.findall(r"--set (\S+?)\)?$", warned.fix)
    assert _results(VIME, applied)["ipc-legacy-custom-allreduce"].status == "pass"


def test_a_verl_recipe_is_still_told_the_patch_and_the_patch_clears_it():
    without = "patches=[rtld-local, amdsmi-install, libz3-soname, sglang-rmsnorm, sglang-qwen3-asr]"
    warned = _results(VERL, "env.HSA_ENABLE_IPC_MODE_LEGACY=1", without)["ipc-legacy-custom-allreduce"]
    assert warned.status == "warn" and "patch verl-rollout-defaults" in warned.fix, warned
    assert _results(VERL, "env.HSA_ENABLE_IPC_MODE_LEGACY=1")["ipc-legacy-custom-allreduce"].status == "pass"


def test_upstream_megatron_lm_without_vime_is_not_held_to_vimes_numpy_pin():
    # The vime recipe's Megatron-LM is NVIDIA/Megatron-LM at a commit; without vime beside it, it is upstream's.
    recipe, _ = load_recipe(VIME)
    assert recipe.components["megatron-lm"].url == "https://github.com/NVIDIA/Megatron-LM"
    upstream = _results(VERL, "mbridge.package=megatron-lm")["megatron-lm-numpy"]
    assert upstream.status == "pass" and upstream.reason.startswith("n/a"), upstream
    # ...and with vime it still is.
    assert _results(VIME, "numpy.version=2.3.5")["megatron-lm-numpy"].status == "fail"


def test_a_malformed_fixes_list_is_refused_at_load(tmp_path):
    rule = (
        "rules:\n  - id: r\n    description: d\n    severity: warn\n    source: https://example.org/x\n"
        "    fix: f\n    require: {present: env.X}\n    fixes: [{fix: only text}]\n"
    )
    (tmp_path / "bad.yaml").write_text(rule)
    with pytest.raises(RecipeError, match="fixes must be a list"):
        load_rules(tmp_path)
    (tmp_path / "bad.yaml").write_text(rule.replace("[{fix: only text}]", "[{when: {nope: 1}, fix: t}]"))
    with pytest.raises(RecipeError, match=r"fixes\[0\]\.when: unknown op 'nope'"):
        load_rules(tmp_path)
