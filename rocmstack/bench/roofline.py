"""The decode roofline: bytes a decode step must move, and what share of the bandwidth a run used (MBU).

Decode is memory-bound: each step reads every weight once (for the whole batch) plus each sequence's
KV cache. bytes/step = weights + sum over the batch of context x KV bytes/token; the roofline is
tokens/s = batch x bandwidth / bytes/step. No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rocmstack.gpu.shapes import ModelShape


@dataclass(frozen=True, kw_only=True)
class ArchSpec:
    name: str
    arch: str  # gfx target or CUDA compute capability
    hbm_tb_per_s: float  # vendor datasheet peak HBM bandwidth, TB/s (1e12 bytes/s)
    match: tuple[str, ...]  # substrings of the device name (lowercase) that identify it
    source: str


def _load_specs() -> tuple[ArchSpec, ...]:
    import yaml

    rows = yaml.safe_load((Path(__file__).with_name("gpu_specs.yaml")).read_text(encoding="utf-8"))
    return tuple(ArchSpec(**{**row, "match": tuple(row["match"])}) for row in rows)


# Datasheet figures are data (gpu_specs.yaml), read once: an immutable tuple.
SPEC_TABLE: tuple[ArchSpec, ...] = _load_specs()


def lookup_spec(
    device_name: str, *, gcn_arch: str | None = None, memory_gb: float | None = None
) -> ArchSpec | None:
    """The datasheet entry for a device name as torch reports it ("NVIDIA H200", "AMD Instinct MI300X").

    Some ROCm releases name every Instinct part "AMD Radeon Graphics"; then the gfx target (and, for
    gfx942, the memory size: 192 GB MI300X, 256 GB MI325X) decides.
    """
    name = device_name.lower()
    for spec in SPEC_TABLE:
        if any(m in name for m in spec.match):
            return spec
    target = (gcn_arch or "").split(":")[0]
    by_name = {s.name: s for s in SPEC_TABLE}
    if target == "gfx950":
        return by_name["MI355X"]
    if target == "gfx942" and memory_gb is not None:
        return by_name["MI325X"] if memory_gb > 224 else by_name["MI300X"]
    if target == "gfx90a":
        return by_name["MI250X"]
    return None


@dataclass(frozen=True, kw_only=True)
class DecodeBytes:
    weights: int  # bytes of weights one step reads
    kv: float  # bytes of KV cache one step reads, averaged over the decode steps, whole batch

    @property
    def per_step(self) -> float:
        return self.weights + self.kv


def decode_bytes(
    shape: ModelShape, *, batch: int, prompt_len: int, new_tokens: int, dtype_bytes: int
) -> DecodeBytes:
    """Average bytes per decode step over a generation of new_tokens after a prompt of prompt_len.

    Prefill yields the first token; decode steps i = 1..N-1 each attend over prompt_len + i positions,
    so the mean context is prompt_len + N/2.
    """
    mean_context = prompt_len + new_tokens / 2 if new_tokens > 1 else prompt_len
    kv = batch * mean_context * shape.kv_bytes_per_token(dtype_bytes)
    return DecodeBytes(weights=shape.params_read_per_step() * dtype_bytes, kv=kv)


def roofline_tokens_per_s(bytes_: DecodeBytes, *, batch: int, bandwidth_bytes_per_s: float) -> float:
    return batch * bandwidth_bytes_per_s / bytes_.per_step


def mbu(
    decode_tokens_per_s: float, bytes_: DecodeBytes, *, batch: int, bandwidth_bytes_per_s: float
) -> float:
    """Model bandwidth utilisation: bytes the decode had to move per second over the bandwidth."""
    return decode_tokens_per_s / batch * bytes_.per_step / bandwidth_bytes_per_s
