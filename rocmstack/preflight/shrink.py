"""A model of the job's own architecture, shrunk: the same config.json (attention type, head sizes, MoE
experts and routing, quantization config, dtype, vocabulary) with 2 layers, a small local tokenizer and,
for a trainer that loads weights, random ones. Engines that serve it read no weights (``load_format
dummy``).

Only what counts layers changes: the layer count itself and the per-layer lists and indexes that must agree
with it. Every other key stays, so the engine selects the kernels it would select for the real model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocmstack.errors import InputError, printable
from rocmstack.gpu.tokenizer import build_tokenizer

LAYERS = 2
# The key that counts a text decoder's layers, by the name each family uses.
LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers")
# Lists with one entry per layer: cut to the new count.
PER_LAYER_LISTS = (
    "layer_types",
    "attention_layers",
    "block_types",
    "layers_block_type",
    "hybrid_layer_pattern",
)
# Lists of layer indexes: keep the ones that still exist.
LAYER_INDEX_LISTS = ("mlp_only_layers", "full_attention_layers", "swa_layers", "dense_layers")
# Counts of leading dense layers before the MoE ones (DeepSeek, GLM, Kimi): at most one, so that both a dense
# and an MoE layer stay when the real model has both.
LEADING_DENSE = ("first_k_dense_replace", "first_k_dense", "num_dense_layers")
# Where a multimodal or wrapped model keeps its text decoder's config.
TEXT_CONFIGS = ("text_config", "llm_config", "language_config", "thinker_config")


@dataclass(frozen=True)
class ShrunkModel:
    directory: Path
    config: dict[str, Any]
    layers_before: int
    changed: tuple[str, ...]  # "num_hidden_layers: 36 -> 2", one line per key that changed
    weights: bool  # random weights written (a trainer loads them); else config and tokenizer only


def read_config(path: Path) -> dict[str, Any]:
    """A model's config.json (or the folder holding one), or one InputError line."""
    file = path / "config.json" if path.is_dir() else path
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(
            f"--model-config {printable(file)}: no such file", fix="give the model's config.json"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(
            f"--model-config {printable(file)}: not a JSON config ({exc})", fix="give the model's config.json"
        ) from None
    if not isinstance(data, dict):
        raise InputError(
            f"--model-config {printable(file)}: not a JSON object", fix="give the model's config.json"
        )
    return data


def _shrink_one(config: dict[str, Any], layers: int, where: str, changed: list[str]) -> int | None:
    key = next((k for k in LAYER_KEYS if isinstance(config.get(k), int)), None)
    if key is None:
        return None
    before = int(config[key])
    keep = min(layers, before)
    config[key] = keep
    if before != keep:
        changed.append(f"{where}{key}: {before} -> {keep}")
    for name in PER_LAYER_LISTS:
        value = config.get(name)
        if isinstance(value, list) and len(value) > keep:
            config[name] = value[:keep]
            changed.append(f"{where}{name}: first {keep} of {len(value)}")
    for name in LAYER_INDEX_LISTS:
        value = config.get(name)
        if isinstance(value, list) and any(isinstance(i, int) and i >= keep for i in value):
            config[name] = [i for i in value if isinstance(i, int) and i < keep]
            changed.append(f"{where}{name}: {value} -> {config[name]}")
    for name in LEADING_DENSE:
        value = config.get(name)
        if isinstance(value, int) and value > 1:
            config[name] = 1
            changed.append(f"{where}{name}: {value} -> 1")
    return before


def shrink_config(
    config: Mapping[str, Any], layers: int = LAYERS
) -> tuple[dict[str, Any], int, tuple[str, ...]]:
    """(the shrunk config, the real layer count, what changed); InputError when no layer count is found."""
    out = json.loads(json.dumps(config))  # a deep copy of plain JSON
    changed: list[str] = []
    before = _shrink_one(out, layers, "", changed)
    for nested in TEXT_CONFIGS:
        if isinstance(out.get(nested), dict):
            inner = _shrink_one(out[nested], layers, f"{nested}.", changed)
            before = inner if before is None else before
    if before is None:
        raise InputError(
            "the model's config.json names no layer count (num_hidden_layers, num_layers, n_layer)",
            fix="give the config.json of the model the job trains or serves",
        )
    return out, before, tuple(changed)


def write_shrunk_model(
    config: Mapping[str, Any], directory: Path, *, weights: bool, layers: int = LAYERS, seed: int = 0
) -> ShrunkModel:
    """The shrunk model folder: config.json, a local tokenizer and, with ``weights``, random weights."""
    shrunk, before, changed = shrink_config(config, layers)
    directory.mkdir(parents=True, exist_ok=True)
    build_tokenizer(directory, seed=seed)
    if weights:
        if "quantization_config" in shrunk:
            # random weights are no quantized checkpoint: a trainer loading them must not expect one
            shrunk = {k: v for k, v in shrunk.items() if k != "quantization_config"}
            changed = (*changed, "quantization_config: left out (random bf16 weights for the trainer)")
        _write_weights(shrunk, directory, seed)
    (directory / "config.json").write_text(json.dumps(shrunk, indent=2, sort_keys=True) + "\n")
    return ShrunkModel(directory, shrunk, before, changed, weights)


def _write_weights(config: dict[str, Any], directory: Path, seed: int) -> None:
    """Random weights of the shrunk architecture through transformers, saved in the config's dtype.

    transformers' own initialisation draws every value in float32 on one thread (79 s for a 2-layer
    Qwen3-30B-A3B, 1.8 B parameters); the model is built on the meta device instead and every parameter
    filled from one small random block, so the time is the copy and the write.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    if "model_type" not in config:
        raise InputError(
            "the model's config.json has no model_type: transformers cannot build its architecture",
            fix="give the config.json of the model the job trains (Hugging Face format)",
        )
    hf_config = AutoConfig.for_model(
        config["model_type"], **{k: v for k, v in config.items() if k != "model_type"}
    )
    dtype = getattr(
        torch, str(config.get("torch_dtype") or config.get("dtype") or "bfloat16"), torch.bfloat16
    )
    torch.manual_seed(seed)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config)
    params = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    if set(model.state_dict()) - params:
        # a buffer the checkpoint keeps (not the usual rotary tables): only a real build has its values
        model = AutoModelForCausalLM.from_config(hf_config)
        model.to(dtype).save_pretrained(str(directory))
        return
    model = model.to(dtype).to_empty(device="cpu")
    model.tie_weights()  # to_empty gives each tied name a tensor of its own
    _fill(model, seed)
    model.save_pretrained(str(directory))


# Values the parameters are cut from: a few MiB, drawn once; each parameter starts at its own offset.
BLOCK = 1 << 22
STD = 0.02


def _fill(model: Any, seed: int) -> None:
    """Matrices from the random block (std 0.02, as transformers initialises them); vectors as their
    layers start: norm weights 1, biases and the rest 0."""
    import torch

    drawn = torch.randn(BLOCK, generator=torch.Generator().manual_seed(seed)) * STD
    blocks: dict[Any, Any] = {}
    with torch.no_grad():
        for k, (name, p) in enumerate(model.named_parameters()):
            if p.dim() < 2:
                p.fill_(1.0 if "norm" in name and name.endswith("weight") else 0.0)
                continue
            block = blocks.setdefault(p.dtype, drawn.to(p.dtype))
            flat, done, at = p.view(-1), 0, (k * 7919) % BLOCK
            while done < flat.numel():
                n = min(BLOCK - at, flat.numel() - done)
                flat[done : done + n].copy_(block[at : at + n])
                done, at = done + n, 0
