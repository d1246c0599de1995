"""The fused Triton decode kernels against plain PyTorch, on a GPU (skipped where there is none: CI).

They ran on an H200 (docs/evidence/bench-h200-run2/pytest.txt).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

if not torch.cuda.is_available():
    pytest.skip("the Triton kernels need a GPU", allow_module_level=True)
kernels = pytest.importorskip("rocmstack.gpu.kernels")

DEV = "cuda"


def rel(a, b) -> float:
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_norms_and_silu(dtype):
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    x = torch.randn(5, 1000, device=DEV, dtype=dtype)
    y = torch.randn_like(x)
    w = torch.rand(1000, device=DEV, dtype=dtype) + 0.5
    assert rel(kernels.rms_norm(x, w, 1e-6), F.rms_norm(x.float(), (1000,), w.float(), 1e-6)) < tol
    x2 = x.clone()
    h = kernels.add_rms_norm(x2, y, w, 1e-6)
    s = (x.float() + y.float()).to(dtype)
    assert torch.equal(x2, s)  # the residual stream is updated in place, rounded like x + y
    assert rel(h, F.rms_norm(s.float(), (1000,), w.float(), 1e-6)) < tol
    gu = torch.randn(3, 2 * 700, device=DEV, dtype=dtype)
    assert rel(kernels.silu_mul(gu), F.silu(gu[:, :700].float()) * gu[:, 700:].float()) < tol


@pytest.mark.parametrize("config", kernels.GEMV_CONFIGS)
def test_gemv_configs_match_cublas(config):
    for n, k in ((6144, 4096), (1000, 3072), (37, 520)):  # ragged sizes exercise the masks
        x = torch.randn(1, k, device=DEV, dtype=torch.bfloat16)
        w = torch.randn(n, k, device=DEV, dtype=torch.bfloat16) * 0.02
        assert rel(kernels.gemv(x, w, config), F.linear(x.float(), w.float())) < 1e-2


@pytest.mark.parametrize("splits", [1, 3, 16])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_decode_attention_matches_softmax_attention(splits, dtype):
    b, hkv, groups, d, s_max, pos = 3, 2, 4, 128, 200, 130
    q = torch.randn(b, hkv * groups, d, device=DEV, dtype=dtype)
    kc = torch.randn(b + 1, hkv, s_max, d, device=DEV, dtype=dtype)  # a larger cache, as the engine's
    vc = torch.randn_like(kc)
    kc[:, :, pos + 1 :] = float("nan")  # never read: positions after the current one
    vc[:, :, pos + 1 :] = float("nan")
    p = torch.tensor([pos], device=DEV)
    out = kernels.decode_attention(q, kc, vc, p, num_kv_heads=hkv, scale=d**-0.5, splits=splits)
    keys = kc[:b, :, : pos + 1].float().repeat_interleave(groups, dim=1)
    values = vc[:b, :, : pos + 1].float().repeat_interleave(groups, dim=1)
    ref = F.scaled_dot_product_attention(q.float().unsqueeze(2), keys, values).squeeze(2)
    assert not out.isnan().any()
    assert rel(out, ref) < (1e-5 if dtype == torch.float32 else 1e-2)


def test_qk_norm_rope_store_matches_the_engine_math():
    from rocmstack.gpu.engine import ReferenceEngine

    cfg = {"vocab_size": 64, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32}  # fmt: skip
    eng = ReferenceEngine(cfg, device=DEV, dtype=torch.float32, max_batch=3, max_seq_len=16, fused=False)
    layer = eng.layers[0]
    layer.qk_norm.uniform_(0.5, 1.5)
    qkv = torch.randn(3, (4 + 2 * 2) * 32, device=DEV)
    pos = torch.tensor([9], device=DEV)
    q_ref, k_ref, v_ref = eng._qk_norm_rope(qkv, layer, eng.cos[pos], eng.sin[pos])
    q = kernels.qk_norm_rope_store(
        qkv, layer.qk_norm, eng.cos, eng.sin, pos, layer.k_cache, layer.v_cache,
        num_heads=4, num_kv_heads=2, head_dim=32, eps=1e-6,
    )  # fmt: skip
    assert rel(q, q_ref) < 1e-5
    assert rel(layer.k_cache[:3, :, 9], k_ref) < 1e-5 and torch.equal(layer.v_cache[:3, :, 9], v_ref)
    assert layer.k_cache[:, :, :9].abs().sum() == 0 and layer.k_cache[:, :, 10:].abs().sum() == 0


def test_engine_falls_back_to_the_plain_step_when_a_kernel_cannot_launch(monkeypatch):
    """A kernel over the GPU's limits (as an LDS-hungry kernel would be on an AMD part) must not end the run:
    the engine switches to the plain step, which gives the same tokens, and says why."""
    from triton.runtime.errors import OutOfResources

    from rocmstack.gpu.engine import ReferenceEngine
    from rocmstack.gpu.shapes import BUILTIN_SHAPES

    config = dict(BUILTIN_SHAPES["qwen3-0.6b"], num_hidden_layers=2)
    prompt = torch.randint(0, 1000, (2, 8), device=DEV)
    kw = {"device": DEV, "dtype": torch.float32, "max_batch": 2, "max_seq_len": 64}
    plain = ReferenceEngine(config, **kw, fused=False)
    expected = plain.generate(prompt, max_new_tokens=4, temperature=0.0).tokens

    def too_big(*_args, **_kwargs):
        raise OutOfResources(98304, 65536, "shared memory")

    engine = ReferenceEngine(config, **kw, fused=True)
    monkeypatch.setattr(engine._kernels, "decode_attention", too_big)
    got = engine.generate(prompt, max_new_tokens=4, temperature=0.0).tokens
    assert not engine.fused and "OutOfResources" in (engine.fused_fallback or "")
    assert torch.equal(got, expected)
