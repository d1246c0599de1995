"""Fused Triton kernels for the reference engine's decode step (GPU only; CUDA and ROCm Triton alike).

Decode of a small model is launch-bound: the plain-PyTorch layer issues ~19 kernels, most of them tiny.
These four bring a layer to 9 launches (RMSNorm, qkv GEMM, qk-norm+RoPE+cache write, attention, o GEMM,
RMSNorm, gate|up GEMM, SiLU*up, down GEMM). Each computes in fp32 and rounds once. The attention kernel
reads only the cache positions already written (its length comes from the device-side position), so
one captured graph serves every step. The plain-PyTorch path in engine.py stays the readable spec;
tests hold the two to the same transformers reference.
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
    _rms_norm_kernel[(rows,)](x, weight, out, x.stride(0), out.stride(0), cols, eps, BLOCK=block, num_warps=8 if block >= 2048 else 4)
    return out


@triton.jit
def _silu_mul_kernel(gu_ptr, out_ptr, stride_gu, stride_out, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    gate = tl.load(gu_ptr + row * stride_gu + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(gu_ptr + row * stride_gu + n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_out + cols, (gate * tl.sigmoid(gate) * up).to(out_ptr.dtype.element_ty), mask=mask)


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """gate_up [R, 2I] (gate | up) -> silu(gate) * up, [R, I]."""
    rows, width = gate_up.shape
    inter = width // 2
    out = torch.empty((rows, inter), device=gate_up.device, dtype=gate_up.dtype)
    block = 1024
    _silu_mul_kernel[(rows, triton.cdiv(inter, block))](gate_up, out, gate_up.stride(0), out.stride(0), inter, BLOCK=block)
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


def qk_norm_rope_store(qkv, qk_norm, cos, sin, pos, k_cache, v_cache, *, num_heads, num_kv_heads, head_dim, eps):
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
    q_ptr, k_cache_ptr, v_cache_ptr, out_ptr, pos_ptr, stride_cb, stride_ch, stride_cs, scale,
    HKV: tl.constexpr, G: tl.constexpr, GP: tl.constexpr, D: tl.constexpr, BLOCK: tl.constexpr,
    IEEE: tl.constexpr,
):  # fmt: skip
    """One program per (sequence, kv head): its G query heads against cache[:pos+1], online softmax."""
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    length = tl.load(pos_ptr) + 1
    g = tl.arange(0, GP)  # query rows padded to the MMA minimum; rows >= G are zeros and never stored
    d = tl.arange(0, D)
    rows = (b * HKV + kvh) * G + g
    q = tl.load(q_ptr + rows[:, None] * D + d[None, :], mask=(g < G)[:, None], other=0.0)
    k_base = k_cache_ptr + b * stride_cb + kvh * stride_ch
    v_base = v_cache_ptr + b * stride_cb + kvh * stride_ch
    m = tl.full([GP], float("-inf"), tl.float32)
    l = tl.zeros([GP], tl.float32)
    acc = tl.zeros([GP, D], tl.float32)
    for start in range(0, length, BLOCK):
        s = start + tl.arange(0, BLOCK)
        valid = s < length
        k = tl.load(k_base + s[:, None] * stride_cs + d[None, :], mask=valid[:, None], other=0.0)
        if IEEE:  # fp32 inputs: full fp32 products, not TF32 (the tests compare with fp32 references)
            scores = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
        else:
            scores = tl.dot(q, tl.trans(k)) * scale
        scores = tl.where(valid[None, :], scores, float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, axis=1))
        p = tl.exp(scores - m_new[:, None])
        alpha = tl.exp(m - m_new)
        l = l * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + s[:, None] * stride_cs + d[None, :], mask=valid[:, None], other=0.0)
        if IEEE:
            acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    out = acc / l[:, None]
    tl.store(out_ptr + rows[:, None] * D + d[None, :], out.to(out_ptr.dtype.element_ty), mask=(g < G)[:, None])


def decode_attention(q, k_cache, v_cache, pos, *, num_kv_heads, scale):
    """q [B, Hq, D] (contiguous) against k/v_cache[:B, :, :pos+1] -> [B, Hq, D]."""
    batch, num_heads, head_dim = q.shape
    groups = num_heads // num_kv_heads
    out = torch.empty_like(q)
    _decode_attention_kernel[(batch, num_kv_heads)](
        q, k_cache, v_cache, out, pos, k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), scale,
        HKV=num_kv_heads, G=groups, GP=max(16, triton.next_power_of_2(groups)), D=head_dim, BLOCK=64, num_warps=4,
        IEEE=q.dtype == torch.float32,
    )  # fmt: skip
    return out
