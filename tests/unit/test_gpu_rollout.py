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
