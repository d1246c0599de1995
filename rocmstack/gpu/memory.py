"""How much memory a run needs, from the model shape alone, and how much the device has free.

Checked before anything is allocated: a run that cannot fit is refused with one line (the estimate and
the limit), instead of climbing until the kernel's OOM killer ends the process without a word.

The estimate counts what the reference engine (engine.py) and the transformers model allocate:
weights, the static KV cache, the largest transient tensors of prefill and sampling (the [batch, vocab]
fp32 tensors dominate at large batches), and on GPUs the captured graphs' outputs plus a fixed
allowance for BLAS/Triton workspaces. It is meant to be a little high, never low: the tests compare it
with the peak resident memory of real CPU runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rocmstack.errors import InputError
from rocmstack.gpu.shapes import ModelShape

# Attention in a captured plain decode step covers the cache up to the next multiple of this (engine.py).
KV_BUCKET = 64
# cuBLAS/hipBLASLt workspaces, Triton and the allocator's rounding on a GPU (not the context itself:
# torch.cuda.mem_get_info is read after it exists).
GPU_WORKSPACE_BYTES = 1 << 30
# fp32 [batch, vocab] bytes alive at once while sampling: the previous step's logits, the new ones, scaled,
# log-softmax and its scratch, noise, its log and the race (plain); plus sorted probs, int64 order,
# cumsum and the mask (top-p). Calibrated against peak RSS in tests/unit/test_gpu_memory.py.
SAMPLE_BYTES_PER_LOGIT = {False: 40, True: 56}
MEMINFO = Path("/proc/meminfo")


@dataclass(frozen=True, kw_only=True)
class MemoryEstimate:
    """Bytes one phase of a run holds at its peak."""

    what: str
    weights: int = 0
    kv_cache: int = 0
    activations: int = 0
    workspace: int = 0  # captured graphs and library workspaces (GPU)

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.activations + self.workspace

    def describe(self) -> str:
        parts = [
            f"{label} {gb(value)}"
            for label, value in (
                ("weights", self.weights),
                ("KV cache", self.kv_cache),
                ("activations", self.activations),
                ("graphs/workspace", self.workspace),
            )
            if value
        ]
        return f"{gb(self.total)} for {self.what} ({', '.join(parts)})"


def gb(nbytes: int) -> str:
    return f"{nbytes / 1e9:.1f} GB" if nbytes >= 1e8 else f"{nbytes / 1e6:.0f} MB"


def weight_bytes(shape: ModelShape, dtype_bytes: int) -> int:
    return shape.total_params() * dtype_bytes


def kv_cache_bytes(shape: ModelShape, dtype_bytes: int, *, batch: int, seq_len: int) -> int:
    return shape.kv_bytes_per_token(dtype_bytes) * batch * seq_len


def _sample_bytes(shape: ModelShape, batch: int, top_p: float) -> int:
    return batch * shape.vocab_size * SAMPLE_BYTES_PER_LOGIT[top_p < 1.0]


def prefill_activation_bytes(
    shape: ModelShape, dtype_bytes: int, *, batch: int, prompt_len: int, score_copies: int = 1
) -> int:
    """The largest transient set of one layer's prefill, for `batch` prompts of `prompt_len` tokens.

    Attention: the qkv product, its normed/rotated copies and SDPA's contiguous (GQA-expanded) inputs;
    MLP: gate|up, SiLU and the product; plus the residual stream and its norm. SDPA's fp32 scores
    [batch, heads, P, P] on top, for backends that materialise them (with an explicit mask, as
    transformers passes, the math path also keeps their softmax: score_copies=2).
    """
    tokens = batch * prompt_len
    qkv = shape.q_size + 2 * shape.kv_size
    per_token = max(8 * qkv, 5 * shape.intermediate_size) + 4 * shape.hidden_size
    scores = score_copies * batch * shape.num_heads * prompt_len * prompt_len * 4
    return tokens * per_token * dtype_bytes + scores


def reference_engine(
    shape: ModelShape,
    *,
    dtype_bytes: int,
    batches: tuple[int, ...],
    prompt_len: int,
    new_tokens: int,
    top_p: float = 1.0,
    device: str = "cpu",
    graphs: bool = False,
    fused: bool = False,
) -> MemoryEstimate:
    """The reference engine built for max(batches) and run over each batch in turn."""
    batch = max(batches)
    seq = prompt_len + new_tokens
    logits = batch * shape.vocab_size * dtype_bytes
    prefill = prefill_activation_bytes(shape, dtype_bytes, batch=batch, prompt_len=prompt_len)
    # Prefill's transients are gone before the first token is sampled; a decode step's are small.
    decode = batch * shape.num_heads * seq * 4 + logits + _sample_bytes(shape, batch, top_p)
    rope = 2 * seq * shape.head_dim * dtype_bytes
    workspace = 0
    if device == "cuda":
        workspace = GPU_WORKSPACE_BYTES
        if graphs:  # each captured graph keeps its output logits; the plain step has one per KV bucket
            per_batch = 1 if fused else -(-seq // KV_BUCKET)
            workspace += sum(per_batch * b * shape.vocab_size * dtype_bytes for b in set(batches))
    return MemoryEstimate(
        what=f"the reference engine at batch {batch}, {seq} tokens",
        weights=weight_bytes(shape, dtype_bytes),
        kv_cache=kv_cache_bytes(shape, dtype_bytes, batch=batch, seq_len=seq),
        activations=max(prefill, decode) + rope,
        workspace=workspace,
    )


def hf_generate(
    shape: ModelShape,
    *,
    dtype_bytes: int,
    batches: tuple[int, ...],
    prompt_len: int,
    new_tokens: int,
    top_p: float = 1.0,
    device: str = "cpu",
) -> MemoryEstimate:
    """transformers' model: a timed full prefill (logits for every prompt position) and generate()."""
    batch = max(batches)
    seq = prompt_len + new_tokens
    prefill = prefill_activation_bytes(shape, dtype_bytes, batch=batch, prompt_len=prompt_len, score_copies=2)
    all_logits = batch * prompt_len * shape.vocab_size * dtype_bytes
    return MemoryEstimate(
        what=f"transformers generate at batch {batch}, {seq} tokens",
        weights=weight_bytes(shape, dtype_bytes),
        kv_cache=kv_cache_bytes(shape, dtype_bytes, batch=batch, seq_len=seq),
        # Summed, not the larger: transformers' allocator reuse varies more from run to run than ours.
        activations=prefill + all_logits + _sample_bytes(shape, batch, top_p),
        workspace=GPU_WORKSPACE_BYTES if device == "cuda" else 0,
    )


def _meminfo_available(text: str) -> int | None:
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                return int(fields[1]) * 1024  # /proc/meminfo counts kB (KiB)
    return None


def available_bytes(device: str) -> tuple[int | None, str]:
    """(bytes the device can still give, where that figure comes from); None when it cannot be read."""
    if device == "cuda":
        import torch

        free, _total = torch.cuda.mem_get_info()
        return free, f"free on {torch.cuda.get_device_name()} (torch.cuda.mem_get_info)"
    try:
        available = _meminfo_available(MEMINFO.read_text())
    except OSError:
        available = None
    return available, "MemAvailable in /proc/meminfo"


def check_fits(phases: list[MemoryEstimate], available: int | None, source: str, *, fix: str) -> None:
    """Refuse (InputError, exit 2) when the largest phase needs more than the device has."""
    if available is None or not phases:
        return
    peak = max(phases, key=lambda p: p.total)
    if peak.total > available:
        raise InputError(
            f"this run needs about {peak.describe()}, more than the {gb(available)} {source}", fix=fix
        )
