"""visibility-masks and ray-env."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot

from rocmstack.doctor.checks.visibility import ray_env, visibility_masks
from rocmstack.doctor.model import DoctorOptions
from rocmstack.status import Status

OPTS = DoctorOptions()


def amd(env):
    return make_snapshot(env=env, kfd_archs=(90402,) * 8, amd_render=8)


def test_masks():
    assert visibility_masks(amd({}), OPTS).status == Status.PASS
    ok = visibility_masks(amd({"HIP_VISIBLE_DEVICES": "2,3", "CUDA_VISIBLE_DEVICES": "2,3"}), OPTS)
    assert ok.status == Status.PASS and "physical [2, 3]" in ok.summary
    assert visibility_masks(amd({"ROCR_VISIBLE_DEVICES": "1"}), OPTS).status == Status.FAIL
    one_gpu = make_snapshot(env={"CUDA_VISIBLE_DEVICES": "1"}, nvidia=1)
    assert visibility_masks(one_gpu, OPTS).status == Status.FAIL


def test_ray_env():
    assert ray_env(amd({}), OPTS).status == Status.PASS
    both = {
        "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES": "1",
        "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1",
    }
    assert ray_env(amd(both), OPTS).status == Status.PASS  # vime's image sets both
    # slime's AMD run script sets NOSET_HIP alone: on AMD Ray then sets no mask at all (amd_gpu.py)
    assert ray_env(amd({"RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES": "1"}), OPTS).status == Status.PASS
    cuda_only = {"RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}
    assert ray_env(amd(cuda_only), OPTS).status == Status.WARN  # no effect on AMD
    stale = ray_env(amd({**cuda_only, "CUDA_VISIBLE_DEVICES": "0,1", "HIP_VISIBLE_DEVICES": "0,1"}), OPTS)
    assert stale.status == Status.FAIL and "CUDA_VISIBLE_DEVICES=0,1 stays" in stale.summary
    assert ray_env(amd({"RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES": "1"}), OPTS).status == Status.WARN
    assert ray_env(amd({"RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "1"}), OPTS).status == Status.WARN
    assert ray_env(amd({"RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0"}), OPTS).status == Status.PASS
