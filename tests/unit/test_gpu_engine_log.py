"""What the engine's own log says it selected, and where a run broke: verbatim vLLM logs (an H200 start of
vLLM 0.24, a failing start of vLLM 0.32's CPU build; tests/fixtures/preflight/SOURCES.md)."""

from __future__ import annotations

import gzip
from pathlib import Path

from rocmstack.gpu.engine_log import failure, selections

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "docs/evidence/engine-stack-h200-2026-12-01/latency-64.log"
CPU_FAIL = ROOT / "tests/fixtures/preflight/vllm-0.32-cpu-engine-start-memory.log"


def test_the_h200_start_names_attention_sampler_gemm_and_compile():
    found = selections(H200.read_text(errors="replace"))
    by = {}
    for s in found:
        by.setdefault(s.category, []).append(s)
    assert by["attention"][0].text.startswith("Using FLASH_ATTN attention backend out of potential backends")
    assert by["attention"][0].process == "EngineCore pid=1872"
    assert any(s.text == "Using FlashAttention version 3" for s in by["attention"])
    assert any("top-p/top-k sampling disabled" in s.text for s in by["sampler"])
    assert any("DeepGEMM" in s.text or "deep_gemm" in s.text for s in by["gemm"])
    assert any(s.text == "Using V2 Model Runner" for s in by["model-runner"])
    assert not any("with config:" in s.text for s in found)  # the config dump is no selection


def test_a_failed_start_names_the_worker_that_broke_first():
    broke = failure(CPU_FAIL.read_text())
    assert broke is not None
    assert broke.process.startswith("VllmWorker-0 pid=")
    assert broke.lines[0] == "Traceback (most recent call last):"
    assert broke.lines[-1].startswith("ValueError: Available memory on node 0")
    assert broke.then is not None and "RuntimeError: Engine core initialization failed" in broke.then


def test_a_clean_log_has_no_failure():
    assert failure(H200.read_text(errors="replace").split("Bench iterations")[0]) is None
    # a warning that quotes an error's name is no error
    assert (
        failure("WARNING 12-04 23:33:43 [x.py:1] can cause fd limit errors like `OSError: [Errno 24]`")
        is None
    )


def test_a_ray_task_chain_names_the_failing_actor_and_its_own_exception():
    """verl 0.9.1's GRPO launcher on one H200, its vLLM rollout given gpu_memory_utilization=1.5: vLLM refuses
    it in the vLLMHttpServer actor, and the driver prints that inside TaskRunnerV1's RayTaskError
    (docs/evidence/preflight-h200-2026-12-05)."""
    text = (ROOT / "tests/fixtures/preflight/verl-0.9.1-h200-gpu-memory-utilization-1.5.log").read_text()
    found = failure(text)
    assert found is not None and found.process == "vLLMHttpServer pid=12072" and found.then is None
    assert found.lines[0].startswith("ray.exceptions.RayTaskError: ray::vLLMHttpServer.launch_server()")
    assert found.cause is not None
    assert found.cause.startswith(
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for CacheConfig"
    )
    assert "gpu_memory_utilization Input should be less than or equal to 1" in found.cause
    assert "input_value=1.5" in found.cause


def test_progress_bars_count_once_and_a_printed_config_is_no_selection():
    """verl 0.9.1 prints its whole config as a Python dict and vLLM's DeepGEMM warm-up draws a progress bar
    (one H200, Qwen3-30B-A3B shrunk, FP8 rollout): neither floods the selections."""
    text = (ROOT / "tests/fixtures/preflight/verl-0.9.1-h200-qwen3-30b-a3b-fp8.log").read_text()
    found = [(s.category, s.text) for s in selections(text)]
    assert ("gemm", "DeepGEMM warmup") in found and sum(1 for c, _ in found if c == "gemm") == 1
    assert ("all-reduce", "NCCL version 2.28.9+cuda13.0") in found
    assert not any(t.startswith("'") for _, t in found), found


def test_a_worker_inside_a_ray_actor_is_the_process_that_broke():
    """verl 0.9.1's GRPO loop on one H100 where flashinfer is not installed: vLLM's worker, whose lines Ray
    prefixes twice (``(vLLMHttpServer pid=8732) (Worker pid=8894) ERROR ...``), fails importing it for its
    sampler; the API server then says only "Engine core initialization failed. See root cause above."
    (tests/fixtures/preflight/SOURCES.md)."""
    text = (ROOT / "tests/fixtures/preflight/verl-0.9.1-h100-no-flashinfer.log").read_text()
    found = failure(text)
    assert found is not None and found.process == "Worker pid=8894"
    assert found.cause == "ModuleNotFoundError: No module named 'flashinfer'"
    assert found.then is not None and found.then.startswith(
        "main: RuntimeError: Engine core initialization failed. See root cause above."
    )


def test_a_selection_names_the_engine_worker_that_made_it_and_a_redraw_its_line_s_process():
    """verl 0.9.1's FP8 MoE step on one H200 (docs/evidence/preflight-h200-2026-12-06-5min): vLLM's worker
    picks the attention and MoE backends under Ray's ``(vLLMHttpServer pid=8349) (Worker pid=8579)``, and
    draws its CUDA-graph capture bar behind a ``\r`` on such a line."""
    log = ROOT / "docs/evidence/preflight-h200-2026-12-06-5min/b-warm-shipped.log.gz"
    found = selections(gzip.decompress(log.read_bytes()).decode())  # as written: each \r kept
    by_text = {s.text.split(" out of ")[0]: s.process for s in found}
    assert by_text["Using FLASH_ATTN attention backend"] == "Worker pid=8579"
    assert by_text["Using TRITON Fp8 MoE backend"] == "Worker pid=8579"
    assert by_text["Capturing CUDA graphs (decode, FULL)"] == "Worker pid=8579"
    assert by_text["Resolved architecture: Qwen3MoeForCausalLM"] == "vLLMHttpServer pid=8349"
    assert by_text["NCCL version 2.28.9+cuda13.0"] == "WorkerDict pid=7802"  # verl's FSDP worker
    assert not any(s.process == "main" for s in found)
