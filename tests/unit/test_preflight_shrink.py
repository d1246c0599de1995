"""The shrunk model keeps the job's architecture: every key but the layer count and what must agree with it.
Configs: the published config.json fields (tests/fixtures/preflight/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocmstack.errors import InputError
from rocmstack.preflight.shrink import read_config, shrink_config, write_shrunk_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "preflight"


def _config(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.config.json").read_text())


def test_a_dense_model_keeps_everything_but_its_layers():
    real = _config("qwen3-8b")
    shrunk, before, changed = shrink_config(real)
    assert before == 36 and shrunk["num_hidden_layers"] == 2
    assert changed == ("num_hidden_layers: 36 -> 2",)
    assert {k: v for k, v in shrunk.items() if k != "num_hidden_layers"} == {
        k: v for k, v in real.items() if k != "num_hidden_layers"
    }


def test_an_moe_model_keeps_its_experts_and_routing():
    shrunk, before, _ = shrink_config(_config("qwen3-30b-a3b"))
    assert before == 48 and shrunk["num_hidden_layers"] == 2
    assert (shrunk["num_experts"], shrunk["num_experts_per_tok"], shrunk["moe_intermediate_size"]) == (
        128,
        8,
        768,
    )
    assert (shrunk["head_dim"], shrunk["num_key_value_heads"]) == (128, 4)


def test_deepseek_keeps_one_dense_and_one_moe_layer_and_its_fp8_config():
    real = _config("deepseek-v3")
    shrunk, before, changed = shrink_config(real)
    assert before == 61 and shrunk["num_hidden_layers"] == 2
    assert shrunk["first_k_dense_replace"] == 1  # layer 0 dense, layer 1 MoE, as the real model has both
    assert "first_k_dense_replace: 3 -> 1" in changed
    assert shrunk["quantization_config"] == real["quantization_config"]  # the engine picks its FP8 path
    assert (shrunk["kv_lora_rank"], shrunk["n_routed_experts"]) == (512, 256)  # MLA and 256 experts stay


def test_per_layer_lists_follow_the_count():
    real = {
        "model_type": "x",
        "num_hidden_layers": 6,
        "layer_types": ["sliding_attention", "full_attention"] * 3,
        "mlp_only_layers": [0, 3, 5],
        "text_config": {"num_hidden_layers": 6},
    }
    shrunk, _, changed = shrink_config(real)
    assert shrunk["layer_types"] == ["sliding_attention", "full_attention"]
    assert shrunk["mlp_only_layers"] == [0]
    assert shrunk["text_config"]["num_hidden_layers"] == 2
    assert "text_config.num_hidden_layers: 6 -> 2" in changed


def test_a_config_without_a_layer_count_is_one_clear_line(tmp_path):
    with pytest.raises(InputError, match="names no layer count"):
        shrink_config({"model_type": "x", "hidden_size": 8})
    bad = tmp_path / "config.json"
    bad.write_text("[1, 2]")
    with pytest.raises(InputError, match="not a JSON object"):
        read_config(bad)
    with pytest.raises(InputError, match="no such file"):
        read_config(tmp_path / "missing.json")


def test_random_weights_load_as_the_shrunk_architecture(tmp_path):
    from transformers import AutoModelForCausalLM

    tiny = dict(_config("qwen3-30b-a3b"), hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_experts=8, num_experts_per_tok=2,
                vocab_size=640)  # fmt: skip
    model = write_shrunk_model(tiny, tmp_path / "m", weights=True)
    assert model.weights and (tmp_path / "m" / "tokenizer.json").is_file()
    loaded = AutoModelForCausalLM.from_pretrained(str(tmp_path / "m"))
    assert loaded.config.num_hidden_layers == 2 and loaded.config.num_experts == 8
    fp8 = dict(tiny, quantization_config={"quant_method": "fp8", "activation_scheme": "dynamic"})
    quant = write_shrunk_model(fp8, tmp_path / "q", weights=True)
    assert "quantization_config" not in json.loads((tmp_path / "q" / "config.json").read_text())
    assert any("quantization_config: left out" in c for c in quant.changed)
    engine = write_shrunk_model(fp8, tmp_path / "e", weights=False)  # an engine reads no weights: kept
    assert engine.config["quantization_config"]["quant_method"] == "fp8"
    assert not list((tmp_path / "e").glob("*.safetensors"))


def test_random_weights_are_drawn_like_transformers_and_keep_tied_embeddings(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    tiny = dict(_config("qwen3-0.6b"), hidden_size=64, intermediate_size=96, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, vocab_size=640)  # fmt: skip
    write_shrunk_model(tiny, tmp_path / "m", weights=True)
    loaded = AutoModelForCausalLM.from_pretrained(str(tmp_path / "m"))
    q = loaded.model.layers[0].self_attn.q_proj.weight.float()
    assert abs(q.std().item() - 0.02) < 0.002 and q.abs().sum() > 0  # drawn, not zero, not uninitialised
    assert torch.equal(loaded.model.norm.weight.float(), torch.ones(64))  # norms start at 1
    assert loaded.lm_head.weight.data_ptr() == loaded.model.embed_tokens.weight.data_ptr()  # still tied
    logits = loaded(torch.tensor([[1, 2, 3]])).logits
    assert torch.isfinite(logits).all()
    # two layers differ: each parameter starts at its own place in the random block
    k0, k1 = (loaded.model.layers[i].self_attn.k_proj.weight for i in (0, 1))
    assert not torch.equal(k0, k1)


def test_a_model_whose_checkpoint_keeps_a_buffer_is_built_for_real(tmp_path):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig, PreTrainedModel

    class BufConfig(PretrainedConfig):
        model_type = "rocmstack-test-buffer"

        def __init__(self, num_hidden_layers: int = 2, vocab_size: int = 640, **kw):
            self.num_hidden_layers, self.vocab_size = num_hidden_layers, vocab_size
            super().__init__(**kw)

    class BufModel(PreTrainedModel):
        config_class = BufConfig

        def __init__(self, config):
            super().__init__(config)
            self.embed = torch.nn.Embedding(config.vocab_size, 8)
            self.register_buffer("scale", torch.full((8,), 3.0), persistent=True)
            self.post_init()

    AutoConfig.register("rocmstack-test-buffer", BufConfig, exist_ok=True)
    AutoModelForCausalLM.register(BufConfig, BufModel, exist_ok=True)
    write_shrunk_model(
        {"model_type": "rocmstack-test-buffer", "num_hidden_layers": 4}, tmp_path / "b", weights=True
    )
    from safetensors.torch import load_file

    saved = load_file(str(tmp_path / "b" / "model.safetensors"))
    assert torch.equal(saved["scale"], torch.full((8,), 3.0, dtype=saved["scale"].dtype))
