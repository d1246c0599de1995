"""The reference engine against transformers' own Qwen3 on the same random weights.

Tolerances:
- fp32 (CPU): both sides compute the same function in fp32 (unit roundoff 6e-8); only the order of
  summation differs (fused q|k|v and gate|up matmuls, residual added inside addmm, fused RMSNorm), so
  logits agree to ~1e-6 relative. 1e-4 leaves 100x margin; a real bug (wrong head order, RoPE sign,
  norm weight on the wrong heads, off-by-one cache position) moves logits by O(1).
- bf16: bf16 keeps 8 mantissa bits (roundoff 4e-3), and the two implementations round at different
  points, so they do not match each other bit for bit. The fair test is against the fp32 truth: our
  bf16 logits must be no further from it than transformers' own bf16 logits are (with 25 % slack).
"""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from rocmstack.errors import InputError
from rocmstack.gpu.engine import KV_BUCKET, ReferenceEngine, sample


def _variants() -> list[tuple[str, bool]]:
    """(device, fused kernels): CPU always; on a GPU both the plain-PyTorch and the Triton decode step."""
    out = [("cpu", False)]
    if torch.cuda.is_available():
        out.append(("cuda", False))
        try:
            import triton  # noqa: F401  (whether it imports is the question)

            out.append(("cuda", True))
        except ImportError:
            pass
    return out


VARIANTS = _variants()

TINY = {
    "model_type": "qwen3",
    "vocab_size": 96,
    "hidden_size": 64,
    "intermediate_size": 160,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,  # != hidden / heads, as in Qwen3-8B's explicit head_dim
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,  # not the default 10000: the test sees it was read
    "max_position_embeddings": 256,
    "tie_word_embeddings": False,
}


def hf_model(config: dict, seed: int = 0) -> Qwen3ForCausalLM:
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(Qwen3Config(**config)).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.uniform_(0.5, 1.5)  # not ones: a norm weight on the wrong heads must show
            else:
                param.normal_(0.0, 0.08)
    return model


def engine_for(
    model, *, device="cpu", dtype=torch.float32, max_batch=4, max_seq_len=160, graphs=False, fused=False
):
    engine = ReferenceEngine(
        model.config.to_dict() | {"model_type": "qwen3"},
        device=device,
        dtype=dtype,
        max_batch=max_batch,
        max_seq_len=max_seq_len,
        use_graphs=graphs,
        fused=fused,
    )
    engine.load_hf_state_dict(model.state_dict())
    return engine


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


@pytest.mark.parametrize("tied", [False, True])
def test_prefill_logits_match_transformers_fp32(tied):
    model = hf_model(TINY | {"tie_word_embeddings": tied})
    engine = engine_for(model)
    ids = torch.randint(0, TINY["vocab_size"], (3, 13), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model(ids).logits
    got = engine.forward_logits(ids)
    assert got.shape == (3, 13, TINY["vocab_size"])
    assert rel_err(got, expected) < 1e-4


@pytest.mark.parametrize("device", sorted({d for d, _ in VARIANTS}))
def test_bf16_is_as_close_to_fp32_truth_as_transformers_bf16(device):
    model = hf_model(TINY)
    ids = torch.randint(0, TINY["vocab_size"], (2, 24), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        truth = model(ids).logits
        hf_bf16 = model.to(device=device, dtype=torch.bfloat16)(ids.to(device)).logits.float().cpu()
    engine = engine_for(model.float().cpu(), device=device, dtype=torch.bfloat16)
    ours = engine.forward_logits(ids).cpu()
    assert rel_err(ours, truth) <= 1.25 * rel_err(hf_bf16, truth) + 1e-3
    assert rel_err(ours, truth) < 3e-2


@pytest.mark.parametrize("batch", [1, 3])  # batch 1 takes the GEMV path on GPUs
@pytest.mark.parametrize(("device", "fused"), VARIANTS)
def test_greedy_decode_matches_transformers_generate_across_a_kv_bucket(device, fused, batch):
    model = hf_model(TINY | {"tie_word_embeddings": True})
    engine = engine_for(model, device=device, graphs=device == "cuda", fused=fused)
    prompt = KV_BUCKET - 4  # decoding crosses the first attention-length bucket
    ids = torch.randint(0, TINY["vocab_size"], (batch, prompt), generator=torch.Generator().manual_seed(3))
    out = engine.generate(ids, 10, temperature=0.0)
    with torch.no_grad():
        expected = model.generate(
            ids,
            max_new_tokens=10,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
            attention_mask=torch.ones_like(ids),
        )[:, prompt:]
    assert torch.equal(out.tokens.cpu(), expected)


@pytest.mark.parametrize(("device", "fused"), VARIANTS)
def test_sampled_logprobs_are_the_full_tempered_distribution(device, fused):
    model = hf_model(TINY)
    engine = engine_for(model, device=device, graphs=device == "cuda", fused=fused)
    ids = torch.randint(0, TINY["vocab_size"], (4, 9), generator=torch.Generator().manual_seed(4))
    temperature, top_p = 0.7, 0.8

    def run(seed):
        gen = torch.Generator(device=device).manual_seed(seed)
        return engine.generate(ids, 12, temperature=temperature, top_p=top_p, generator=gen)

    out = run(5)
    assert torch.equal(out.tokens, run(5).tokens)  # the generator alone decides the draw
    assert not torch.equal(out.tokens, run(6).tokens)

    full = torch.cat([ids.to(device), out.tokens[:, :-1]], dim=1)
    logits = engine.forward_logits(full)[:, ids.shape[1] - 1 :] / temperature
    logp = torch.log_softmax(logits.float(), dim=-1)
    expected = logp.gather(-1, out.tokens.unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(out.logprobs, expected, atol=1e-4)

    # Every draw lies in its step's nucleus: the mass of strictly more likely tokens is below top_p.
    probs = logp.exp()
    chosen = probs.gather(-1, out.tokens.unsqueeze(-1))
    mass_above = (probs * (probs > chosen)).sum(-1)
    assert (mass_above < top_p + 1e-5).all()


@pytest.mark.parametrize(("device", "fused"), VARIANTS)
def test_bf16_decode_logprobs_agree_with_prefill(device, fused):
    """The rollout's logprobs (decode path) against a trainer-style full forward, both bf16.

    Engines disagree at bf16 by rounding alone; peers report a mean |diff| near 0.012 between rollout
    and trainer on Qwen3-8B (vime). 0.02 is that scale; a cache or position bug gives O(1).
    """
    model = hf_model(TINY)
    engine = engine_for(model, device=device, dtype=torch.bfloat16, graphs=device == "cuda", fused=fused)
    ids = torch.randint(0, TINY["vocab_size"], (4, 30), generator=torch.Generator().manual_seed(7))
    gen = torch.Generator(device=device).manual_seed(8)
    out = engine.generate(ids, 40, temperature=1.0, generator=gen)
    full = torch.cat([ids.to(device), out.tokens[:, :-1]], dim=1)
    logp = torch.log_softmax(engine.forward_logits(full)[:, ids.shape[1] - 1 :], dim=-1)
    expected = logp.gather(-1, out.tokens.unsqueeze(-1)).squeeze(-1)
    assert (out.logprobs - expected).abs().mean().item() < 0.02


def test_weights_reload_in_place_changes_outputs():
    a, b = hf_model(TINY, seed=0), hf_model(TINY, seed=1)
    engine = engine_for(a)
    before = {k: v.data_ptr() for k, v in engine.parameters().items()}
    ids = torch.randint(0, TINY["vocab_size"], (1, 5))
    engine.load_hf_state_dict(b.state_dict())
    assert {k: v.data_ptr() for k, v in engine.parameters().items()} == before
    with torch.no_grad():
        assert rel_err(engine.forward_logits(ids), b(ids).logits) < 1e-4


def test_load_rejects_bad_state_dicts():
    model = hf_model(TINY)
    engine = engine_for(model)
    sd = model.state_dict()
    with pytest.raises(InputError, match=r"unknown parameter 'model.layers.9.mlp.up_proj.weight'"):
        engine.load_hf_state_dict(sd | {"model.layers.9.mlp.up_proj.weight": torch.zeros(1)})
    with pytest.raises(InputError, match=r"model.norm.weight has shape \(3,\)"):
        engine.load_hf_state_dict(sd | {"model.norm.weight": torch.zeros(3)})
    partial = {k: v for k, v in sd.items() if "layers.1." not in k}
    with pytest.raises(InputError, match="parameters missing"):
        engine.load_hf_state_dict(partial)
    assert engine.load_hf_state_dict(partial, strict=False) > 0


def test_generate_rejects_shapes_beyond_the_static_cache():
    engine = ReferenceEngine(TINY, device="cpu", dtype=torch.float32, max_batch=2, max_seq_len=16)
    with pytest.raises(InputError, match="max_batch=2"):
        engine.generate(torch.zeros(3, 4, dtype=torch.long), 2)
    with pytest.raises(InputError, match="max_seq_len=16"):
        engine.generate(torch.zeros(1, 10, dtype=torch.long), 7)


def test_sample_respects_top_p_and_reports_full_distribution_logprob():
    logits = torch.log(torch.tensor([[0.7, 0.2, 0.1]])).repeat(2000, 1)
    ids, lp = sample(logits, 1.0, 0.5, torch.Generator().manual_seed(0))
    assert (ids == 0).all()  # only the top token survives p = 0.5
    torch.testing.assert_close(lp, torch.full((2000,), 0.7).log())
    ids, _ = sample(logits, 1.0, 1.0, torch.Generator().manual_seed(0))
    assert abs(float((ids == 1).float().mean()) - 0.2) < 0.03


def test_kernel_failures_are_told_apart_from_other_errors():
    """Only a Triton compile or launch-resource failure turns the fused step off; anything else is raised."""
    pytest.importorskip("triton")
    from triton.runtime.errors import OutOfResources

    from rocmstack.gpu.engine import _kernel_failure

    reason = _kernel_failure(OutOfResources(98304, 65536, "shared memory"))
    assert reason is not None and reason.startswith("OutOfResources: ") and "\n" not in reason
    assert _kernel_failure(ValueError("bad shape")) is None
    assert _kernel_failure(RuntimeError("CUDA error: out of memory")) is None
