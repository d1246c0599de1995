"""The memory estimate against real peaks: each case runs the engine in a fresh process and reads its
peak resident memory (VmHWM) above the idle baseline (tests/unit/_memory_peak.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rocmstack.errors import InputError
from rocmstack.gpu import memory
from rocmstack.gpu.shapes import BUILTIN_SHAPES, shape_from_config

# Big enough that the estimate's terms dominate the allocator's noise, small enough for seconds of CPU.
CONFIG = {
    "model_type": "qwen3", "vocab_size": 32000, "hidden_size": 256, "intermediate_size": 768,
    "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 32,
    "tie_word_embeddings": False,
}  # fmt: skip
PEAK = Path(__file__).with_name("_memory_peak.py")
# The estimate may be at most UNDER below the measured peak (the allocator's page rounding moves a peak by a
# few hundred KB from run to run), and at most TOLERANCE times it (over-refusing a run that fits is the
# lesser fault, but a factor of two would refuse real work).
UNDER = 0.02
TOLERANCE = 1.8


def measured_peak(
    engine: str, *, batch: int, prompt_len: int, new_tokens: int, dtype: str, top_p: float
) -> int:
    args = {
        "config": CONFIG, "engine": engine, "batch": batch, "prompt_len": prompt_len,
        "new_tokens": new_tokens, "dtype": dtype, "top_p": top_p,
    }  # fmt: skip
    proc = subprocess.run(
        [sys.executable, str(PEAK), json.dumps(args)], capture_output=True, text=True, timeout=300, check=True
    )
    return json.loads(proc.stdout)["peak_bytes"]


@pytest.mark.parametrize(
    ("engine", "batch", "prompt_len", "new_tokens", "dtype", "top_p"),
    [
        ("reference", 256, 32, 8, "bfloat16", 1.0),  # sampling's [batch, vocab] tensors dominate
        ("reference", 64, 16, 8, "float32", 0.9),  # top-p sorting
        ("reference", 4, 512, 4, "float32", 1.0),  # a long prefill
        ("hf", 64, 16, 8, "float32", 1.0),  # transformers' full prefill logits
    ],
)
def test_estimate_covers_the_measured_peak(engine, batch, prompt_len, new_tokens, dtype, top_p):
    shape = shape_from_config(CONFIG)
    estimate_fn = memory.reference_engine if engine == "reference" else memory.hf_generate
    estimate = estimate_fn(
        shape, dtype_bytes=4 if dtype == "float32" else 2, batches=(batch,), prompt_len=prompt_len,
        new_tokens=new_tokens, top_p=top_p,
    )  # fmt: skip
    peak = measured_peak(
        engine, batch=batch, prompt_len=prompt_len, new_tokens=new_tokens, dtype=dtype, top_p=top_p
    )
    assert peak * (1 - UNDER) <= estimate.total <= TOLERANCE * peak, (estimate.describe(), peak)


def test_terms_by_hand():
    shape = shape_from_config(BUILTIN_SHAPES["qwen3-8b"])
    est = memory.reference_engine(shape, dtype_bytes=2, batches=(1, 64, 256), prompt_len=128, new_tokens=256)
    assert est.weights == shape.total_params() * 2 and 16e9 < est.weights < 17e9  # 8.2 B params in bf16
    assert est.kv_cache == 2 * 36 * 8 * 128 * 2 * 256 * 384  # K and V, layers, kv heads, head dim, bf16
    assert est.workspace == 0  # CPU
    gpu = memory.reference_engine(
        shape, dtype_bytes=2, batches=(1, 64), prompt_len=128, new_tokens=256, device="cuda", graphs=True
    )
    # One graph per 64-token bucket of the 384-token cache and batch size, each holding bf16 logits.
    assert gpu.workspace == memory.GPU_WORKSPACE_BYTES + 6 * (1 + 64) * shape.vocab_size * 2


def test_meminfo_is_read_in_kib():
    text = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   22000000 kB\n"
    assert memory._meminfo_available(text) == 22000000 * 1024
    assert memory._meminfo_available("MemTotal: 1 kB\n") is None
    available, source = memory.available_bytes("cpu")
    assert available and available > 0 and "MemAvailable" in source


def test_refusal_names_the_estimate_and_the_limit():
    big = memory.MemoryEstimate(what="the reference engine at batch 9", weights=2 * 10**9, kv_cache=3 * 10**9)
    small = memory.MemoryEstimate(what="the bandwidth measurement", activations=10**8)
    memory.check_fits([small], 10**9, "MemAvailable in /proc/meminfo", fix="smaller")
    with pytest.raises(InputError) as exc:
        memory.check_fits(
            [small, big], 4 * 10**9, "MemAvailable in /proc/meminfo", fix="pass a smaller --batch"
        )
    line = exc.value.one_line()
    assert "5.0 GB for the reference engine at batch 9 (weights 2.0 GB, KV cache 3.0 GB)" in line
    assert "more than the 4.0 GB MemAvailable in /proc/meminfo" in line and "--batch" in line
