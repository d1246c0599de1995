"""Model shapes for the rollout bench: HF Qwen3 config fields, validated into one small value object.

No torch here: the roofline and the CLI's argument checks use these without loading a framework.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocmstack.errors import InputError
from rocmstack.resources import yaml_data

MOE_SHAPES = Path(__file__).with_name("moe_shapes.yaml")
# Bytes per element of the dtypes a rollout runs in (the bench's memory and roofline figures, an engine's
# KV cache).
DTYPES = {"bfloat16": 2, "float16": 2, "float32": 4}


def moe_shapes() -> dict[str, dict[str, Any]]:
    """The MoE models a recipe's ``models:`` may name, with the fields their config file names use."""

    return dict(yaml_data(MOE_SHAPES)["models"])


# The published configs' architecture fields (huggingface.co/Qwen/Qwen3-0.6B and Qwen3-8B, config.json).
# Only the shape matters: the bench initialises random weights and downloads nothing.
BUILTIN_SHAPES: dict[str, dict[str, Any]] = {
    "qwen3-0.6b": {
        "model_type": "qwen3",
        "vocab_size": 151936,
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hidden_act": "silu",
        "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000,
        "tie_word_embeddings": True,
        "attention_bias": False,
    },
    "qwen3-8b": {
        "model_type": "qwen3",
        "vocab_size": 151936,
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hidden_act": "silu",
        "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000,
        "tie_word_embeddings": False,
        "attention_bias": False,
    },
}


@dataclass(frozen=True, kw_only=True)
class ModelShape:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    tie_word_embeddings: bool

    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    def layer_params(self) -> int:
        attn = self.hidden_size * (self.q_size + 2 * self.kv_size) + self.q_size * self.hidden_size
        mlp = 3 * self.hidden_size * self.intermediate_size
        norms = 2 * self.hidden_size + 2 * self.head_dim
        return attn + mlp + norms

    def total_params(self) -> int:
        embed = self.vocab_size * self.hidden_size
        head = 0 if self.tie_word_embeddings else embed
        return self.num_layers * self.layer_params() + embed + head + self.hidden_size

    def params_read_per_step(self) -> int:
        """Parameters one decode step must read: every layer, the final norm and the LM head.

        The embedding lookup reads only `batch` rows, so the embedding table counts only when it is
        tied to the LM head (which reads it whole).
        """
        return self.num_layers * self.layer_params() + self.hidden_size + self.vocab_size * self.hidden_size

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        return 2 * self.num_layers * self.kv_size * dtype_bytes


def _rope_theta(config: Mapping[str, Any]) -> float:
    # transformers 5 nests it in rope_parameters; 4.x configs (and the Hub's files) have it at top level.
    params = config.get("rope_parameters") or config.get("rope_scaling") or {}
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type != "default":
        raise InputError(
            f"config: rope_type={rope_type!r} is not supported by the reference engine",
            fix="use a config with default RoPE (Qwen3's published configs have it)",
        )
    theta = params.get("rope_theta", config.get("rope_theta", 10000.0))
    return float(theta)


def _positive_int(config: Mapping[str, Any], key: str, default: Any = None) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InputError(
            f"config: {key}={value!r} must be a positive integer", fix=f"fix {key} in the config"
        )
    return value


def shape_from_config(config: Mapping[str, Any]) -> ModelShape:
    """Validate HF Qwen3 config fields; each bad field is named in the error."""
    if not isinstance(config, Mapping):
        raise InputError("config must be a JSON object of HF Qwen3 config fields")
    model_type = config.get("model_type", "qwen3")
    if model_type not in ("qwen3", "qwen2", "llama"):
        raise InputError(
            f"config: model_type={model_type!r} is not a Qwen3-style decoder",
            fix="use a qwen3 config (qwen2/llama shapes are accepted too)",
        )
    if config.get("hidden_act", "silu") != "silu":
        raise InputError(f"config: hidden_act={config.get('hidden_act')!r} is not supported", fix="use silu")
    for flag in ("attention_bias", "use_sliding_window"):
        if config.get(flag, False):
            raise InputError(
                f"config: {flag}=true is not supported by the reference engine", fix=f"set {flag} false"
            )
    hidden = _positive_int(config, "hidden_size")
    heads = _positive_int(config, "num_attention_heads")
    kv_heads = _positive_int(config, "num_key_value_heads", heads)
    head_dim = _positive_int(config, "head_dim", hidden // heads if hidden % heads == 0 else None)
    if heads % kv_heads:
        raise InputError(
            f"config: num_attention_heads={heads} is not a multiple of num_key_value_heads={kv_heads}",
            fix="fix the head counts",
        )
    if head_dim % 2:
        raise InputError(f"config: head_dim={head_dim} must be even for RoPE", fix="fix head_dim")
    eps = config.get("rms_norm_eps", 1e-6)
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not 0 < eps < 1:
        raise InputError(f"config: rms_norm_eps={eps!r} must be a number in (0, 1)", fix="fix rms_norm_eps")
    return ModelShape(
        vocab_size=_positive_int(config, "vocab_size"),
        hidden_size=hidden,
        intermediate_size=_positive_int(config, "intermediate_size"),
        num_layers=_positive_int(config, "num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        rms_norm_eps=float(eps),
        rope_theta=_rope_theta(config),
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
    )


def load_config(spec: str) -> tuple[str, dict[str, Any]]:
    """`qwen3-0.6b`, `qwen3-8b` or a path to an HF config.json -> (name, config dict), validated."""
    if spec in BUILTIN_SHAPES:
        config = dict(BUILTIN_SHAPES[spec])
        name = spec
    else:
        path = Path(spec)
        if path.is_dir():
            path = path / "config.json"
        if not path.is_file():
            raise InputError(
                f"--shape {spec!r}: not a built-in shape and no such config file",
                fix=f"use one of {', '.join(BUILTIN_SHAPES)} or a path to an HF config.json",
            )
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:  # ValueError: bad JSON or bad UTF-8
            raise InputError(
                f"--shape {spec!r}: cannot read JSON: {exc}", fix="pass a valid config.json"
            ) from exc
        name = str(path)
    shape_from_config(config)
    return name, config
