"""env-unknown-vars against the names grepped from the real packages (rocmstack/doctor/known_env.json)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot

from rocmstack.doctor.checks.envlint import env_unknown, known, unknown_vars
from rocmstack.doctor.model import DoctorOptions, Status


def test_the_variable_ray_never_read():
    # vllm-project/vllm#46895: RAY_EXPERIMENTAL_NOSET_CUDA_ENV_VAR was set in a recipe; Ray never read it
    assert unknown_vars({"RAY_EXPERIMENTAL_NOSET_CUDA_ENV_VAR": "1"}) == [
        ("RAY_EXPERIMENTAL_NOSET_CUDA_ENV_VAR", "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES")
    ]


def test_real_names_pass():
    env = {
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_NVLS_ENABLE": "0",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",  # cited: CUDA builds only
        "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES": "1",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "VLLM_ROCM_USE_AITER": "1",
        "RAY_health_check_period_ms": "1000",  # a C++ config entry: not judged
        "HSA_NO_SCRATCH_RECLAIM": "1",  # no owner package scanned: not judged
        "NCCL_VERSION": "2.28.3-1",  # image metadata (nvidia/cuda images)
        "PATH": "/usr/bin",
    }
    assert unknown_vars(env) == []
    result = env_unknown(make_snapshot(), DoctorOptions(env=env))
    assert result.status == Status.PASS


def test_typos_get_the_nearest_name():
    found = dict(unknown_vars({"NCCL_IB_GID_IDX": "3", "TORCH_NCCL_ASYNC_ERROR_HANDELING": "1"}))
    assert found == {
        "NCCL_IB_GID_IDX": "NCCL_IB_GID_INDEX",
        "TORCH_NCCL_ASYNC_ERROR_HANDELING": "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    }
    result = env_unknown(make_snapshot(), DoctorOptions(env={"NCCL_IB_GID_IDX": "3"}))
    assert result.status == Status.WARN and "did you mean NCCL_IB_GID_INDEX?" in result.details[0]


def test_names_come_from_real_packages():
    names, judged, sources = known()
    assert set(judged) == {"NCCL_", "RAY_", "VLLM_", "SGLANG_", "TORCH_", "PYTORCH_"}
    assert any(s.startswith("ray==") for s in sources) and any("nccl" in s for s in sources)
    assert len(names) > 1000
