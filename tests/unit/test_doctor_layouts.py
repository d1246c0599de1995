"""The layout checks (masks per actor, IPC across masks, communicator churn, many IPC handles) over probe
results: the H200 runs in docs/evidence (healthy and with faults injected through the environment), AMD
failures replayed from public reports (verbatim, source next to each), and edited copies for what a healthy
machine cannot show."""

from __future__ import annotations

import copy
import dataclasses
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot

from rocmstack.doctor.checks import layouts
from rocmstack.doctor.model import DoctorOptions
from rocmstack.status import Status

EVIDENCE = Path(__file__).resolve().parents[2] / "docs" / "evidence" / "doctor-layouts-h200-2026-12-02"
OPTS = DoctorOptions(sysfs_root=Path("/nonexistent"), env={})


def active(name: str) -> dict:
    return json.loads((EVIDENCE / f"{name}.json").read_text())["active"]


HEALTHY = active("layouts")


def snap(data: dict, **kwargs):
    return dataclasses.replace(make_snapshot(**kwargs), active=data)


def amd_snap(data: dict):
    return snap(data, kfd_archs=(90402,), kfd_device_ids=(0x74A1,))


def test_healthy_h200_passes_every_layout_check():
    s = snap(HEALTHY)
    results = {c.id: c.run(s, OPTS) for c in layouts.CHECKS}
    assert {k: r.status for k, r in results.items()} == dict.fromkeys(results, Status.PASS), results
    assert "every Ray-masked actor and its engine worker see the one GPU Ray gave them" in (
        results["actor-masks"].summary
    )
    assert "20 fresh nccl communicator(s)" in results["communicator-churn"].summary
    assert "64 IPC handles of 4 MiB per GPU" in results["ipc-many-handles"].summary
    # one GPU: the index-other-than-0 case was not tried, and the verdict says so
    assert any("not tried (one GPU here)" in d for d in results["weight-sync-masks"].details)


def test_the_full_level2_run_on_the_h200_has_the_same_verdicts():
    s = snap(active("level2-all"))
    assert all(c.run(s, OPTS).status == Status.PASS for c in layouts.CHECKS)


def test_num_gpus_zero_actors_with_an_empty_mask_warn():
    # H200, RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=1: Ray gave the num_gpus=0 actor CUDA_VISIBLE_DEVICES=""
    r = layouts.actor_masks(snap(active("override-on-zero")), OPTS)
    assert r.status == Status.WARN and "num_gpus=0 see no GPU (CUDA_VISIBLE_DEVICES=)" in r.summary
    assert "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO" in r.fix


def test_an_inherited_mask_that_lists_a_gpu_twice_fails():
    # H200, CUDA_VISIBLE_DEVICES=0,0 exported before Ray: the unmasked actor inherits it and sees nothing
    r = layouts.actor_masks(snap(active("twice")), OPTS)
    assert r.status == Status.FAIL
    text = " ".join(r.details)
    assert "CUDA_VISIBLE_DEVICES lists device 0 twice" in text
    assert "sees 0 of this node's 1 GPU(s) (CUDA_VISIBLE_DEVICES=0,0)" in text


def test_a_communicator_that_cannot_bootstrap_names_the_last_error():
    # H200, NCCL_SOCKET_IFNAME=nosuchif0: every init fails; NCCL's cause is on torch's "Last error:" line
    r = layouts.communicator_churn(snap(active("no-socket")), OPTS)
    assert r.status == Status.FAIL and r.summary == "3 of 3 communicator round(s) failed (nccl)"
    assert "last error: Bootstrap : no socket interface found" in r.details[0]
    assert "found no network interface for its bootstrap" in r.details[0]


def _masks_data(masked_env: dict, worker_devices: list | None = None) -> dict:
    """One AMD GPU's actor-masks data in the probe's shape, with the given masked actor's environment."""
    dev = {"index": 0, "uuid": "GPU-3f4c0b8a2e6e1f2a", "name": "AMD Instinct MI300X", "ok": True}
    masked = {"env": masked_env, "count": 1, "devices": [dev], "ray_gpu_ids": ["1"], "index": 0}
    masked["worker"] = {"env": masked_env, "count": 1, "devices": worker_devices or [dev]}
    whole = {"env": {}, "count": 1, "devices": [dev], "ray_gpu_ids": ["1"], "index": 0}
    whole["worker"] = {"env": {}, "count": 1, "devices": [dev]}
    return {"actor_masks": {"ranks": 1, "masked": [masked], "whole": [whole], "zero": whole, "ipc": []}}


def test_a_worker_with_rocr_set_and_hip_unset_fails():
    # vllm-project/vllm#12572: a vLLM rank on MI250X/MI300X under Ray ran with
    #   ROCR_VISIBLE_DEVICES="1"
    #   CUDA_VISIBLE_DEVICES="0,1"
    r = layouts.actor_masks(
        amd_snap(_masks_data({"ROCR_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "0,1"})), OPTS
    )
    assert r.status == Status.FAIL
    assert "ROCR_VISIBLE_DEVICES is set without HIP_VISIBLE_DEVICES" in " ".join(r.details)


def test_a_worker_device_that_cannot_be_opened_fails():
    # vllm-project/vllm#21522 (MI250, Ray backend, TP 2): "RuntimeError: HIP error: invalid device ordinal"
    bad = {"index": 0, "ok": False, "error": "RuntimeError: HIP error: invalid device ordinal"}
    r = layouts.actor_masks(amd_snap(_masks_data({"HIP_VISIBLE_DEVICES": "1"}, [bad])), OPTS)
    assert r.status == Status.FAIL
    assert "engine worker sees []" in " ".join(r.details)


def test_hip_and_cuda_masks_that_disagree_fail():
    env = {"HIP_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}
    r = layouts.actor_masks(amd_snap(_masks_data(env)), OPTS)
    assert r.status == Status.FAIL and "disagree" in " ".join(r.details)


def test_two_bundles_on_one_gpu_fail():
    data = copy.deepcopy(HEALTHY)
    am = data["actor_masks"]
    am["ranks"] = 2
    am["masked"] = am["masked"] * 2
    am["whole"] = [dict(am["whole"][0], devices=am["whole"][0]["devices"] * 2)] * 2
    r = layouts.actor_masks(snap(data), OPTS)
    assert r.status == Status.FAIL and "both use GPU" in " ".join(r.details)


def test_ray_gpu_actors_without_a_gpu_fail_and_no_ipc_is_claimed():
    # A Ray node that declares GPUs torch cannot see (tests/integration/test_doctor_layouts.py makes one)
    data = copy.deepcopy(HEALTHY)
    for view in data["actor_masks"]["masked"] + data["actor_masks"]["whole"]:
        view.update(count=0, devices=[])
        view["worker"].update(count=0, devices=[])
    data["actor_masks"].update(ipc=[], ipc_skipped="2 of the GPU actors see no GPU (actor-masks says why)")
    s = snap(data)
    r = layouts.actor_masks(s, OPTS)
    assert r.status == Status.FAIL and "Ray gave it GPU 0 but torch sees 0 device(s)" in " ".join(r.details)
    assert layouts.weight_sync_masks(s, OPTS).status == Status.SKIP


def test_an_ipc_handle_that_does_not_open_across_masks_fails():
    # ROCm/rocm-systems#2209: with HSA_ENABLE_IPC_MODE_LEGACY=1 the HIP runtime refuses every export:
    #   hipIpcGetMemHandle -> 1 (invalid argument)
    # (the runtime's own log line; torch raises it in the exporting process)
    data = copy.deepcopy(HEALTHY)
    rows = data["actor_masks"]["ipc"]
    rows[0] = {
        "bundle": 0,
        "direction": "masked-to-whole",
        "export_error": "hipIpcGetMemHandle -> 1 (invalid argument)",
    }
    rows[1]["remapped"] = {"ok": False, "error": "RuntimeError: HIP error: invalid device ordinal"}
    r = layouts.weight_sync_masks(snap(data), OPTS)
    assert r.status == Status.FAIL and r.summary.startswith("2 of 2 IPC handle(s) failed")
    assert "export failed: hipIpcGetMemHandle -> 1 (invalid argument)" in r.details[0]
    assert (
        "opened at the importer's own index of that GPU: RuntimeError: HIP error: invalid device ordinal"
        in (r.details[1])
    )


def test_a_handle_opened_on_another_gpu_fails():
    data = copy.deepcopy(HEALTHY)
    data["actor_masks"]["ipc"][0]["remapped"]["uuid"] = "GPU-other"
    r = layouts.weight_sync_masks(snap(data), OPTS)
    assert r.status == Status.FAIL and "opened on GPU GPU-other" in r.details[0]


def test_an_intermittent_communicator_failure_is_counted_and_named():
    # NVIDIA/nccl#1029, verbatim: the error torch raises and the CUDA cause on NCCL's "Last error:" line
    detail = (
        "NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1197, unhandled "
        "cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.3\n"
        "ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\nCuda failure 'initialization error'"
    )
    data = copy.deepcopy(HEALTHY)
    rnd = data["communicator_churn"]["rounds"][6]
    rnd["ok"] = False
    rnd["trainer"][0] = {
        "ok": False,
        "error": "DistBackendError: " + detail.splitlines()[0],
        "detail": detail,
    }
    r = layouts.communicator_churn(snap(data), OPTS)
    assert r.status == Status.FAIL and r.summary == "1 of 20 communicator round(s) failed (nccl)"
    assert r.details[0].startswith("init 7, trainer communicator (1 rank(s)) rank 0: DistBackendError")
    assert "last error: Cuda failure 'initialization error'" in r.details[0]


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        # ROCm/rocm-systems#8178, verbatim: RCCL aborts the rank during init_process_group, 3 in ~40 launches
        ("[FATAL ERROR]: HIP failure: 'invalid device pointer'", "cudaIpcOpenMemHandle"),
        # ROCm/rccl#1454, verbatim: p2p.cc:237 NCCL WARN Cuda failure 'invalid argument'
        ("p2p.cc:237 NCCL WARN Cuda failure 'invalid argument'", "refused during set-up"),
        ("a rank's process died", "abort the process"),
        ("no answer in 75 s (GetTimeoutError: Get timed out)", "hang"),
        ("something new", "unclassified"),
    ],
)
def test_communicator_failures_are_classified(text, cause):
    assert cause in layouts._cause(text)


def test_corruption_and_open_failures_with_many_handles_fail():
    data = copy.deepcopy(HEALTHY)
    gpu = data["ipc_many_handles"]["gpus"][0]
    gpu["mismatches"] = [{"round": 3, "handle": k} for k in range(40, 47)]
    r = layouts.ipc_many_handles(snap(data), OPTS)
    assert r.status == Status.FAIL
    assert r.details[0] == "bundle 0: handle 40 read other bytes after rewrite 3"
    assert r.details[-1] == "bundle 0: 2 more mismatches"
    gpu.update(mismatches=[], opened=37, error="open of handle 38: RuntimeError: HIP error: out of memory")
    r = layouts.ipc_many_handles(snap(data), OPTS)
    assert r.status == Status.FAIL and "(37 of 64 open)" in r.details[0]


def test_probes_that_judged_nothing_never_pass():
    data = copy.deepcopy(HEALTHY)
    data["communicator_churn"]["rounds"] = []
    data["ipc_many_handles"]["gpus"] = []
    data["actor_masks"]["ipc"] = []
    s = snap(data)
    for check in (layouts.communicator_churn, layouts.ipc_many_handles, layouts.weight_sync_masks):
        r = check(s, OPTS)
        assert r.status == Status.FAIL and "judged nothing" in r.summary


def test_not_run_is_a_skip():
    s = snap({})
    assert all(c.run(s, OPTS).status == Status.SKIP for c in layouts.CHECKS)


def test_an_inherited_mask_is_judged_against_the_nodes_devices_not_rays():
    # 8 GPUs, the job's shell has CUDA_VISIBLE_DEVICES=4,5: Ray counts 2, the unmasked actors inherit "4,5"
    data = copy.deepcopy(HEALTHY)
    am = data["actor_masks"]
    dev = am["whole"][0]["devices"][0]
    for view in am["whole"]:
        view["env"] = {"CUDA_VISIBLE_DEVICES": "4,5"}
        view["worker"]["env"] = view["env"]
        view["devices"] = [dev, dict(dev, index=1, uuid=dev["uuid"] + "-b")]
        view["worker"]["devices"] = view["devices"]
    am["ranks"] = 1
    s = dataclasses.replace(make_snapshot(nvidia=8), active=data)
    assert layouts.actor_masks(s, OPTS).status == Status.PASS


def test_an_image_that_sets_noset_is_judged_as_unmasked_actors():
    # verl's and vime's ROCm images set RAY_EXPERIMENTAL_NOSET_HIP/CUDA_VISIBLE_DEVICES=1 in their ENV: Ray
    # masks no actor, each sees the node and picks Ray's GPU id by index (field notes; OpenRLHF#524)
    data = copy.deepcopy(HEALTHY)
    am = data["actor_masks"]
    noset = {
        "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1",
        "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES": "1",
    }
    dev = am["whole"][0]["devices"][0]
    two = [dev, dict(dev, index=1, uuid=dev["uuid"] + "-b")]
    am["ranks"] = 2
    am["masked"] = [
        dict(
            am["masked"][0],
            env=noset,
            devices=two,
            index=i,
            ray_gpu_ids=[str(i)],
            worker={"env": noset, "devices": two},
        )
        for i in range(2)
    ]
    am["whole"] = [dict(m) for m in am["masked"]]
    am["zero"] = dict(am["zero"], env=noset, devices=two)
    r = layouts.actor_masks(snap(data), OPTS)
    assert r.status == Status.PASS, r
    assert "the environment sets RAY_EXPERIMENTAL_NOSET_*" in r.summary
    # the same image with a GPU id beyond what the actor sees fails
    am["masked"][1] = dict(am["masked"][1], index=2)
    assert layouts.actor_masks(snap(data), OPTS).status == Status.FAIL


def test_the_h200_run_with_noset_in_the_environment_passes():
    s = snap(active("noset-image"))
    r = layouts.actor_masks(s, OPTS)
    assert r.status == Status.PASS and "the environment sets RAY_EXPERIMENTAL_NOSET_*" in r.summary
    assert layouts.weight_sync_masks(s, OPTS).status == Status.PASS


def test_on_gpus_the_layout_probes_run_at_once_each_with_its_share(monkeypatch):
    """Apart, the three probes spent 31 s of a 1-GPU H200's level 2 starting actors one probe after the other."""
    import threading

    from rocmstack.doctor.collect import layouts as collect

    met = threading.Barrier(3, timeout=10)  # passes only when all three are running at the same time
    shares: dict[str, float] = {}

    def probe(name):
        def run(opts, ranks, gpu, where, progress, share):
            shares[name] = share
            met.wait()
            return {"probe": name}

        return run

    for name in ("actor_masks", "communicator_churn", "ipc_many_handles"):
        monkeypatch.setattr(collect, name, probe(name))
    out = collect.run_layouts(
        DoctorOptions(), collect.LAYOUT_PROBES, 1, True, lambda i: None, lambda line: None, gpu_share=0.5
    )
    assert out == {k: {"probe": k} for k in ("actor_masks", "communicator_churn", "ipc_many_handles")}
    assert shares == dict.fromkeys(out, 0.5 / 6)  # two kinds of actor per probe: half a GPU in all
    # without GPUs (CPU actors on a small machine) one after the other, each with half of nothing to share
    met = threading.Barrier(2, timeout=0.2)
    out = collect.run_layouts(
        DoctorOptions(),
        frozenset({"actor-masks", "ipc-many-handles"}),
        1,
        False,
        lambda i: None,
        lambda line: None,
    )
    assert all("error" in v for v in out.values())  # apart, neither meets the other


def test_the_h200_run_with_the_probes_at_once_passes_what_it_passed_apart():
    """docs/evidence/preflight-h200-2026-12-05-pass: level 2 in 51.8 s, the weight sync beside the layout probes."""
    from rocmstack.doctor.checks import fabric, memory_return

    run = Path(__file__).resolve().parents[2] / "docs/evidence/preflight-h200-2026-12-05-pass/level2.json"
    data = json.loads(run.read_text())["active"]
    assert data["phases"]["layouts"] < 31.31  # apart they took 31.31 s on this machine
    s = snap(data)
    judged = {c.id: c.run(s, OPTS).status for c in (*layouts.CHECKS, *fabric.CHECKS, *memory_return.CHECKS)}
    wanted = ("actor-masks", "communicator-churn", "ipc-many-handles", "weight-sync-ipc", "memory-return")
    assert {k: judged[k] for k in wanted} == dict.fromkeys(wanted, Status.PASS)
    assert Status.FAIL not in judged.values() and Status.ERROR not in judged.values()
