"""Fused Triton kernels for the reference engine's decode step (GPU only; CUDA and ROCm Triton alike).

Decode of a small model is launch-bound: the plain-PyTorch layer issues ~19 kernels, most of them tiny.
These bring a layer to 9 launches (qkv matmul, qk-norm+RoPE+cache write, attention, o matmul, residual
add+RMSNorm, gate|up matmul, SiLU*up, down matmul, residual add+RMSNorm). Each computes in fp32 and
rounds once. The attention kernel reads only the cache positions already written (its length comes from
the device-side position), so one captured graph serves every step, and splits the cache across
programs when the batch is small. At batch 1 a GEMV kernel replaces cuBLAS where it measures faster.
The plain-PyTorch path in engine.py stays the readable spec; tests hold both to transformers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import triton
import triton.language as tl

from rocmstack.gpu.shapes import ModelShape

# Launch constants, shared by the wrappers below and by decode_launches(), which lists what a decode step
# launches so that it can be compiled ahead of time for a target the machine does not have (AMD, in CI).
SILU_BLOCK = 1024
ATTENTION_BLOCK = 64
ATTENTION_WARPS = 4
MMA_MIN_ROWS = 16  # tl.dot needs >= 16 rows: NVIDIA MMA and AMD MFMA alike


def _norm_warps(block: int) -> int:
    return 8 if block >= 2048 else 4


def _rope_warps(head_dim: int) -> int:
    return 1 if head_dim <= 128 else 2


def _padded_groups(groups: int) -> int:
    return max(MMA_MIN_ROWS, int(triton.next_power_of_2(groups)))


def splits_for(batch: int, num_kv_heads: int, compute_units: int) -> int:
    """Enough (sequence, kv head, split) programs to cover the GPU about four times; at most 16 splits."""
    programs = batch * num_kv_heads
    return max(1, min(16, -(-4 * compute_units // programs))) if programs < 4 * compute_units else 1


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, out_ptr, stride_x, stride_out, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_out + cols, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x [R, H] (unit stride along H) -> rms_norm(x) * weight."""
    rows, cols = x.shape
    out = torch.empty((rows, cols), device=x.device, dtype=x.dtype)
    block = triton.next_power_of_2(cols)
    _rms_norm_kernel[(rows,)](
        x,
        weight,
        out,
        x.stride(0),
        out.stride(0),
        cols,
        eps,
        BLOCK=block,
        num_warps=_norm_warps(block),
    )
    return out


@triton.jit
def _silu_mul_kernel(gu_ptr, out_ptr, stride_gu, stride_out, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    gate = tl.load(gu_ptr + row * stride_gu + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(gu_ptr + row * stride_gu + n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(
        out_ptr + row * stride_out + cols,
        (gate * tl.sigmoid(gate) * up).to(out_ptr.dtype.element_ty),
        mask=mask,
    )


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """gate_up [R, 2I] (gate | up) -> silu(gate) * up, [R, I]."""
    rows, width = gate_up.shape
    inter = width // 2
    out = torch.empty((rows, inter), device=gate_up.device, dtype=gate_up.dtype)
    _silu_mul_kernel[(rows, triton.cdiv(inter, SILU_BLOCK))](
        gate_up, out, gate_up.stride(0), out.stride(0), inter, BLOCK=SILU_BLOCK
    )
    return out


@triton.jit
def _qk_norm_rope_store_kernel(
    qkv_ptr, stride_qkv, w_ptr, cos_ptr, sin_ptr, pos_ptr, q_ptr, k_cache_ptr, v_cache_ptr,
    stride_cb, stride_ch, stride_cs, eps,
    HQ: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0)
    h = tl.program_id(1)  # a head of the fused projection: q heads, then k heads, then v heads
    d = tl.arange(0, D)
    pos = tl.load(pos_ptr)
    head = qkv_ptr + b * stride_qkv + h * D
    x = tl.load(head + d).to(tl.float32)
    if h < HQ + HKV:
        swapped = (d + D // 2) % D  # rope(x) = x * cos + swap_halves(x) * sin_signed
        x_sw = tl.load(head + swapped).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / D + eps)
        y = x * rstd * tl.load(w_ptr + h * D + d).to(tl.float32)
        y_sw = x_sw * rstd * tl.load(w_ptr + h * D + swapped).to(tl.float32)
        cos = tl.load(cos_ptr + pos * D + d).to(tl.float32)
        sin = tl.load(sin_ptr + pos * D + d).to(tl.float32)
        out = y * cos + y_sw * sin
        if h < HQ:
            tl.store(q_ptr + (b * HQ + h) * D + d, out.to(q_ptr.dtype.element_ty))
        else:
            dst = k_cache_ptr + b * stride_cb + (h - HQ) * stride_ch + pos * stride_cs + d
            tl.store(dst, out.to(k_cache_ptr.dtype.element_ty))
    else:
        dst = v_cache_ptr + b * stride_cb + (h - HQ - HKV) * stride_ch + pos * stride_cs + d
        tl.store(dst, x.to(v_cache_ptr.dtype.element_ty))


def qk_norm_rope_store(
    qkv, qk_norm, cos, sin, pos, k_cache, v_cache, *, num_heads, num_kv_heads, head_dim, eps
):
    """Decode: q/k RMSNorm + RoPE at position pos[0]; k, v written into the caches; returns q [B, Hq, D]."""
    batch = qkv.shape[0]
    q = torch.empty((batch, num_heads, head_dim), device=qkv.device, dtype=qkv.dtype)
    _qk_norm_rope_store_kernel[(batch, num_heads + 2 * num_kv_heads)](
        qkv, qkv.stride(0), qk_norm, cos, sin, pos, q, k_cache, v_cache,
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), eps,
        HQ=num_heads, HKV=num_kv_heads, D=head_dim, num_warps=_rope_warps(head_dim),
    )  # fmt: skip
    return q


@triton.jit
def _decode_attention_kernel(
    q_ptr, k_cache_ptr, v_cache_ptr, out_ptr, part_o_ptr, part_ml_ptr, pos_ptr, stride_cb, stride_ch, stride_cs,
    scale, HKV: tl.constexpr, G: tl.constexpr, GP: tl.constexpr, D: tl.constexpr, BLOCK: tl.constexpr,
    SPLITS: tl.constexpr, IEEE: tl.constexpr,
):  # fmt: skip
    """One program per (sequence, kv head, split of the cache): its G query heads, online softmax.

    SPLITS == 1 writes the output; otherwise each split writes its unnormalised partial (acc, max, sum)
    for _combine_kernel, so a small batch still spreads the cache over many programs (flash-decoding).
    """
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    split = tl.program_id(2)
    length = tl.load(pos_ptr) + 1
    chunk = tl.cdiv(length, SPLITS)
    lo = split * chunk
    hi = tl.minimum(lo + chunk, length)
    g = tl.arange(0, GP)  # query rows padded to the MMA minimum; rows >= G are zeros and never stored
    d = tl.arange(0, D)
    rows = (b * HKV + kvh) * G + g
    q = tl.load(q_ptr + rows[:, None] * D + d[None, :], mask=(g < G)[:, None], other=0.0)
    k_base = k_cache_ptr + b * stride_cb + kvh * stride_ch
    v_base = v_cache_ptr + b * stride_cb + kvh * stride_ch
    m = tl.full([GP], float("-inf"), tl.float32)
    l_i = tl.zeros([GP], tl.float32)
    acc = tl.zeros([GP, D], tl.float32)
    for start in range(lo, hi, BLOCK):
        s = start + tl.arange(0, BLOCK)
        valid = s < hi
        k = tl.load(k_base + s[:, None] * stride_cs + d[None, :], mask=valid[:, None], other=0.0)
        if IEEE:  # fp32 inputs: full fp32 products, not TF32 (the tests compare with fp32 references)
            scores = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
        else:
            scores = tl.dot(q, tl.trans(k)) * scale
        scores = tl.where(valid[None, :], scores, float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, axis=1))
        p = tl.exp(scores - m_new[:, None])
        alpha = tl.exp(m - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + s[:, None] * stride_cs + d[None, :], mask=valid[:, None], other=0.0)
        if IEEE:
            acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    keep = (g < G)[:, None]
    if SPLITS == 1:
        out = acc / l_i[:, None]
        tl.store(out_ptr + rows[:, None] * D + d[None, :], out.to(out_ptr.dtype.element_ty), mask=keep)
    else:
        part = (b * HKV + kvh) * SPLITS + split
        tl.store(part_o_ptr + (part * G + g[:, None]) * D + d[None, :], acc, mask=keep)
        tl.store(part_ml_ptr + (part * 2) * G + g, m, mask=g < G)
        tl.store(part_ml_ptr + (part * 2 + 1) * G + g, l_i, mask=g < G)


@triton.jit
def _combine_kernel(part_o_ptr, part_ml_ptr, out_ptr, HKV: tl.constexpr, G: tl.constexpr, GP: tl.constexpr,
                    D: tl.constexpr, SPLITS: tl.constexpr):  # fmt: skip
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    g = tl.arange(0, GP)
    d = tl.arange(0, D)
    gm = g < G
    first = (b * HKV + kvh) * SPLITS
    big = tl.full([GP], float("-inf"), tl.float32)
    for sp in tl.static_range(SPLITS):  # the largest running max over the splits
        big = tl.maximum(big, tl.load(part_ml_ptr + ((first + sp) * 2) * G + g, mask=gm, other=0.0))
    total = tl.zeros([GP], tl.float32)
    acc = tl.zeros([GP, D], tl.float32)
    for sp in tl.static_range(SPLITS):  # empty splits have max -inf: weight exp(-inf) = 0
        w = tl.exp(tl.load(part_ml_ptr + ((first + sp) * 2) * G + g, mask=gm, other=0.0) - big)
        total += w * tl.load(part_ml_ptr + ((first + sp) * 2 + 1) * G + g, mask=gm, other=1.0)
        o = tl.load(
            part_o_ptr + ((first + sp) * G + g[:, None]) * D + d[None, :], mask=gm[:, None], other=0.0
        )
        acc += w[:, None] * o
    rows = (b * HKV + kvh) * G + g
    tl.store(
        out_ptr + rows[:, None] * D + d[None, :],
        (acc / total[:, None]).to(out_ptr.dtype.element_ty),
        mask=gm[:, None],
    )


def attention_splits(batch: int, num_kv_heads: int, device: torch.device) -> int:
    # multi_processor_count is the SM count on NVIDIA and the CU count on AMD.
    units = torch.cuda.get_device_properties(device).multi_processor_count
    return splits_for(batch, num_kv_heads, units)


def decode_attention(q, k_cache, v_cache, pos, *, num_kv_heads, scale, splits: int | None = None):
    """q [B, Hq, D] (contiguous) against k/v_cache[:B, :, :pos+1] -> [B, Hq, D]."""
    batch, num_heads, head_dim = q.shape
    groups = num_heads // num_kv_heads
    splits = splits or attention_splits(batch, num_kv_heads, q.device)
    gp = _padded_groups(groups)
    out = torch.empty_like(q)
    if splits > 1:
        part_o = torch.empty(
            (batch * num_kv_heads * splits, groups, head_dim), device=q.device, dtype=torch.float32
        )
        part_ml = torch.empty(
            (batch * num_kv_heads * splits, 2, groups), device=q.device, dtype=torch.float32
        )
    else:
        part_o = part_ml = out  # unused
    _decode_attention_kernel[(batch, num_kv_heads, splits)](
        q, k_cache, v_cache, out, part_o, part_ml, pos, k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        scale, HKV=num_kv_heads, G=groups, GP=gp, D=head_dim, BLOCK=ATTENTION_BLOCK, SPLITS=splits,
        IEEE=q.dtype == torch.float32, num_warps=ATTENTION_WARPS,
    )  # fmt: skip
    if splits > 1:
        _combine_kernel[(batch, num_kv_heads)](
            part_o, part_ml, out, HKV=num_kv_heads, G=groups, GP=gp, D=head_dim, SPLITS=splits
        )
    return out


@triton.jit
def _add_rms_norm_kernel(x_ptr, y_ptr, w_ptr, h_ptr, n_cols, eps, BLOCK: tl.constexpr):
    """x += y (rounded to x's dtype, as the residual stream is), h = rms_norm(x) * w."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    x += tl.load(y_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    x = x.to(x_ptr.dtype.element_ty)
    tl.store(x_ptr + row * n_cols + cols, x, mask=mask)
    x = x.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(h_ptr + row * n_cols + cols, (x * rstd * w).to(h_ptr.dtype.element_ty), mask=mask)


def add_rms_norm(x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """In place x += y (both [R, H], contiguous); returns rms_norm(x) * weight."""
    rows, cols = x.shape
    h = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    _add_rms_norm_kernel[(rows,)](x, y, weight, h, cols, eps, BLOCK=block, num_warps=_norm_warps(block))
    return h


@triton.jit
def _gemv_kernel(x_ptr, w_ptr, out_ptr, N, K, stride_w, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """out[n] = sum_k w[n, k] x[k]: the batch-1 decode matmul, a pure stream over the weight rows."""
    n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    nmask = n < N
    acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)  # reduced once at the end, not per tile
    for k0 in range(0, K, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        kmask = k < K
        w = tl.load(
            w_ptr + n[:, None] * stride_w + k[None, :], mask=nmask[:, None] & kmask[None, :], other=0.0
        )
        x = tl.load(x_ptr + k, mask=kmask, other=0.0)
        acc += w.to(tl.float32) * x.to(tl.float32)[None, :]
    tl.store(out_ptr + n, tl.sum(acc, axis=1).to(out_ptr.dtype.element_ty), mask=nmask)


# (BLOCK_N, BLOCK_K, num_warps): each keeps ~64 fp32 accumulators a thread; the engine times them
# against cuBLAS per weight shape on the device at hand and keeps whichever is fastest.
GEMV_CONFIGS = ((8, 512, 4), (16, 512, 4), (16, 1024, 8), (32, 256, 4), (4, 1024, 4), (8, 1024, 4))


def gemv(x: torch.Tensor, weight: torch.Tensor, config: tuple[int, int, int]) -> torch.Tensor:
    """x [1, K] @ weight[N, K].T -> [1, N]."""
    n, k = weight.shape
    out = torch.empty((1, n), device=x.device, dtype=x.dtype)
    block_n, block_k, warps = config
    _gemv_kernel[(triton.cdiv(n, block_n),)](
        x, weight, out, n, k, weight.stride(0), BLOCK_N=block_n, BLOCK_K=block_k, num_warps=warps
    )
    return out


@dataclass(frozen=True)
class Launch:
    """One kernel as a decode step launches it: argument types and compile-time constants."""

    name: str
    fn: Any  # a triton JITFunction
    signature: dict[str, str]
    constexprs: dict[str, int | bool] = field(default_factory=dict)
    num_warps: int = 4


def _signature(fn: Any, types: dict[str, str], constexprs: dict[str, int | bool]) -> dict[str, str]:
    sig = {name: ("constexpr" if name in constexprs else types[name]) for name in fn.arg_names}
    missing = [name for name in fn.arg_names if sig[name] is None]
    assert not missing, missing
    return sig


def decode_launches(shape: ModelShape, batch: int, dtype: str, compute_units: int) -> list[Launch]:
    """Every distinct kernel specialisation the fused decode step launches for ``shape`` at ``batch``.

    ``dtype`` is Triton's name for the model dtype (``bf16``, ``fp16``, ``fp32``); ``compute_units`` the
    target's SM/CU count, which sets the attention splits. Mirrors the wrappers above through the same
    launch constants.
    """
    ptr, i32, f32 = f"*{dtype}", "i32", "fp32"
    hidden = triton.next_power_of_2(shape.hidden_size)
    groups = shape.num_heads // shape.num_kv_heads
    splits = splits_for(batch, shape.num_kv_heads, compute_units)
    out: list[Launch] = []

    def add(name: str, fn: Any, types: dict[str, str], warps: int, **constexprs: int | bool) -> None:
        out.append(Launch(name, fn, _signature(fn, types, constexprs), constexprs, warps))

    row = {"stride_x": i32, "stride_out": i32, "n_cols": i32, "eps": f32}
    add("rms_norm", _rms_norm_kernel, {"x_ptr": ptr, "w_ptr": ptr, "out_ptr": ptr, **row},
        _norm_warps(hidden), BLOCK=hidden)  # fmt: skip
    add("add_rms_norm", _add_rms_norm_kernel,
        {"x_ptr": ptr, "y_ptr": ptr, "w_ptr": ptr, "h_ptr": ptr, "n_cols": i32, "eps": f32},
        _norm_warps(hidden), BLOCK=hidden)  # fmt: skip
    add("silu_mul", _silu_mul_kernel,
        {"gu_ptr": ptr, "out_ptr": ptr, "stride_gu": i32, "stride_out": i32, "n_cols": i32},
        4, BLOCK=SILU_BLOCK)  # fmt: skip
    cache = {"stride_cb": i32, "stride_ch": i32, "stride_cs": i32}
    add("qk_norm_rope_store", _qk_norm_rope_store_kernel,
        {"qkv_ptr": ptr, "stride_qkv": i32, "w_ptr": ptr, "cos_ptr": ptr, "sin_ptr": ptr, "pos_ptr": "*i64",
         "q_ptr": ptr, "k_cache_ptr": ptr, "v_cache_ptr": ptr, **cache, "eps": f32},
        _rope_warps(shape.head_dim), HQ=shape.num_heads, HKV=shape.num_kv_heads, D=shape.head_dim)  # fmt: skip
    part = "*fp32" if splits > 1 else ptr
    add("decode_attention", _decode_attention_kernel,
        {"q_ptr": ptr, "k_cache_ptr": ptr, "v_cache_ptr": ptr, "out_ptr": ptr, "part_o_ptr": part,
         "part_ml_ptr": part, "pos_ptr": "*i64", **cache, "scale": f32},
        ATTENTION_WARPS, HKV=shape.num_kv_heads, G=groups, GP=_padded_groups(groups), D=shape.head_dim,
        BLOCK=ATTENTION_BLOCK, SPLITS=splits, IEEE=dtype == "fp32")  # fmt: skip
    if splits > 1:
        add("combine", _combine_kernel, {"part_o_ptr": "*fp32", "part_ml_ptr": "*fp32", "out_ptr": ptr}, 4,
            HKV=shape.num_kv_heads, G=groups, GP=_padded_groups(groups), D=shape.head_dim, SPLITS=splits)  # fmt: skip
    if batch == 1:
        for block_n, block_k, warps in GEMV_CONFIGS:
            add(f"gemv{block_n}x{block_k}", _gemv_kernel,
                {"x_ptr": ptr, "w_ptr": ptr, "out_ptr": ptr, "N": i32, "K": i32, "stride_w": i32},
                warps, BLOCK_N=block_n, BLOCK_K=block_k)  # fmt: skip
    return out


def compile_launch(launch: Launch, backend: str, arch: str, warp_size: int) -> Any:
    """Compile one launch for a target without its device (``hip``/``gfx942``/64 on any machine)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    source = ASTSource(launch.fn, signature=launch.signature, constexprs=dict(launch.constexprs))
    return triton.compile(
        source, target=GPUTarget(backend, arch, warp_size), options={"num_warps": launch.num_warps}
    )
