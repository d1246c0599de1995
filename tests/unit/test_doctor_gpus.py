"""gpu-count, ray-gpus, gpu-partition on snapshots built from plain values."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import TOOLS, make_snapshot, probe, tool_run

from rocmstack.doctor.checks.gpus import gpu_count, gpu_partition, ray_gpus
from rocmstack.doctor.model import DoctorOptions
from rocmstack.status import Status

OPTS = DoctorOptions()
RAY_OK = {
    "version": "2.60.0",
    "manager": "NvidiaGPUAcceleratorManager",
    "detected": 1,
    "visible_ids": None,
    "accelerator_type": "H200",
    "resolved_gpus": 1,
    "amd_detected": 0,
}
TORCH_1 = {"version": "2.11.0+cu130", "cuda": "13.0", "hip": None, "count": 1, "arch_list": ["sm_90"]}
NVML_1 = {"count": 1, "driver": "580.159.04", "archs": ["sm_90"]}


def h200(**kw):
    probes = {"torch": probe("torch", TORCH_1), "ray": probe("ray", RAY_OK), "nvml": probe("nvml", NVML_1)}
    probes.update(kw.pop("probes", {}))
    return make_snapshot(nvidia=1, probes=probes, **kw)


def test_h200_all_agree():
    result = gpu_count(h200(), DoctorOptions(expect_gpus=1))
    assert result.status == Status.PASS and "1 GPU(s), 1 visible" in result.summary


def test_expect_more_than_visible():
    result = gpu_count(h200(), DoctorOptions(expect_gpus=8))
    assert result.status == Status.FAIL and "--expect-gpus 8" in result.summary


def test_physical_sources_disagree_names_amdsmi():
    snap = make_snapshot(
        kfd_archs=(90402,) * 8, amd_render=8, probes={"amdsmi": probe("amdsmi", {"count": 0})}
    )
    result = gpu_count(snap, OPTS)
    assert result.status == Status.FAIL and "kfd=8" in result.summary and "amdsmi=0" in result.summary
    assert "amdsmi-duplicate" in result.fix


def test_torch_sees_none():
    snap = h200(probes={"torch": probe("torch", {**TORCH_1, "count": 0})})
    result = gpu_count(snap, OPTS)
    assert result.status == Status.FAIL and "torch sees 0" in result.summary


def test_deep_runtime_disagrees_with_device_count():
    snap = h200(probes={"torch": probe("torch", {**TORCH_1, "runtime_count": 0})})
    assert "initialised runtime 0" in gpu_count(snap, OPTS).summary


def test_no_gpu_fails_unless_none_is_expected():
    result = gpu_count(make_snapshot(), OPTS)
    assert result.status == Status.FAIL and result.summary == "no source finds a GPU"
    assert "--expect-gpus 0" in result.fix
    assert gpu_count(make_snapshot(), DoctorOptions(expect_gpus=0)).status == Status.PASS
    result = gpu_count(make_snapshot(), DoctorOptions(expect_gpus=1))
    assert result.status == Status.FAIL and result.summary.startswith("--expect-gpus 1, but 0 visible")


def test_ray_would_register_the_gpu():
    assert ray_gpus(h200(), OPTS).status == Status.PASS


def test_ray_zero_on_amd_names_amdsmi():
    ray = {
        **RAY_OK,
        "manager": "NvidiaGPUAcceleratorManager",
        "detected": 0,
        "resolved_gpus": 0,
        "amd_detected": 0,
    }
    snap = make_snapshot(
        kfd_archs=(90402,),
        amd_render=1,
        probes={
            "ray": probe("ray", ray),
            "amdsmi": probe(
                "amdsmi",
                {
                    "import_error": "ModuleNotFoundError: No module named 'amdsmi'",
                    "import_error_type": "ModuleNotFoundError",
                },
            ),
        },
    )
    result = ray_gpus(snap, OPTS)
    assert result.status == Status.FAIL and "No module named 'amdsmi'" in result.summary
    assert "share/amd_smi" in result.fix


def test_ray_error_from_masks():
    ray = {
        **RAY_OK,
        "visible_error": "RuntimeError: Please use HIP_VISIBLE_DEVICES instead of ROCR_VISIBLE_DEVICES",
    }
    result = ray_gpus(h200(probes={"ray": probe("ray", ray)}), OPTS)
    assert result.status == Status.FAIL and "ROCR_VISIBLE_DEVICES" in result.summary


def test_ray_not_installed_or_not_run():
    no_ray = h200(
        probes={"ray": probe("ray", {"import_error": "ModuleNotFoundError: No module named 'ray'"})}
    )
    assert ray_gpus(no_ray, OPTS).status == Status.SKIP
    fast = make_snapshot(not_run={"ray": "skipped by --fast"})
    assert "--fast" in ray_gpus(fast, OPTS).summary
    crashed = h200(probes={"ray": probe("ray", None, returncode=-11)})
    assert ray_gpus(crashed, OPTS).status == Status.ERROR


def test_partition_modes():
    assert gpu_partition(make_snapshot(), OPTS).status == Status.SKIP
    spx = make_snapshot(kfd_archs=(90402,), partitions={"card0": "SPX"})
    assert gpu_partition(spx, OPTS).status == Status.PASS
    cpx = make_snapshot(kfd_archs=(90402,) * 8, partitions={"card0": "CPX"})
    assert gpu_partition(cpx, OPTS).status == Status.PASS  # partitioned on purpose: a note, no warning
    assert gpu_partition(cpx, DoctorOptions(expect_gpus=1)).status == Status.FAIL


CPX_NODE = {  # 8 MI300X in CPX: 64 KFD nodes and render nodes, one current_compute_partition per card
    "kfd_archs": (90402,) * 64,
    "amd_render": 64,
    "partitions": {f"card{i}": "CPX" for i in range(8)},
}


def test_partition_expected_count_is_as_intended():
    result = gpu_partition(make_snapshot(**CPX_NODE), DoctorOptions(expect_gpus=64))
    assert result.status == Status.PASS and "CPX" in result.summary, result
    cards = gpu_partition(make_snapshot(**CPX_NODE), DoctorOptions(expect_gpus=8))
    assert cards.status == Status.FAIL and "counts cards" in cards.summary, cards


def test_partition_expected_count_after_masks():
    snap = make_snapshot(env={"HIP_VISIBLE_DEVICES": "0,1"}, **CPX_NODE)
    result = gpu_partition(snap, DoctorOptions(expect_gpus=2))
    assert result.status == Status.PASS, result


def test_partition_without_expect_passes_uniform_and_warns_mixed():
    result = gpu_partition(make_snapshot(**CPX_NODE), OPTS)
    assert result.status == Status.PASS and "CPX" in result.summary, result
    assert "--expect-gpus 64" in " ".join(result.details), result
    mixed = make_snapshot(kfd_archs=(90402,) * 9, amd_render=9, partitions={"card0": "CPX", "card1": "SPX"})
    result = gpu_partition(mixed, OPTS)
    assert result.status == Status.WARN and "card0=CPX" in result.summary and "card1=SPX" in result.summary
    assert "compute-partition" in (result.fix or "")


def test_partition_from_amd_smi_text():
    text = (TOOLS / "amd-smi-partition-spx-4gpu.txt").read_text()
    snap = make_snapshot(
        kfd_archs=(90402,) * 4,
        amd_render=4,
        tools={"amd-smi-partition": tool_run(("amd-smi", "partition", "--json"), stdout=text)},
    )
    result = gpu_partition(snap, DoctorOptions(expect_gpus=4))
    assert result.status == Status.PASS and "SPX" in result.summary, result
