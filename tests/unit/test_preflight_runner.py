"""The preflight's run of a framework step, with a stand-in launcher that fails the way a real one can
(no traceback, an exit code): the verdict, the log's end as the failure, and a dry run's report."""

from __future__ import annotations

import json
from pathlib import Path

from rocmstack.preflight.runner import PreflightRequest, run_preflight

TINY = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 640,
    "torch_dtype": "bfloat16",
}  # fmt: skip


def _request(tmp_path: Path, argv: list[str], **kw) -> PreflightRequest:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    return PreflightRequest(tuple(argv), tmp_path / "work", "verl", config, **{"timeout_s": 60, **kw})


def test_a_launcher_that_exits_without_a_traceback_fails_with_its_last_lines(tmp_path):
    report = run_preflight(_request(tmp_path, ["sh", "-c", "echo loading; echo 'no GPU found' >&2; exit 3"]))
    assert report["passed"] is False and report["verdict"] == "FAILED: the command exited 3"
    assert report["failure"]["process"] == "main" and report["failure"]["lines"][-1] == "no GPU found"
    assert report["model"]["layers_before"] == 4 and (tmp_path / "work/model/model.safetensors").is_file()


def test_a_step_that_exits_0_without_its_step_line_did_not_run(tmp_path):
    report = run_preflight(_request(tmp_path, ["sh", "-c", "echo started"]))
    assert report["verdict"] == "FAILED: the command exited 0 but its log shows no finished step"
    ok = run_preflight(_request(tmp_path, ["sh", "-c", "echo 'step:1 - actor/pg_loss:0.1'"]))
    assert ok["passed"] is True and ok["failure"] is None


def test_a_dry_run_writes_the_inputs_and_runs_nothing(tmp_path):
    report = run_preflight(_request(tmp_path, ["python3", "-m", "verl.trainer.main_ppo"], dry_run=True))
    assert report["passed"] is None and report["verdict"] == "NOT RUN (--dry-run)"
    assert "trainer.total_training_steps=1" in report["step_argv"]
    assert (tmp_path / "work/data/train.parquet").is_file() and not (tmp_path / "work/step.log").exists()


def test_the_engines_log_level_and_warm_up_are_set_unless_the_job_sets_them(tmp_path, monkeypatch):
    monkeypatch.delenv("VLLM_LOGGING_LEVEL", raising=False)
    monkeypatch.delenv("VLLM_DEEP_GEMM_WARMUP", raising=False)
    said = 'echo "$VLLM_LOGGING_LEVEL $VLLM_DEEP_GEMM_WARMUP"; echo "step:1 - x:1"'
    report = run_preflight(_request(tmp_path, ["sh", "-c", said]))
    assert report["passed"] is True and "INFO skip" in Path(report["log"]).read_text()
    assert "VLLM_DEEP_GEMM_WARMUP: (unset) -> skip" in report["changed"]
    kept = run_preflight(_request(tmp_path, ["sh", "-c", said], env={"VLLM_DEEP_GEMM_WARMUP": "full"}))
    assert "INFO full" in Path(kept["log"]).read_text()
    assert not any(c.startswith("VLLM_DEEP_GEMM_WARMUP") for c in kept["changed"])


def test_a_failed_step_names_the_failing_process_and_its_exception_in_the_verdict(tmp_path):
    log = (
        Path(__file__).resolve().parents[1]
        / "fixtures/preflight/verl-0.9.1-h200-gpu-memory-utilization-1.5.log"
    )
    report = run_preflight(_request(tmp_path, ["sh", "-c", f"cat {log}; exit 1"]))
    assert report["verdict"].startswith(
        "FAILED: the command exited 1; vLLMHttpServer pid=12072: pydantic_core._pydantic_core.ValidationError: "
        "1 validation error for CacheConfig gpu_memory_utilization Input should be less than or equal to 1"
    )


def test_a_step_cut_at_its_limit_says_what_it_was_doing_and_in_which_process(tmp_path):
    """docs/evidence/preflight-h200-2026-12-05-pass: verl's step cut at 5 minutes inside vLLM's graph capture.
    The log's end said so in raw progress-bar redraws under Ray's coloured prefix; the verdict said nothing."""
    log = Path(__file__).resolve().parents[2] / "docs/evidence/preflight-h200-2026-12-05-pass/verl-fp8.log.gz"
    replay = f"gzip -dc {log}; sleep 30"
    report = run_preflight(_request(tmp_path, ["sh", "-c", replay], timeout_s=3))
    assert report["verdict"].startswith(
        "FAILED: the step did not finish within 3 s; last: vLLMHttpServer pid=4009: Capturing CUDA graphs "
        "(mixed prefill-decode, PIECEWISE):  25%"
    ), report["verdict"]
    failure = report["failure"]
    assert failure["process"] == "vLLMHttpServer pid=4009"
    assert "Worker pid=4342: Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%" in " ".join(
        failure["lines"]
    )
    assert not any("\\x1b" in line for line in failure["lines"])  # Ray's colours read, not printed escaped
