"""One rollout interface: what the smoke and the bench call on a rollout engine, and one registry of them.

- ``Rollout``: an image's engine driven through its own API (vLLM, SGLang); what both share is in
  ``gpu/engine_rollout.py``, what differs in ``gpu/vllm_rollout.py`` and ``gpu/sglang_rollout.py``.
- ``Decoder``: rocmstack's in-process decoders (``gpu/engine.py``'s reference engine and
  ``gpu/kv_cache.py``); the trainer's HF-named state dict goes straight in.
- ``REGISTRY``: name -> how to build it. The CLI reads the names (``smoke/config.py``), so this module
  imports no torch: each factory imports its engine's module when it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from rocmstack.gpu.driver_memory import DeviceMemory
from rocmstack.gpu.weight_sync import TensorSpec

if TYPE_CHECKING:
    import torch

    from rocmstack.gpu.engine import GenerateOutput

# Bytes per element of the dtypes a rollout runs in (the bench's memory and roofline figures).
DTYPES = {"bfloat16": 2, "float16": 2, "float32": 4}


def prompt_ids(vocab: int, batch: int, prompt_len: int, seed: int, device: str) -> Any:
    """The prompts of one batch: every engine gets the same ids for the same seed and batch."""
    import torch

    gen = torch.Generator().manual_seed(seed + batch)
    return torch.randint(0, vocab, (batch, prompt_len), generator=gen).to(device)


class Decoder(Protocol):
    """An in-process decoder: samples, takes the trainer's state dict, gives full-sequence logits."""

    def generate(
        self,
        input_ids: torch.Tensor,
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> GenerateOutput: ...

    def load_hf_state_dict(self, state_dict: dict[str, torch.Tensor]) -> None: ...

    def forward_logits(self, ids: torch.Tensor) -> torch.Tensor: ...


class Rollout(Protocol):
    """An image's engine as the rollout: samples and scores, loads weights through its own API, sleeps."""

    name: ClassVar[str]
    baseline: DeviceMemory  # what the process held on the device before the engine started
    asleep: bool

    def generate(
        self,
        input_ids: torch.Tensor,
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> GenerateOutput: ...

    def score(self, sequences: torch.Tensor) -> torch.Tensor: ...

    def load_shared(self, handle: bytes, specs: list[TensorSpec]) -> None: ...

    def join_group(self, host: str, port: int, rank: int) -> None: ...

    def receive_broadcast(
        self, specs: list[TensorSpec], numel: int, dtype: str, *, load: bool = True
    ) -> int: ...

    def sleep(self) -> None: ...

    def wake_weights(self) -> None: ...

    def wake_rest(self) -> None: ...

    def memory(self) -> DeviceMemory: ...

    def shutdown(self) -> None: ...


@dataclass(frozen=True, kw_only=True)
class EngineArgs:
    """What every factory takes. ``graphs`` and ``fused`` tune the reference engine alone: the bench times
    it with CUDA graphs and its Triton decode kernels; the smoke's tiny model runs without (the kernels
    would only add JIT time to step 0). vLLM and SGLang capture and pick their kernels themselves."""

    device: str | torch.device
    dtype: torch.dtype
    max_batch: int
    max_seq_len: int
    sleep_mode: bool = False
    seed: int = 0
    graphs: bool = False
    fused: bool | None = False  # None: where a GPU and Triton are there

    def served(self) -> dict[str, Any]:
        """The keywords an image's engine takes."""
        return {
            "device": self.device,
            "dtype": self.dtype,
            "max_batch": self.max_batch,
            "max_seq_len": self.max_seq_len,
            "sleep_mode": self.sleep_mode,
            "seed": self.seed,
        }


# In-process decoders: nothing to sleep, and sampling takes the caller's generator (sleep_mode, seed unused).
def _reference(config: dict[str, Any], a: EngineArgs) -> Decoder:
    from rocmstack.gpu.engine import ReferenceEngine

    return ReferenceEngine(
        config,
        device=a.device,
        dtype=a.dtype,
        max_batch=a.max_batch,
        max_seq_len=a.max_seq_len,
        use_graphs=a.graphs,
        fused=a.fused,
    )


def _kv_cache(config: dict[str, Any], a: EngineArgs) -> Decoder:
    from rocmstack.gpu.kv_cache import KVCacheEngine

    return KVCacheEngine(
        config, device=a.device, dtype=a.dtype, max_batch=a.max_batch, max_seq_len=a.max_seq_len
    )


def _vllm(config: dict[str, Any], a: EngineArgs) -> Rollout:
    from rocmstack.gpu.vllm_rollout import VLLMRollout

    return VLLMRollout(config, **a.served())


def _sglang(config: dict[str, Any], a: EngineArgs) -> Rollout:
    from rocmstack.gpu.sglang_rollout import SGLangRollout

    return SGLangRollout(config, **a.served())


@dataclass(frozen=True)
class RolloutKind:
    build: Callable[[dict[str, Any], EngineArgs], Decoder | Rollout]
    served: bool  # an image's engine (a Rollout), not an in-process Decoder
    option: bool  # a --rollout choice; kvcache is the reference rollout's other decoder (--decoder)


# In --rollout order: smoke/config.py's ROLLOUTS are the option names.
REGISTRY: Mapping[str, RolloutKind] = MappingProxyType(
    {
        "reference": RolloutKind(_reference, served=False, option=True),
        "kvcache": RolloutKind(_kv_cache, served=False, option=False),
        "vllm": RolloutKind(_vllm, served=True, option=True),
        "sglang": RolloutKind(_sglang, served=True, option=True),
    }
)


def make_engine(
    config: dict[str, Any],
    *,
    device: str | torch.device,
    dtype: torch.dtype,
    max_batch: int,
    max_seq_len: int,
    prefer: str,
    sleep_mode: bool = False,
    seed: int = 0,
    graphs: bool = False,
    fused: bool | None = False,
) -> tuple[Any, str]:
    """Build the rollout engine named ``prefer`` (a REGISTRY name; "auto": the reference engine);
    returns (engine, name)."""
    name = prefer if prefer in REGISTRY else "reference"
    args = EngineArgs(
        device=device,
        dtype=dtype,
        max_batch=max_batch,
        max_seq_len=max_seq_len,
        sleep_mode=sleep_mode,
        seed=seed,
        graphs=graphs,
        fused=fused,
    )
    return REGISTRY[name].build(config, args), name
