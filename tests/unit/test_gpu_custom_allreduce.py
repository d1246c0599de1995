"""Custom all-reduce numerics: the engine's own all-reduce against the reference on the same random data.

On CPU the engine's path is vLLM's shared-memory all-reduce (what its CpuCommunicator uses for TP groups), run
for real on two ranks from the vLLM CPU build (`make vllm-venv`). The GPU path (vLLM's CustomAllreduce against
NCCL/RCCL) needs two GPUs. A torn read cannot be made to happen on demand: it is replayed by an all-reduce that
returns the previous call's buffer for part of the tensor, which is what reading a peer's buffer before it is
written gives (vllm-project/vllm#57059)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot  # noqa: E402

from rocmstack.doctor.checks.fabric import custom_allreduce  # noqa: E402
from rocmstack.doctor.model import DoctorOptions  # noqa: E402
from rocmstack.gpu.custom_allreduce import (  # noqa: E402
    FIX,
    compare_once,
    cpu_load,
    judge,
    run_comparison,
    run_ranks,
)
from rocmstack.status import Status  # noqa: E402
from tests.conftest import VLLM_PYTHON  # noqa: E402

needs_vllm = pytest.mark.skipif(not VLLM_PYTHON.exists(), reason=f"no vLLM CPU build at {VLLM_PYTHON}")


def _snap(active: dict):
    return dataclasses.replace(make_snapshot(), active=active)


@pytest.mark.engine
@needs_vllm
def test_vllm_shm_allreduce_matches_gloo_on_two_cpu_ranks(tmp_path):
    results = run_ranks(2, device="cpu", python=str(VLLM_PYTHON), work_dir=tmp_path, repeats=3, timeout=180)
    assert [r.get("error") for r in results] == [None, None], results
    assert {r["path"] for r in results} == {"shm_allreduce"}
    status, summary, _ = judge(results)
    assert status == "pass", summary
    assert "2 ranks in 18 comparisons" in summary
    result = custom_allreduce(_snap({"custom_allreduce": {"results": results}}), DoctorOptions())
    assert result.status == Status.PASS


class TornAllReduce:
    """A sum whose second half is the previous call's output: a read of a buffer its peer had not written yet."""

    def __init__(self) -> None:
        self.previous = None

    def __call__(self, t):
        out = t * 2  # two ranks holding the same tensor
        if self.previous is not None and self.previous.numel() == out.numel():
            half = out.numel() // 2
            out[half:] = self.previous[half:]
        self.previous = out.clone()
        return out


def test_a_replayed_torn_read_fails_with_the_fix():
    done, found = run_comparison(
        TornAllReduce(),
        lambda t: t * 2,
        rank=0,
        sizes=(4096,),
        repeats=4,
        dtype_name="float32",
        device="cpu",
        load=cpu_load,
    )
    assert done == 4 and [m.repeat for m in found] == [1, 2, 3]
    assert found[0].first_index == 2048 and found[0].count >= 2000
    rows = [
        {
            "rank": 0,
            "world": 2,
            "path": "CustomAllreduce",
            "comparisons": done,
            "mismatches": [dataclasses.asdict(m) for m in found],
        }
    ]
    result = custom_allreduce(_snap({"custom_allreduce": {"results": rows}}), DoctorOptions())
    assert result.status == Status.FAIL
    assert "disagrees with the reference all-reduce in 3 of 4" in result.summary
    assert result.fix == FIX and "disable_custom_all_reduce" in FIX


def test_rounding_within_bf16_is_no_mismatch():
    a = torch.randn(1000).to(torch.bfloat16)
    b = (a.float() + a.float() * 1e-3).to(torch.bfloat16)
    assert compare_once(a, b, 1.6e-2, 1e-2)[0] == 0
    c = a.clone()
    c[7] = float("nan")
    assert compare_once(c, a, 1.6e-2, 1e-2)[0:3:2] == (1, 7)


def test_no_engine_or_one_gpu_is_a_skip(tmp_path):
    # the real worker in this environment, which has no vLLM
    results = run_ranks(2, device="cpu", python=sys.executable, work_dir=tmp_path, repeats=1, timeout=60)
    assert all("No module named 'vllm'" in r["error"] for r in results), results
    assert custom_allreduce(_snap({"custom_allreduce": {"results": results}}), DoctorOptions()).status == (
        Status.SKIP
    )
    one = _snap({"custom_allreduce": {"skipped": "1 GPU on this node: no custom all-reduce runs on one"}})
    assert custom_allreduce(one, DoctorOptions()).status == Status.SKIP
    broken = [
        {"rank": 0, "error": "RuntimeError: NCCL error"},
        {"rank": 1, "error": "exited -9 without a result"},
    ]
    assert custom_allreduce(_snap({"custom_allreduce": {"results": broken}}), DoctorOptions()).status == (
        Status.ERROR
    )
