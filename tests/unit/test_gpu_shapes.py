from __future__ import annotations

import json

import pytest

from rocmstack.errors import InputError
from rocmstack.gpu.shapes import BUILTIN_SHAPES, load_config, shape_from_config


def test_builtin_shapes_have_the_published_parameter_counts():
    # Qwen3-8B: 8.2B parameters (model card), untied head; Qwen3-0.6B: 0.6B, tied embeddings.
    big = shape_from_config(BUILTIN_SHAPES["qwen3-8b"])
    small = shape_from_config(BUILTIN_SHAPES["qwen3-0.6b"])
    assert 8.15e9 < big.total_params() < 8.25e9
    assert 0.59e9 < small.total_params() < 0.61e9
    # A decode step reads all of it except the embedding table, which the untied 8B head does not share.
    assert big.params_read_per_step() == big.total_params() - big.vocab_size * big.hidden_size
    assert small.params_read_per_step() == small.total_params()
    # 2 (k, v) x 36 layers x 8 kv heads x 128 dims x 2 bytes
    assert big.kv_bytes_per_token(2) == 2 * 36 * 8 * 128 * 2


def test_config_file_and_nested_rope_parameters(tmp_path):
    cfg = dict(BUILTIN_SHAPES["qwen3-0.6b"])
    del cfg["rope_theta"]
    cfg["rope_parameters"] = {"rope_type": "default", "rope_theta": 5e5}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    name, loaded = load_config(str(tmp_path))  # a directory holding config.json works too
    assert name == str(path)
    assert shape_from_config(loaded).rope_theta == 5e5


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"hidden_size": 0}, "hidden_size=0 must be a positive integer"),
        ({"num_key_value_heads": 5}, "not a multiple of num_key_value_heads=5"),
        ({"hidden_act": "gelu"}, "hidden_act='gelu'"),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "rope_type='yarn'"),
        ({"attention_bias": True}, "attention_bias=true"),
        ({"model_type": "mamba"}, "model_type='mamba'"),
        ({"rms_norm_eps": "tiny"}, "rms_norm_eps='tiny'"),
    ],
)
def test_bad_fields_are_named(patch, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace("[", r"\[")):
        shape_from_config(BUILTIN_SHAPES["qwen3-8b"] | patch)


def test_unknown_shape_and_bad_json(tmp_path):
    with pytest.raises(InputError, match="not a built-in shape"):
        load_config("qwen3-9000b")
    bad = tmp_path / "c.json"
    bad.write_text("{nope")
    with pytest.raises(InputError, match="cannot read JSON"):
        load_config(str(bad))
