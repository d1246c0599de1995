"""A config-only HF model folder for the image's engines (vLLM, SGLang): they fill it with dummy weights
(``load_format="dummy"``); the smoke's weight sync or the bench's timing does the rest.

Every engine gets the Qwen3 decoder that the reference engine and the trainer model, so all of them run one
architecture: a qwen2 or llama config (accepted by ``shapes``) gives its sizes only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ARCHITECTURE = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]}


def write_model_dir(config: Mapping[str, Any], directory: Path, dtype: str | None = None) -> Path:
    cfg = dict(config) | ARCHITECTURE
    if dtype is not None:
        cfg["torch_dtype"] = dtype
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    return directory
