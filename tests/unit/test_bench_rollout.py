from __future__ import annotations

from pathlib import Path

import pytest

from rocmstack.bench.rollout import RolloutSpec, measure_copy_bandwidth, run_rollout
from rocmstack.gpu.engine_bench import EngineBatch, EngineRequest, EngineRun, Launch, summarise
from rocmstack.gpu.rollout import CATALOGUE, RolloutEntry
from rocmstack.status import Status

TINY = {
    "vocab_size": 96, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
}  # fmt: skip


def test_copy_bandwidth_is_a_plausible_rate():
    bw = measure_copy_bandwidth("cpu", nbytes=8 << 20, repeats=5)
    assert 1e8 < bw < 1e13  # bytes/s: more than a floppy, less than any HBM


def test_reference_and_hf_share_weights_and_definitions():
    spec = RolloutSpec(
        shape_name="tiny", config=TINY, batches=(2,), prompt_len=4, new_tokens=6, engines=("hf", "reference"),
        device="cpu", dtype="float32", temperature=0.0,
    )  # fmt: skip
    seen = []
    report = run_rollout(spec, progress=seen.append)
    assert any("reference" in m for m in seen) and any("hf generate" in m for m in seen)
    by_engine = {r["engine"]: r for r in report["results"]}
    for r in by_engine.values():
        # tokens/s counts every generated token over the whole run, decode tokens/s the decode steps only
        assert r["tokens_per_s"] < r["decode_tokens_per_s"] * 6 / 5 * 1.5
        assert r["roofline_tokens_per_s"] == pytest.approx(
            2 * report["device"]["copy_bandwidth_gb_s"] * 1e9 / r["bytes_per_step"]
        )
    assert by_engine["reference"]["fused"] is False and by_engine["reference"]["graphs"] is False
    assert report["shape"]["kv_bytes_per_token"] == 2 * 2 * 2 * 32 * 4


def busy_engine(req: EngineRequest, tmp: Path, launch: Launch) -> EngineRun:
    """An engine whose batch 1 was timed on a machine too busy to order its calls (figures of a CI run)."""
    quiet = summarise({"batch": 2, "t1_s": [0.01], "tn_s": [0.06]}, req.new_tokens)
    busy = summarise({"batch": 1, "t1_s": [0.107], "tn_s": [0.045]}, req.new_tokens)
    return EngineRun(
        engine="busy",
        status=Status.PASS,
        version="0",
        engine_starts=1,
        batches=tuple(
            EngineBatch(
                batch=b,
                prefill_s=s["prefill_s"],
                total_s=s["total_s"],
                step_s=s.get("step_s"),
                unmeasured=s.get("unmeasured"),
            )
            for b, s in ((1, busy), (2, quiet))
        ),
    )


def test_a_batch_whose_decode_was_not_measured_is_an_error_row_without_figures():
    entry = RolloutEntry(name="busy", build=CATALOGUE.entry("vllm").build, served=True, bench=busy_engine)
    catalogue = CATALOGUE.adding(entry)
    spec = RolloutSpec(
        shape_name="tiny", config=TINY, batches=(1, 2), prompt_len=4, new_tokens=6, engines=("busy",),
        device="cpu", dtype="float32", catalogue=catalogue,
    )  # fmt: skip
    rows = {r["batch"]: r for r in run_rollout(spec)["results"]}
    assert rows[1]["status"] == Status.ERROR and rows[1]["reason"].startswith("decode not measured")
    assert (
        rows[1]["decode_tokens_per_s"] is None and rows[1]["tokens_per_s"] is None and rows[1]["mbu"] is None
    )
    assert rows[2]["status"] == Status.PASS and rows[2]["median_step_ms"] == pytest.approx(10)
