"""SGLang as a rollout engine, driven through its offline ``sglang.Engine`` the way verl and slime drive it.

- Generation: ``Engine.generate(input_ids=..., return_logprob=True)`` with ``skip_tokenizer_init``;
  each sampled token's log-prob is in ``meta_info["output_token_logprobs"]`` as (log-prob, id, text)
  (after temperature, SGLang's default). Fixed sequences are scored with ``logprob_start_len=0``:
  ``meta_info["input_token_logprobs"]``, whose first entry has no log-prob.
- Weights: the model starts from ``load_format="dummy"``; the trainer's HF-named tensors go in through
  ``update_weights_from_tensor``, which hands the scheduler process CUDA/HIP IPC handles and calls the
  model's own ``load_weights``. The trainer's bucket arrives here by its own IPC handle; it is copied once
  into this process, because a mapping opened from another process cannot be shared onwards.
- Memory: ``release_memory_occupation`` between rollout and training (``enable_memory_saver``; the
  weights are kept in host memory, as vLLM's sleep level 1 keeps them), ``resume_memory_occupation``
  of the weights, the load, then of the KV cache. The model runs in SGLang's scheduler process, so what
  the engine holds is read from the driver over this process and its children.

SGLang has no CPU engine: this runs on GPUs only. Split placement (a broadcast into the scheduler through
``update_weights_from_distributed``) needs a second GPU and is refused before anything starts.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import torch

from rocmstack.gpu.engine import GenerateOutput
from rocmstack.gpu.engine_rollout import EngineRollout
from rocmstack.gpu.weight_sync import TensorSpec, open_shared_tensor, unpack_state_dict

WEIGHTS, KV_CACHE = "weights", "kv_cache"  # SGLang's memory tags (sglang.srt.constants)


def sampled_logprobs(out: dict[str, Any]) -> tuple[list[int], list[float]]:
    """Token ids and their log-probs from one ``Engine.generate`` result (``return_logprob=True``)."""
    ids = [int(t) for t in out["output_ids"]]
    entries = out["meta_info"]["output_token_logprobs"]
    if [int(e[1]) for e in entries] != ids:
        raise RuntimeError("SGLang's output_token_logprobs do not match its output_ids")
    return ids, [float(e[0]) for e in entries]


def prompt_logprobs(out: dict[str, Any], row: Sequence[int]) -> list[float]:
    """log p(token t | tokens < t) for t >= 1 from one result scored with ``logprob_start_len=0``."""
    entries = out["meta_info"]["input_token_logprobs"]
    if len(entries) != len(row) or [int(e[1]) for e in entries] != [int(t) for t in row]:
        raise RuntimeError(f"SGLang scored {len(entries)} prompt tokens of {len(row)}, or other ones")
    return [float(e[0]) for e in entries[1:]]  # the first token has no log-prob (None)


def update_ok(result: tuple[bool, str]) -> None:
    """SGLang answers a weight update with (success, message) rather than raising."""
    success, message = result
    if not success:
        raise RuntimeError(f"SGLang refused the weight update: {message}")


class SGLangRollout(EngineRollout):
    """The rollout interface of the smoke's engines, on SGLang's offline ``Engine``."""

    name = "sglang"
    cpu_refusal = "SGLang has no CPU engine: --rollout sglang runs on GPUs only"

    def __init__(
        self,
        config: dict[str, Any],
        *,
        device: str | torch.device,
        dtype: torch.dtype,
        max_batch: int,
        max_seq_len: int,
        sleep_mode: bool,
        seed: int = 0,
        mem_fraction_static: float = 0.3,
    ) -> None:
        import sglang

        super().__init__(config, device=device, sleep_mode=sleep_mode)
        self.engine = sglang.Engine(
            model_path=str(self.model_dir),
            skip_tokenizer_init=True,
            load_format="dummy",
            dtype=str(dtype).removeprefix("torch."),
            context_length=max_seq_len,
            max_running_requests=max_batch,
            mem_fraction_static=mem_fraction_static,
            disable_cuda_graph=True,  # the smoke's model is tiny: graphs would only add start time
            disable_radix_cache=True,  # prompt log-probs must be computed, not served from cache
            enable_memory_saver=sleep_mode,
            enable_weights_cpu_backup=sleep_mode,
            random_seed=seed,
            log_level="error",
        )

    def _pids(self) -> list[int]:
        return [os.getpid(), *self.engine.get_all_child_pids()]

    def generate(
        self,
        input_ids: torch.Tensor,
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> GenerateOutput:
        """Sample exactly ``max_new_tokens`` per prompt (``ignore_eos``: the task masks after <eos>)."""
        del generator  # SGLang samples with its own seed
        params = {
            "max_new_tokens": max_new_tokens,
            "ignore_eos": True,  # exactly max_new_tokens (min_new_tokens needs a tokenizer in SGLang)
            "temperature": temperature,
            "top_p": top_p,
        }
        outs = self.engine.generate(input_ids=input_ids.tolist(), sampling_params=params, return_logprob=True)
        tokens, logprobs = zip(*(sampled_logprobs(o) for o in outs), strict=True)
        return GenerateOutput(tokens=torch.tensor(tokens), logprobs=torch.tensor(logprobs))

    def score(self, sequences: torch.Tensor) -> torch.Tensor:
        """log p(token t | tokens < t) for t >= 1 of each sequence, [B, L-1] fp32 (prompt log-probs)."""
        rows = sequences.tolist()
        outs = self.engine.generate(
            input_ids=rows,
            sampling_params={"max_new_tokens": 1, "temperature": 1.0},
            return_logprob=True,
            logprob_start_len=0,
        )
        return torch.tensor(
            [prompt_logprobs(o, r) for o, r in zip(outs, rows, strict=True)], dtype=torch.float32
        )

    # ---- weights ----
    def load_shared(self, handle: bytes, specs: list[TensorSpec]) -> None:
        """Colocated: map the trainer's bucket, copy it once, hand SGLang's scheduler the tensors by IPC."""
        mapped = open_shared_tensor(handle)
        flat = mapped.clone()
        del mapped  # the trainer's bucket: let go of the mapping before the trainer frees it
        named = list(unpack_state_dict(flat, specs).items())
        update_ok(self.engine.update_weights_from_tensor(named_tensors=named, flush_cache=True))
        torch.cuda.synchronize(flat.device)

    def join_group(self, host: str, port: int, rank: int) -> None:
        raise RuntimeError("split placement with --rollout sglang is not supported (it needs two GPUs)")

    def receive_broadcast(self, specs: list[TensorSpec], numel: int, dtype: str, *, load: bool = True) -> int:
        raise RuntimeError("split placement with --rollout sglang is not supported (it needs two GPUs)")

    # ---- memory ----
    def _release(self) -> None:
        self.engine.release_memory_occupation(tags=[WEIGHTS, KV_CACHE])

    def _resume_weights(self) -> None:
        self.engine.resume_memory_occupation(tags=[WEIGHTS])

    def _resume_rest(self) -> None:
        self.engine.resume_memory_occupation(tags=[KV_CACHE])

    def _stop(self) -> None:
        self.engine.shutdown()
