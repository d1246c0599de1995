"""alloc-allreduce, sglang-env, version-floors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot, probe

from rocmstack.doctor.checks.runtime import alloc_allreduce, rocm_version, sglang_env, version_floors
from rocmstack.doctor.model import DoctorOptions
from rocmstack.status import Status

AMD = {"kfd_archs": (90402,), "amd_render": 1}


def opts(tmp_path, **kw):
    return DoctorOptions(image_root=tmp_path, **kw)


def test_alloc_precedence_and_tp(tmp_path):
    env = {"PYTORCH_ALLOC_CONF": "expandable_segments:True"}
    assert (
        alloc_allreduce(make_snapshot(env=env, **AMD), opts(tmp_path, tensor_parallel=2)).status
        == Status.FAIL
    )
    assert alloc_allreduce(make_snapshot(env=env, **AMD), opts(tmp_path)).status == Status.WARN
    assert (
        alloc_allreduce(make_snapshot(env=env, **AMD), opts(tmp_path, tensor_parallel=1)).status
        == Status.PASS
    )
    masked = {**env, "PYTORCH_CUDA_ALLOC_CONF": "garbage_collection_threshold:0.6"}
    assert (
        alloc_allreduce(make_snapshot(env=masked, **AMD), opts(tmp_path, tensor_parallel=8)).status
        == Status.PASS
    )
    assert (
        alloc_allreduce(make_snapshot(env=env, nvidia=1), opts(tmp_path, tensor_parallel=8)).status
        == Status.PASS
    )


def test_alloc_with_the_verl_patch_marker(tmp_path):
    (tmp_path / "patches/applied").mkdir(parents=True)
    (tmp_path / "patches/applied/verl-rollout-defaults.json").write_text(
        json.dumps({"id": "verl-rollout-defaults", "component": "verl", "target": "rollout.yaml"})
    )
    env = {"PYTORCH_HIP_ALLOC_CONF": "expandable_segments:True"}
    assert (
        alloc_allreduce(make_snapshot(env=env, **AMD), opts(tmp_path, tensor_parallel=2)).status
        == Status.PASS
    )


def test_sglang(tmp_path):
    assert sglang_env(make_snapshot(**AMD), opts(tmp_path)).status == Status.SKIP
    verl = {"SGLANG_USE_AITER": "0", "SGLANG_ATTENTION_BACKEND": "triton"}
    assert (
        sglang_env(make_snapshot(env=verl, dists={"sglang": "0.5.9"}, **AMD), opts(tmp_path)).status
        == Status.PASS
    )
    no_aiter = {"SGLANG_USE_AITER": "1"}
    assert (
        sglang_env(make_snapshot(env=no_aiter, dists={"sglang": "0.5.9"}, **AMD), opts(tmp_path)).status
        == Status.FAIL
    )


def test_sglang_rmsnorm_patch_missing_in_an_image(tmp_path):
    (tmp_path / "patches/applied").mkdir(parents=True)
    (tmp_path / "patches/applied/rtld-local.json").write_text(
        json.dumps({"id": "rtld-local", "component": "rocm_sdk", "target": "__init__.py"})
    )
    snap = make_snapshot(env={"SGLANG_USE_AITER": "0"}, dists={"sglang": "0.5.9"}, **AMD)
    assert sglang_env(snap, opts(tmp_path)).status == Status.WARN


def test_version_floors(tmp_path):
    torch = probe("torch", {"hip": "7.0.51831"})
    assert (
        version_floors(
            make_snapshot(dists={"vllm": "0.11.0"}, probes={"torch": torch}, **AMD), opts(tmp_path)
        ).status
        == Status.FAIL
    )
    assert (
        version_floors(
            make_snapshot(dists={"vllm": "0.27.0"}, probes={"torch": torch}, **AMD), opts(tmp_path)
        ).status
        == Status.PASS
    )  # ROCm 7.0 without a forking checkpoint writer: the 7.1 fix is a note
    new = probe("torch", {"hip": "7.14.0"})
    assert (
        version_floors(
            make_snapshot(dists={"vllm": "0.27.0"}, probes={"torch": new}, **AMD), opts(tmp_path)
        ).status
        == Status.PASS
    )
    old_rocm = probe("torch", {"hip": "6.4.1"})
    assert (
        version_floors(
            make_snapshot(dists={"vllm": "0.27.0"}, probes={"torch": old_rocm}, **AMD), opts(tmp_path)
        ).status
        == Status.FAIL
    )
    assert version_floors(make_snapshot(nvidia=1), opts(tmp_path)).status == Status.SKIP


def test_rocm_version_sources():
    assert rocm_version(make_snapshot(dists={"torch": "2.9.1+rocm7.0.2"})) == "7.0.2"
    assert rocm_version(make_snapshot(dists={"rocm-sdk-core": "7.14.0"})) == "7.14.0"


ROCM_70 = probe("torch", {"hip": "7.0.51831"})  # the HIP version a ROCm 7.0 torch reports


def test_version_floors_rocm70_alone_passes_with_the_caveat(tmp_path):
    # Labs pin ROCm 7.0 on purpose (7.2 does not return memory after IPC export / VMM unmap): 7.0 with no
    # checkpoint writer that forks after pinned non_blocking copies is no finding.
    snap = make_snapshot(dists={"vllm": "0.27.0"}, probes={"torch": ROCM_70}, **AMD)
    result = version_floors(snap, opts(tmp_path))
    assert result.status == Status.PASS, result
    note = " ".join(result.details)
    assert "non_blocking=True" in note and "fork" in note and "rocm-systems PR #356" in note


def test_version_floors_warns_on_megatron_without_slime_guard(tmp_path):
    snap = make_snapshot(
        dists={"vllm": "0.27.0", "megatron-core": "0.13.0"}, probes={"torch": ROCM_70}, **AMD
    )
    result = version_floors(snap, opts(tmp_path))
    assert result.status == Status.WARN and "Megatron-Core 0.13.0" in result.summary, result
    assert result.fix is not None and "patch" not in result.fix
    assert "non_blocking=False" in result.fix and "ROCm >= 7.1" in result.fix and "async" in result.fix


def test_version_floors_slime_guards_megatron(tmp_path):
    dists = {"megatron-core": "0.13.0", "slime": "0.4.0"}
    result = version_floors(make_snapshot(dists=dists, probes={"torch": ROCM_70}, **AMD), opts(tmp_path))
    assert result.status == Status.PASS and "rocm_checkpoint_writer" in " ".join(result.details), result
    fixed = probe("torch", {"hip": "7.1.25424"})
    result = version_floors(make_snapshot(dists=dists, probes={"torch": fixed}, **AMD), opts(tmp_path))
    assert result.status == Status.PASS and "PR #356" not in " ".join(result.details), result
