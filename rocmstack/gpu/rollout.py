"""One rollout interface: what the smoke and the bench call on a rollout engine, and one catalogue of them.

- ``Rollout``: an image's engine driven through its own API (vLLM, SGLang); what both share is in
  ``gpu/engine_rollout.py``, what differs in ``gpu/vllm_rollout.py`` and ``gpu/sglang_rollout.py``.
- ``Decoder``: rocmstack's in-process decoders (``gpu/engine.py``'s reference engine and
  ``gpu/kv_cache.py``); the trainer's HF-named state dict goes straight in.
- ``CATALOGUE``: one ``RolloutEntry`` per engine: its name, its in-process factory, the bench's subprocess
  path where it has one (``gpu/engine_bench.py``) and what callers ask of it (package, CPU, split placement).
  Every list of engine names derives from it, and ``Catalogue.entry`` is the one place an unknown name is
  refused. The CLI reads the names (``smoke/config.py``), so this module imports no torch: each factory
  imports its engine's module when it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from rocmstack.errors import InputError
from rocmstack.gpu.driver_memory import DeviceMemory
from rocmstack.gpu.engine_bench import BenchRunner, run_sglang, run_vllm
from rocmstack.gpu.weight_sync import TensorSpec

if TYPE_CHECKING:
    import torch

    from rocmstack.gpu.engine import GenerateOutput


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


# An in-process factory: the model config and the one argument set; the engine.
Factory = Callable[[dict[str, Any], EngineArgs], Decoder | Rollout]


@dataclass(frozen=True, kw_only=True)
class RolloutEntry:
    """One rollout engine. What a caller would branch on is an attribute here: callers look an engine up
    by name and never compare names."""

    name: str
    build: Factory  # in-process: the smoke's rollout worker, the bench's reference engine
    served: bool  # an image's engine (a Rollout), not an in-process Decoder
    option: bool = True  # a --rollout choice; kvcache is the reference rollout's other decoder (--decoder)
    package: str | None = None  # the import name that must be installed here (rocmstack's own need none)
    bench: BenchRunner | None = None  # the bench's subprocess path: one engine start times every batch
    no_cpu: str | None = None  # why it cannot run on a CPU; None: it can
    no_split: str | None = None  # why the smoke refuses --placement split with it; None: proven there


@dataclass(frozen=True)
class Catalogue:
    """The rollout engines, in --rollout order. ``adding`` returns a new catalogue (a test's extra engine
    never reaches another test); every function that looks an engine up takes one, CATALOGUE by default."""

    entries: tuple[RolloutEntry, ...]
    auto: str = "reference"  # what "auto" means where a caller accepts it (--decoder, make_engine)

    def __post_init__(self) -> None:
        names = [e.name for e in self.entries]
        if len(set(names)) != len(names) or "auto" in names or self.auto not in names:
            raise ValueError(f"rollout catalogue: names must be unique, not 'auto', and hold {self.auto!r}")

    def adding(self, *entries: RolloutEntry) -> Catalogue:
        return Catalogue((*self.entries, *entries), self.auto)

    def names(
        self, *, served: bool | None = None, option: bool | None = None, bench: bool | None = None
    ) -> tuple[str, ...]:
        """The names of the entries that match every filter given (None: either)."""
        return tuple(
            e.name
            for e in self.entries
            if served in (None, e.served)
            and option in (None, e.option)
            and bench in (None, e.bench is not None)
        )

    def entry(
        self,
        name: str,
        *,
        flag: str = "rollout engine",
        auto: bool = False,
        served: bool | None = None,
        option: bool | None = None,
        bench: bool | None = None,
    ) -> RolloutEntry:
        """The entry called ``name`` among those the filters keep ("auto" too, where ``auto``): the one
        place an unknown name is refused, in one line that lists the names known there."""
        known = (*(("auto",) if auto else ()), *self.names(served=served, option=option, bench=bench))
        if name not in known:
            raise InputError(f"{flag} {name!r} is not one of {', '.join(known)}")
        wanted = self.auto if name == "auto" else name
        return next(e for e in self.entries if e.name == wanted)


CATALOGUE = Catalogue(
    (
        RolloutEntry(name="reference", build=_reference, served=False),
        RolloutEntry(name="kvcache", build=_kv_cache, served=False, option=False),
        RolloutEntry(name="vllm", build=_vllm, served=True, package="vllm", bench=run_vllm),
        RolloutEntry(
            name="sglang",
            build=_sglang,
            served=True,
            package="sglang",
            bench=run_sglang,
            no_cpu="SGLang has no CPU engine",
            no_split="SGLang's weight broadcast (update_weights_from_distributed) needs two GPUs and has not "
            "been proven on them",
        ),
    )
)
# The catalogue by name, read-only (the names its callers imported before the catalogue).
REGISTRY: Mapping[str, RolloutEntry] = MappingProxyType({e.name: e for e in CATALOGUE.entries})


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
    catalogue: Catalogue = CATALOGUE,
) -> tuple[Any, str]:
    """Build the rollout engine named ``prefer`` (a catalogue name, or "auto": the reference engine);
    returns (engine, name)."""
    entry = catalogue.entry(prefer, auto=True)
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
    return entry.build(config, args), entry.name
