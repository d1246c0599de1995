"""The config-only model folder the engines start from."""

from __future__ import annotations

import json

from rocmstack.gpu.model_dir import write_model_dir
from rocmstack.gpu.shapes import BUILTIN_SHAPES


def test_the_folder_holds_the_config_as_a_qwen3_decoder(tmp_path):
    model = write_model_dir(BUILTIN_SHAPES["qwen3-8b"], tmp_path / "m", "bfloat16")
    cfg = json.loads((model / "config.json").read_text())
    assert model == tmp_path / "m" and sorted(p.name for p in model.iterdir()) == ["config.json"]
    assert cfg["architectures"] == ["Qwen3ForCausalLM"] and cfg["torch_dtype"] == "bfloat16"
    assert {k: cfg[k] for k in BUILTIN_SHAPES["qwen3-8b"]} == dict(BUILTIN_SHAPES["qwen3-8b"])


def test_a_llama_config_gives_its_sizes_to_the_same_decoder(tmp_path):
    # The reference engine and the trainer model a Qwen3 decoder; the engines must run that one too.
    llama = dict(BUILTIN_SHAPES["qwen3-0.6b"]) | {"model_type": "llama"}
    cfg = json.loads((write_model_dir(llama, tmp_path) / "config.json").read_text())
    assert cfg["model_type"] == "qwen3" and cfg["hidden_size"] == llama["hidden_size"]
    assert "torch_dtype" not in cfg  # the smoke's engines are given their dtype at start


def test_transformers_reads_it_back_as_the_same_shape(tmp_path):
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(write_model_dir(BUILTIN_SHAPES["qwen3-0.6b"], tmp_path))
    assert type(cfg).__name__ == "Qwen3Config"
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.head_dim) == tuple(
        BUILTIN_SHAPES["qwen3-0.6b"][k] for k in ("hidden_size", "num_hidden_layers", "head_dim")
    )
