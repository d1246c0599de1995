"""A KV-cache decode behind the reference engine's interface: the reference rollout's other decoder.

``KVCacheEngine`` runs the HF model class as prefill + one-token decode steps over a ``DynamicCache``. It
takes the HF-named state dict the trainer ships, like the reference engine (``gpu/engine.py``), so the
trainer's full-sequence forward and the rollout's cached decode are different code paths that must agree.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from rocmstack.gpu.engine import GenerateOutput, sample


class KVCacheEngine:
    """Prefill once, then decode one token at a time reusing the KV cache (the reference engine's API)."""

    def __init__(
        self,
        config: dict[str, Any],
        *,
        device: str | torch.device,
        dtype: torch.dtype,
        max_batch: int,
        max_seq_len: int,
    ) -> None:
        from transformers import AutoConfig, AutoModelForCausalLM

        hf_config = AutoConfig.for_model(**config)
        self.model = AutoModelForCausalLM.from_config(hf_config, dtype=dtype).to(device).eval()
        self.device = torch.device(device)
        self.max_batch = max_batch
        self.max_seq_len = max_seq_len
        params = inspect.signature(self.model.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"

    @torch.no_grad()
    def load_hf_state_dict(self, state_dict: dict[str, torch.Tensor]) -> None:
        own = self.model.state_dict()
        missing = sorted(set(own) - set(state_dict))
        if missing:
            raise KeyError(f"weight sync lacks {len(missing)} tensors, e.g. {missing[:3]}")
        for name, tensor in state_dict.items():
            own[name].copy_(tensor)

    @torch.no_grad()
    def forward_logits(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=ids.to(self.device), use_cache=False).logits

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> GenerateOutput:
        from transformers import DynamicCache

        batch, prompt_len = input_ids.shape
        if batch > self.max_batch or prompt_len + max_new_tokens > self.max_seq_len:
            raise ValueError(
                f"batch {batch} x {prompt_len}+{max_new_tokens} exceeds engine limits "
                f"{self.max_batch} x {self.max_seq_len}"
            )
        cache = DynamicCache()
        # transformers >= 5.2x names the argument ``cache``; older 5.x (the H200 image's 5.17) ``past_key_values``.
        cache_kw = {self._cache_arg: cache}
        out = self.model(input_ids=input_ids.to(self.device), use_cache=True, **cache_kw)
        tokens, logprobs = [], []
        for _ in range(max_new_tokens):
            ids, lp = sample(out.logits[:, -1], temperature, top_p, generator)
            tokens.append(ids)
            logprobs.append(lp)
            if len(tokens) == max_new_tokens:
                break
            out = self.model(input_ids=ids.unsqueeze(-1), use_cache=True, **cache_kw)
        return GenerateOutput(tokens=torch.stack(tokens, dim=1), logprobs=torch.stack(logprobs, dim=1))
