from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from rocmstack.gpu.kv_cache import KVCacheEngine
from rocmstack.gpu.rollout import REGISTRY, make_engine, prompt_ids
from rocmstack.smoke import task
from rocmstack.smoke.config import ROLLOUTS, model_config


def test_registry_names_the_rollouts_in_option_order():
    assert list(REGISTRY) == ["reference", "kvcache", "vllm", "sglang"]
    assert ROLLOUTS == ("reference", "vllm", "sglang")
    assert [n for n, k in REGISTRY.items() if k.served] == ["vllm", "sglang"]
    with pytest.raises(TypeError):
        REGISTRY["other"] = REGISTRY["reference"]  # type: ignore[index]


def test_the_registry_imports_no_engine():
    code = (
        "import sys, rocmstack.gpu.rollout;"
        " print(sorted(m for m in ('torch', 'vllm', 'sglang', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_auto_is_the_reference_engine():
    from rocmstack.gpu.engine import ReferenceEngine

    cfg = model_config("tiny", vocab_size=task.VOCAB_SIZE, max_positions=64)
    engine, name = make_engine(
        cfg, device="cpu", dtype=torch.float32, max_batch=2, max_seq_len=16, prefer="auto"
    )
    assert name == "reference" and isinstance(engine, ReferenceEngine) and engine.fused is False


def test_kvcache_by_name():
    cfg = model_config("tiny", vocab_size=task.VOCAB_SIZE, max_positions=64)
    engine, name = make_engine(
        cfg, device="cpu", dtype=torch.float32, max_batch=2, max_seq_len=16, prefer="kvcache"
    )
    assert name == "kvcache" and isinstance(engine, KVCacheEngine)


def test_prompt_ids_are_the_same_for_the_same_seed_and_batch():
    a = prompt_ids(100, 4, 6, 0, "cpu")
    assert a.shape == (4, 6) and int(a.max()) < 100
    assert torch.equal(a, prompt_ids(100, 4, 6, 0, "cpu"))
    assert not torch.equal(a[:2], prompt_ids(100, 2, 6, 0, "cpu"))  # the batch size is part of the seed


def test_the_reference_engine_takes_the_bench_settings_through_the_registry():
    """The bench builds its engine here too: graphs and fused reach the reference engine (fused=True asks
    for the Triton kernels, which a CPU refuses in one line)."""
    from rocmstack.errors import InputError

    cfg = model_config("tiny", vocab_size=task.VOCAB_SIZE, max_positions=64)
    common = {
        "device": "cpu",
        "dtype": torch.float32,
        "max_batch": 2,
        "max_seq_len": 16,
        "prefer": "reference",
    }
    engine, _ = make_engine(cfg, graphs=True, fused=None, **common)
    assert engine.use_graphs is False and engine.fused is False  # neither exists on a CPU
    with pytest.raises(InputError, match="fused=True needs a GPU and Triton"):
        make_engine(cfg, fused=True, **common)


def test_the_image_engines_get_exactly_their_constructor_keywords():
    """One argument set for every factory: what it hands vLLM and SGLang is what their constructors take
    (read from the classes; neither engine is imported)."""
    import inspect

    from rocmstack.gpu.rollout import EngineArgs
    from rocmstack.gpu.sglang_rollout import SGLangRollout
    from rocmstack.gpu.vllm_rollout import VLLMRollout

    served = EngineArgs(device="cpu", dtype=torch.float32, max_batch=1, max_seq_len=8).served()
    for cls in (VLLMRollout, SGLangRollout):
        params = inspect.signature(cls.__init__).parameters
        required = {n for n, p in params.items() if p.kind is p.KEYWORD_ONLY and p.default is p.empty}
        assert required <= set(served) <= set(params), cls.__name__
