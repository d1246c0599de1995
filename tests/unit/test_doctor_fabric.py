"""Level-2 checks over probe results: the H200 runs recorded in docs/evidence (real data), then edited copies
for the failures a healthy machine cannot show (an import on the wrong device, a slow GPU, RDMA + sockets)."""

from __future__ import annotations

import copy
import dataclasses
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot

from rocmstack.doctor.checks import fabric
from rocmstack.doctor.model import DoctorOptions
from rocmstack.status import Status

EVIDENCE = Path(__file__).resolve().parents[2] / "docs" / "evidence" / "doctor-levels-h200x2-2026-11-30"
HEALTHY = json.loads((EVIDENCE / "level2-healthy.json").read_text())["active"]
SOCKET = json.loads((EVIDENCE / "level2-socket.json").read_text())["active"]
OPTS = DoctorOptions(sysfs_root=Path("/nonexistent"), env={})


def snap(active):
    return dataclasses.replace(make_snapshot(), active=active)


def test_healthy_h200_passes_every_level2_check():
    s = snap(HEALTHY)
    for check in fabric.CHECKS:
        result = check.run(s, OPTS)
        # custom-allreduce is newer than this evidence (tests/unit/test_gpu_custom_allreduce.py covers it)
        if check.id == "custom-allreduce":
            assert result.status == Status.SKIP and "not run" in result.summary, result
            continue
        assert result.status == Status.PASS, (check.id, result)
    bw = fabric.collective_bandwidth(s, OPTS)
    assert "all_reduce >= 297 GB/s at 1 GiB" in bw.summary


def test_sockets_forced_miss_the_bar_and_name_the_transport():
    s = snap(SOCKET)
    bw = fabric.collective_bandwidth(s, OPTS)
    assert bw.status == Status.FAIL and "all_reduce busbw 3.1 GB/s at 1 GiB < bar 297" in bw.summary
    env = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}
    tr = fabric.collective_transport(s, dataclasses.replace(OPTS, env=env))
    assert tr.status == Status.FAIL and "NET/Socket" in tr.summary
    assert "NCCL_P2P_DISABLE=1" in " ".join(tr.details)


def test_socket_with_rdma_devices_is_named(tmp_path):
    (tmp_path / "class" / "infiniband" / "mlx5_0").mkdir(parents=True)
    tr = fabric.collective_transport(snap(SOCKET), dataclasses.replace(OPTS, sysfs_root=tmp_path))
    assert tr.status == Status.FAIL and "although RDMA devices exist (mlx5_0)" in tr.summary


def test_below_saved_baseline_warns():
    active = copy.deepcopy(HEALTHY)
    coll = active["collectives"]
    row = next(r for r in coll["rows"] if r["op"] == "all_gather" and r["nbytes"] == 1 << 30)
    key = f"{coll['gpu']}|2|all_gather|{1 << 30}"
    coll["baseline"] = {key: row["busbw"] / 0.8}
    result = fabric.collective_bandwidth(snap(active), OPTS)
    assert result.status == Status.WARN and "below 90 %" in result.summary


def test_ipc_import_on_another_device_fails_with_ids():
    active = copy.deepcopy(HEALTHY)
    entry = active["weight_sync"]["rounds"][2]["colocated"][1]
    entry.update(ok=False, error="import: RuntimeError: CUDA error: invalid argument")
    result = fabric.weight_sync_ipc(snap(active), OPTS)
    assert result.status == Status.FAIL and "1 of 10" in result.summary
    assert "start-up 3, GPU bundle 1" in result.details[0] and entry["trainer"]["device"] in result.details[0]


def test_split_checksum_mismatch_fails():
    active = copy.deepcopy(HEALTHY)
    active["weight_sync"]["rounds"][0]["split"]["rollout"]["ok"] = False
    active["weight_sync"]["rounds"][0]["split"]["ok"] = False
    result = fabric.weight_sync_broadcast(snap(active), OPTS)
    assert result.status == Status.FAIL and "checksum differs" in result.details[0]


def test_a_gpu_slower_than_its_peers_is_flagged():
    active = copy.deepcopy(HEALTHY)
    active["health"][1]["gemm_bf16_tflops"] *= 0.85
    active["health_bar"] = None
    result = fabric.gpu_gemm(snap(active), OPTS)
    assert result.status == Status.FAIL and "below its peers' median" in result.summary


def test_below_health_bar_fails():
    active = copy.deepcopy(HEALTHY)
    for h in active["health"]:
        h["hbm_copy_gbs"] = 3000.0
    result = fabric.gpu_hbm_bandwidth(snap(active), OPTS)
    assert result.status == Status.FAIL and "< bar 3900" in result.summary


def test_one_gpu_skips_collectives():
    one = json.loads((EVIDENCE / "level2-one-gpu.json").read_text())["active"]
    assert fabric.collective_bandwidth(snap(one), OPTS).status == Status.SKIP
    assert fabric.weight_sync_broadcast(snap(one), OPTS).status == Status.SKIP
    assert fabric.weight_sync_ipc(snap(one), OPTS).status == Status.PASS


@pytest.mark.parametrize("active,status", [({}, Status.SKIP), ({"error": "RaySystemError: x"}, Status.ERROR)])
def test_probe_not_run_or_broken(active, status):
    assert fabric.collective_bandwidth(snap(active), OPTS).status == status
