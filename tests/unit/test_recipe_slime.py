"""slime-rocm: the pins taken from slime's ROCm Dockerfile and its --ci-test framework smoke.

Pins read from THUDM/slime docker/Dockerfile.rocm_MI350-5 at commit
624b824a898ab0ec1fcb4d373004c7f3852bf515; patches from docker/amd_patch/latest/ at the same commit.
"""

from __future__ import annotations

from rocmstack.patches import applicability, load_patches
from rocmstack.recipe.load import find_recipe, load_recipe

SLIME_COMMIT = "624b824a898ab0ec1fcb4d373004c7f3852bf515"
RECIPE = load_recipe(str(find_recipe("slime-rocm")))[0]


def test_pins_from_slime_dockerfile():
    c = RECIPE.components
    assert (RECIPE.base.image, RECIPE.base.tag) == ("rocm/sgl-dev", "rocm7-vllm-20250904")
    assert RECIPE.gpu_archs == ("gfx950",)
    assert c["sglang"].ref == "v0.5.6" and c["sgl-kernel"].ref == "v0.5.6"
    assert c["sgl-kernel"].setup_script == "setup_rocm.py"
    assert c["megatron-lm"].ref == "48406695c4efcf1026a7ed70bb390793918dd97b"
    assert c["transformer-engine"].ref == "90c04bcdc3c109505b318f40a39680263af55edf"
    assert c["aiter"].ref == "v0.1.7.post2"
    assert c["ray"].version == "2.47.1" and set(c["ray"].extras) == {"data", "train", "tune", "serve"}
    assert c["torchao"].version == "0.9.0"
    assert c["pydra-config"].version == "0.0.15"
    assert c["click"].version == "8.2.1"
    assert c["slime"].ref == SLIME_COMMIT
    assert RECIPE.env["SGLANG_USE_AITER"] == "1" and RECIPE.env["NCCL_MIN_NCHANNELS"] == "112"


def test_megatron_patches_listed_in_slime_order_and_sglang_patch_left_out():
    assert RECIPE.patches == ("slime-megatron-fused-kernels", "slime-megatron")
    patches = load_patches()
    for pid in RECIPE.patches:
        diff = patches[pid].diff
        assert patches[pid].action == "unified-diff" and diff is not None
        assert SLIME_COMMIT in diff.url
        assert applicability(patches[pid], RECIPE.components["megatron-lm"])[0] == "ok"
    # made against SGLang 8ecf6b9d: not applicable to the v0.5.6 the recipe pins
    assert applicability(patches["slime-sglang"], RECIPE.components["sglang"])[0] == "mismatch"


def test_framework_smoke_runs_slime_with_ci_test():
    smoke = RECIPE.framework_smoke
    assert smoke is not None and smoke.framework == "slime"
    assert smoke.command[1] == "/opt/src/slime/train.py"
    assert "--ci-test" in smoke.command
    metrics = {(ch.metric, ch.op) for ch in smoke.checks}
    # the bound --ci-test asserts by default (--ci-train-rollout-logprob-abs-diff-threshold 0.1)
    assert ("train/train_rollout_logprob_abs_diff", "<=") in metrics
    bound = next(ch for ch in smoke.checks if ch.metric == "train/train_rollout_logprob_abs_diff")
    assert bound.value == 0.1
