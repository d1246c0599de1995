"""`rocmstack preflight` running a lab's vLLM server command for real: vLLM's CPU build (the `engine` tier),
a 2-layer model of Qwen3-0.6B's architecture, one completion, the server stopped. The same command with a
fault in the job's own engine args fails, naming the process and the engine's own reason."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import VLLM_PYTHON

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "tests/fixtures/preflight/qwen3-0.6b.config.json"
# the lab's server command as it launches it; --gpu-memory-utilization is the CPU backend's share of host
# memory, which a 24 GB CI machine does not have at vLLM's default 0.92
JOB = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/Qwen3-0.6B", "--dtype", "bfloat16",
       "--enforce-eager", "--gpu-memory-utilization", "0.2"]  # fmt: skip


def _preflight(tmp_path: Path, *job: str) -> tuple[int, dict[str, Any]]:
    if not VLLM_PYTHON.is_file():
        pytest.skip(f"no vLLM venv at {VLLM_PYTHON} (make vllm-venv)")
    # absolute, not resolved: the venv's python is a link to the base interpreter, and the step runs elsewhere
    bindir = VLLM_PYTHON.absolute().parent
    env = dict(os.environ, PYTHONPATH=str(ROOT), PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}")
    cmd = [str(VLLM_PYTHON), "-m", "rocmstack", "preflight", "--json", "--model-config", str(CONFIG)]
    cmd += ["--output", str(tmp_path / "work"), "--timeout", "4m", "--", *job]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=500, check=False)
    assert proc.stdout.strip(), f"no report (rc {proc.returncode}):\n{proc.stderr[-3000:]}"
    return proc.returncode, json.loads(proc.stdout)


def test_the_jobs_own_server_serves_a_completion_on_the_shrunk_model(tmp_path):
    code, report = _preflight(tmp_path, *JOB)
    assert (code, report["passed"]) == (0, True), (report.get("failure"), report.get("run"))
    assert report["framework"] == "vllm" and report["model"]["layers_before"] == 28
    assert json.loads((tmp_path / "work/model/config.json").read_text())["num_hidden_layers"] == 2
    assert report["run"]["ready"] and report["run"]["answer"] is not None
    assert any(s["text"].startswith("Resolved architecture: Qwen3ForCausalLM") for s in report["selections"])
    assert report["failure"] is None
    # each Python process the launcher started recorded itself: the server, its engine core, its worker
    names = " ".join(p["worker"] for p in report["workers"]["processes"])
    assert report["workers"]["recorded"] >= 3 and "vllm.entrypoints.openai.api_server" in names, names
    assert any(p["torch"] is not None for p in report["workers"]["processes"])  # the engine imported torch


def test_a_fault_in_the_jobs_engine_args_fails_naming_the_engines_reason(tmp_path):
    code, report = _preflight(tmp_path, *JOB, "--tensor-parallel-size", "3")  # 16 heads do not split in 3
    assert (code, report["passed"]) == (1, False)
    assert report["verdict"].startswith("FAILED: the server exited (1) before it was ready")
    lines = "\n".join(report["failure"]["lines"])
    assert "Total number of attention heads (16) must be divisible by tensor parallel size (3)" in lines
