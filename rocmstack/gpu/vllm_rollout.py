"""vLLM as a rollout engine, driven through its own API the way RL frameworks drive it.

- Generation: offline ``vllm.LLM`` on prompt token ids (no tokenizer), ``SamplingParams(logprobs=0)``
  for the log-prob of each sampled token, ``prompt_logprobs=0`` to score fixed sequences.
- Weights: the model starts from ``load_format="dummy"``; the trainer's HF-named tensors go in through
  ``collective_rpc`` into ``WeightSyncExtension`` (vLLM's ``worker_extension_cls``), which hands them to
  the model's own ``load_weights`` (it fuses q/k/v and gate/up itself). Colocated: the rpc carries a
  CUDA/HIP IPC handle (CPU: a shared-memory file name), never the bytes. Split: the extension joins a
  two-rank group outside torch's default one (vLLM's own workers hold that) and receives a broadcast.
- Memory: ``sleep(level=1)`` between rollout and training, ``wake_up(["weights"])`` -> load ->
  ``wake_up(["kv_cache"])``; what the process holds on the device is read from the driver (NVML /
  amdsmi), not from torch's allocator, which vLLM's sleep allocator bypasses.

The engine runs inside the calling process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``): one engine process
fewer to start on a CI box, and the same rpc path as with a separate engine core.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator
from typing import Any

import torch

from rocmstack.gpu.engine import GenerateOutput
from rocmstack.gpu.engine_rollout import EngineRollout
from rocmstack.gpu.weight_sync import TensorSpec, open_shared_tensor, unpack_state_dict

EXTENSION = "rocmstack.gpu.vllm_rollout.WeightSyncExtension"
# The CPU engine sizes its KV cache from this, not from a fraction of memory: the smoke's needs are KBs.
CPU_KV_CACHE_BYTES = 64 << 20


def weight_group(host: str, port: int, rank: int, device_type: str) -> Any:
    """The two-rank weight-broadcast group (rank 0 the trainer), outside torch's default group.

    vLLM's workers own the default group, so both sides make a stateless one with vLLM's helper:
    gloo on CPU, NCCL/RCCL on GPUs.
    """
    from datetime import timedelta

    from vllm.distributed.utils import stateless_init_torch_distributed_process_group

    backend = "nccl" if device_type == "cuda" else "gloo"
    return stateless_init_torch_distributed_process_group(
        host, port, rank, 2, backend, timeout=timedelta(seconds=300)
    )


def broadcast(group: Any, tensor: torch.Tensor, src: int = 0) -> None:
    """Broadcast over a group made by ``weight_group`` (group ranks: no global rank involved)."""
    group.broadcast(tensor, src).wait()


class WeightSyncExtension:
    """Mixed into vLLM's worker class. Method names carry a prefix: the CPU worker has its own
    ``update_weights``."""

    model_runner: Any  # the worker's

    def _rocmstack_load(self, weights: Iterator[tuple[str, torch.Tensor]]) -> None:
        runner = self.model_runner
        reload = getattr(runner, "reload_weights", None)
        if reload is not None and "weights_iterator" in inspect.signature(reload).parameters:
            # vLLM >= 0.2x: in-place reload that also redoes the kernel-format processing done after a
            # load (the CPU backend repacks linear weights; a bare load_weights then fails).
            reload(weights_iterator=weights)
        else:
            runner.get_model().load_weights(weights)  # older releases, as verl/TRL call it

    def rocmstack_load_shared(self, handle: bytes, specs: list[TensorSpec]) -> None:
        flat = open_shared_tensor(handle)
        self._rocmstack_load(iter(unpack_state_dict(flat, specs).items()))
        if flat.device.type == "cuda":
            torch.cuda.synchronize(flat.device)
        del flat  # the trainer's bucket: let go of the mapping before the trainer frees it

    def rocmstack_join_group(self, host: str, port: int, rank: int) -> None:
        device = next(self.model_runner.get_model().parameters()).device
        self._rocmstack_group = weight_group(host, port, rank, device.type)
        self._rocmstack_device = device

    def rocmstack_receive(self, specs: list[TensorSpec], numel: int, dtype: str, load: bool) -> int:
        """Receive the version, then the bucket; ``load=False`` drops it (the stale-weights fault)."""
        version = torch.zeros(1, dtype=torch.int64, device=self._rocmstack_device)
        broadcast(self._rocmstack_group, version)
        flat = torch.empty(numel, dtype=getattr(torch, dtype), device=self._rocmstack_device)
        broadcast(self._rocmstack_group, flat)
        if load:
            self._rocmstack_load(iter(unpack_state_dict(flat, specs).items()))
        return int(version)

    def rocmstack_leave_group(self) -> None:
        group = getattr(self, "_rocmstack_group", None)
        if group is not None:
            from vllm.distributed.utils import stateless_destroy_torch_distributed_process_group

            stateless_destroy_torch_distributed_process_group(group)
            self._rocmstack_group = None


class VLLMRollout(EngineRollout):
    """The rollout interface of the smoke's engines, on vLLM's offline ``LLM``."""

    name = "vllm"

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
        gpu_memory_utilization: float = 0.3,
    ) -> None:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # this process's engine; read at engine start
        from vllm import LLM

        on_gpu = torch.device(device).type == "cuda"
        super().__init__(config, device=device, sleep_mode=sleep_mode and on_gpu)  # vLLM sleeps on GPUs only
        kwargs: dict[str, Any] = {}
        if self.device.type == "cpu":
            kwargs["kv_cache_memory_bytes"] = CPU_KV_CACHE_BYTES
        else:
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        self.llm = LLM(
            model=str(self.model_dir),
            skip_tokenizer_init=True,
            load_format="dummy",
            dtype=str(dtype).removeprefix("torch."),
            max_model_len=max_seq_len,
            max_num_seqs=max_batch,
            enforce_eager=True,  # the smoke's model is tiny: graphs and torch.compile would only add start time
            enable_prefix_caching=False,  # prompt log-probs must be computed, not served from cache
            enable_sleep_mode=self.sleep_mode,
            logprobs_mode="processed_logprobs",  # after temperature, as the trainer scores them
            worker_extension_cls=EXTENSION,
            seed=seed,
            **kwargs,
        )

    @staticmethod
    def _params(**kwargs: Any) -> Any:
        from vllm import SamplingParams

        # No per-request seed: one seed for a whole batch would give every sample of a group the same
        # tokens (and takes vLLM's slow per-request sampler). The engine's own seed makes runs repeatable.
        return SamplingParams(detokenize=False, **kwargs)

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
        del generator  # vLLM seeds per request
        params = self._params(
            max_tokens=max_new_tokens,
            min_tokens=max_new_tokens,
            ignore_eos=True,
            temperature=temperature,
            top_p=top_p,
            logprobs=0,
        )
        prompts = [{"prompt_token_ids": row} for row in input_ids.tolist()]
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        tokens, logprobs = [], []
        for out in outs:
            comp = out.outputs[0]
            ids = list(comp.token_ids)
            tokens.append(ids)
            logprobs.append([float(comp.logprobs[i][tok].logprob) for i, tok in enumerate(ids)])
        return GenerateOutput(tokens=torch.tensor(tokens), logprobs=torch.tensor(logprobs))

    def score(self, sequences: torch.Tensor) -> torch.Tensor:
        """log p(token t | tokens < t) for t >= 1 of each sequence, [B, L-1] fp32 (prompt log-probs)."""
        params = self._params(max_tokens=1, temperature=1.0, prompt_logprobs=0)
        rows = sequences.tolist()
        outs = self.llm.generate([{"prompt_token_ids": r} for r in rows], params, use_tqdm=False)
        result = []
        for row, out in zip(rows, outs, strict=True):
            plp = out.prompt_logprobs
            result.append([float(plp[t][row[t]].logprob) for t in range(1, len(row))])
        return torch.tensor(result, dtype=torch.float32)

    # ---- weights ----
    def load_shared(self, handle: bytes, specs: list[TensorSpec]) -> None:
        """Colocated: the worker maps the trainer's bucket by its handle and loads it."""
        self.llm.collective_rpc("rocmstack_load_shared", args=(handle, specs))

    def join_group(self, host: str, port: int, rank: int) -> None:
        self.llm.collective_rpc("rocmstack_join_group", args=(host, port, rank))

    def receive_broadcast(self, specs: list[TensorSpec], numel: int, dtype: str, *, load: bool = True) -> int:
        return int(self.llm.collective_rpc("rocmstack_receive", args=(specs, numel, dtype, load))[0])

    # ---- memory ----
    def _release(self) -> None:
        self.llm.sleep(level=1)  # weights to host memory, KV cache dropped

    def _resume_weights(self) -> None:
        self.llm.wake_up(tags=["weights"])

    def _resume_rest(self) -> None:
        self.llm.wake_up(tags=["kv_cache"])

    def _stop(self) -> None:
        self.llm.collective_rpc("rocmstack_leave_group")
