from __future__ import annotations

import pytest

from rocmstack.errors import ExitCode, InputError
from rocmstack.smoke.config import (
    ENGINE_INJECT_EXPECTS,
    INJECT_EXPECTS,
    INJECTS,
    SmokeOptions,
    expected_failure,
    model_config,
)


def test_defaults_validate():
    assert SmokeOptions().validated().placement == "colocated"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("placement", "spread", "--placement 'spread' is not one of colocated, split"),
        ("device", "rocm", "--device 'rocm'"),
        ("inject", "bitflip", "--inject 'bitflip' is not one of skip-sync"),
        ("steps", 0, "--steps must be >= 1"),
        ("group_size", 1, "SmokeOptions.group_size must be >= 2"),
        ("minibatches", 3, "SmokeOptions.minibatches must divide"),
        ("top_p", 0.0, "SmokeOptions.top_p"),
    ],
)
def test_bad_options_name_the_field(field, value, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(")) as err:
        SmokeOptions(**{field: value}).validated()
    assert err.value.exit_code == ExitCode.USAGE


def test_every_inject_has_an_expected_criterion():
    # logprob-mismatch needs an engine rollout; every other fault is named for both kinds of rollout
    assert set(INJECTS) - {"logprob-mismatch"} == set(INJECT_EXPECTS)
    assert set(INJECTS) == set(ENGINE_INJECT_EXPECTS)
    assert expected_failure("vllm", "stale-weights") == "engine_weight_version"
    assert expected_failure("vllm", "logprob-mismatch") == "rollout_logprob_diff"
    assert expected_failure("reference", "stale-weights") == "sync_canary"


def test_engine_rollouts_refuse_the_tiny_shape_vllm_cpu_cannot_run():
    with pytest.raises(InputError, match="head_dim 16"):
        SmokeOptions(rollout="vllm", shape="tiny").validated()


def test_model_config_is_a_qwen3_with_untied_head():
    cfg = model_config("tiny", vocab_size=16, max_positions=64)
    assert cfg["model_type"] == "qwen3" and cfg["tie_word_embeddings"] is False
    assert cfg["num_hidden_layers"] == 2 and cfg["vocab_size"] == 16


def test_actor_threads_are_the_two_actors_share_of_the_cores():
    from rocmstack.smoke.runner import actor_threads

    assert [actor_threads(n) for n in (1, 2, 3, 4, 6, 8, 64)] == [1, 1, 1, 2, 3, 4, 4]
    assert actor_threads() >= 1
