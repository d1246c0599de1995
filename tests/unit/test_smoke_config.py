from __future__ import annotations

import pytest

from rocmstack.errors import ExitCode, InputError
from rocmstack.smoke.config import INJECT_EXPECTS, INJECTS, SmokeOptions, model_config


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
    assert set(INJECTS) == set(INJECT_EXPECTS)


def test_model_config_is_a_qwen3_with_untied_head():
    cfg = model_config("tiny", vocab_size=16, max_positions=64)
    assert cfg["model_type"] == "qwen3" and cfg["tie_word_embeddings"] is False
    assert cfg["num_hidden_layers"] == 2 and cfg["vocab_size"] == 16
