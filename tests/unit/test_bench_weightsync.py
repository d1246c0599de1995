"""Weight sync with real processes on CPU: IPC through shared memory, and a 2-rank gloo broadcast.

The GPU legs (CUDA/HIP IPC, NCCL/RCCL) run the same code with device tensors; IPC was measured on the
H200 (docs/evidence). NCCL across two GPUs is covered by the doctor's level-2 evidence (docs/evidence).
"""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from rocmstack.bench.weightsync import bench_dist, bench_ipc, hf_shapes
from rocmstack.gpu.shapes import shape_from_config

TINY = {
    "vocab_size": 96, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
}  # fmt: skip


@pytest.mark.parametrize("tied", [False, True])
def test_hf_shapes_are_transformers_state_dict(tied):
    model = Qwen3ForCausalLM(Qwen3Config(**TINY, tie_word_embeddings=tied))
    expected = {
        k: tuple(v.shape) for k, v in model.state_dict().items() if not (tied and k == "lm_head.weight")
    }
    assert hf_shapes(shape_from_config(TINY | {"tie_word_embeddings": tied})) == expected


@pytest.mark.timeout(120)
def test_ipc_push_arrives_intact():
    r = bench_ipc(TINY, device="cpu", dtype="float32", repeats=3, copy_bandwidth=10e9)
    assert r.status == "pass", r.reason
    assert r.verified and r.bytes == sum(
        torch.Size(s).numel() * 4 for s in hf_shapes(shape_from_config(TINY)).values()
    )
    assert r.median_s > 0 and r.gb_per_s > 0 and r.vs_device_copy is not None


@pytest.mark.timeout(120)
def test_two_rank_gloo_broadcast_arrives_intact():
    r = bench_dist(TINY, device="cpu", dtype="float32", repeats=2)
    assert r.method == "gloo" and r.status == "pass", r.reason
    assert r.verified and r.first_s > 0 and r.vs_device_copy is None
