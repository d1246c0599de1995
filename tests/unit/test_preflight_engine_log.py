"""What the engine's own log says it selected, and where a run broke: verbatim vLLM logs (an H200 start of
vLLM 0.24, a failing start of vLLM 0.32's CPU build; tests/fixtures/preflight/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

from rocmstack.preflight.engine_log import failure, selections

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
