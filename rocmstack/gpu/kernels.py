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

import torch
import triton
import triton.language as tl


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
        num_warps=8 if block >= 2048 else 4,
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
    block = 1024
    _silu_mul_kernel[(rows, triton.cdiv(inter, block))](
        gate_up, out, gate_up.stride(0), out.stride(0), inter, BLOCK=block
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
        HQ=num_heads, HKV=num_kv_heads, D=head_dim, num_warps=1 if head_dim <= 128 else 2,
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
    """Enough (sequence, kv head, split) programs to cover the GPU about four times; at most 16 splits."""
    programs = batch * num_kv_heads
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return max(1, min(16, -(-4 * sms // programs))) if programs < 4 * sms else 1


def decode_attention(q, k_cache, v_cache, pos, *, num_kv_heads, scale, splits: int | None = None):
    """q [B, Hq, D] (contiguous) against k/v_cache[:B, :, :pos+1] -> [B, Hq, D]."""
    batch, num_heads, head_dim = q.shape
    groups = num_heads // num_kv_heads
    splits = splits or attention_splits(batch, num_kv_heads, q.device)
    gp = max(16, triton.next_power_of_2(groups))
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
        scale, HKV=num_kv_heads, G=groups, GP=gp, D=head_dim, BLOCK=64, SPLITS=splits,
        IEEE=q.dtype == torch.float32, num_warps=4,
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
    _add_rms_norm_kernel[(rows,)](
        x, y, weight, h, cols, eps, BLOCK=block, num_warps=8 if block >= 2048 else 4
    )
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
