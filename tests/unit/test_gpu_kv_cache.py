from __future__ import annotations

import pytest
import torch

from rocmstack.gpu.kv_cache import KVCacheEngine
from rocmstack.gpu.rollout import make_engine
from rocmstack.smoke import task
from rocmstack.smoke.config import model_config


@pytest.fixture(scope="module")
def hf_model():
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    cfg = model_config("tiny", vocab_size=task.VOCAB_SIZE, max_positions=64)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**cfg), dtype=torch.float32).eval()
    with torch.no_grad():  # sharpen the random model so sampling is not uniform
        model.lm_head.weight.mul_(40.0)
    return cfg, model


def _full_forward_logprobs(model, prompts, tokens):
    seqs = torch.cat([prompts, tokens], dim=1)
    with torch.no_grad():
        logits = model(input_ids=seqs).logits[:, prompts.shape[1] - 1 : -1]
    return torch.log_softmax(logits.float(), -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


@pytest.mark.parametrize("name", ["kvcache", "reference"])
def test_cached_decode_logprobs_match_full_forward(hf_model, name):
    cfg, model = hf_model
    engine, got = make_engine(
        cfg, device="cpu", dtype=torch.float32, max_batch=16, max_seq_len=32, prefer=name
    )
    assert got == name
    engine.load_hf_state_dict(model.state_dict())
    prompts = task.make_prompts(16, 4, torch.Generator().manual_seed(0))
    out = engine.generate(prompts, 5, temperature=1.0, top_p=1.0, generator=torch.Generator().manual_seed(1))
    assert out.tokens.shape == (16, 5) and out.logprobs.shape == (16, 5)
    torch.testing.assert_close(
        out.logprobs, _full_forward_logprobs(model, prompts, out.tokens), atol=1e-4, rtol=0
    )
    assert len(set(map(tuple, out.tokens.tolist()))) > 1  # it samples, not one fixed answer


def test_kvcache_engine_really_reuses_the_cache(hf_model, monkeypatch):
    cfg, model = hf_model
    engine = KVCacheEngine(cfg, device="cpu", dtype=torch.float32, max_batch=4, max_seq_len=32)
    engine.load_hf_state_dict(model.state_dict())
    seen = []
    real = engine.model.forward
    monkeypatch.setattr(
        engine.model,
        "forward",
        lambda input_ids, **kw: seen.append(input_ids.shape[1]) or real(input_ids=input_ids, **kw),
    )
    engine.generate(task.make_prompts(4, 4, torch.Generator().manual_seed(0)), 4)
    assert seen == [6, 1, 1, 1]  # one prefill, then one token per step


def test_kvcache_engine_refuses_a_partial_state_dict(hf_model):
    cfg, model = hf_model
    engine = KVCacheEngine(cfg, device="cpu", dtype=torch.float32, max_batch=4, max_seq_len=32)
    sd = dict(model.state_dict())
    sd.pop("lm_head.weight")
    with pytest.raises(KeyError, match="lacks 1 tensors"):
        engine.load_hf_state_dict(sd)
