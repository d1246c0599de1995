"""--budget: durations, and which checks fit (each probe paid once, the rest skipped and named)."""

from __future__ import annotations

import dataclasses

import pytest

from rocmstack.doctor import DoctorOptions, run_doctor
from rocmstack.doctor.budget import (
    Costs,
    Node,
    default_level,
    load_costs,
    node_of,
    plan,
)
from rocmstack.doctor.checks import BY_ID

COSTS = Costs(
    start=1.0,
    parallel={"torch": 5.0, "ray": 4.0, "tools": 3.0, "amdsmi": 1.0, "nvml": 1.0},
    sequential={"collectives": 35.0, "gpu-health": 15.0},
    checks={"gpu-ecc": 2.0},
)


def test_probes_run_in_parallel_so_a_run_costs_the_slowest_and_what_does_not_fit_is_named():
    checks = [
        BY_ID[i] for i in ("torch-arch", "alloc-allreduce", "gpu-ecc", "gpu-count", "gpu-hbm-bandwidth")
    ]
    # torch-arch starts torch and nvml (5 s, in parallel), alloc-allreduce 0.05 s, gpu-ecc starts tools
    # (3 s, under torch's 5) + its own 2 s, gpu-count adds ray and amdsmi (both under 5 s): 1 + 5 + 2.15;
    # the HBM probe runs after the snapshot: 15 s more than a 10 s budget has
    chosen = plan(checks, 10.0, costs=COSTS)
    assert [c.id for c in chosen.run] == ["torch-arch", "alloc-allreduce", "gpu-ecc", "gpu-count"]
    assert chosen.estimate_s == pytest.approx(8.15)
    ((check, added, probes),) = chosen.over
    assert (check.id, added, probes) == ("gpu-hbm-bandwidth", 15.05, ("gpu-health",))
    tight = plan(checks, 5.0, costs=COSTS)
    assert [c.id for c in tight.run] == ["alloc-allreduce"]  # every other check needs a probe of 3 s or more
    assert {c.id: p for c, _, p in tight.over}["gpu-count"] == (
        "amdsmi",
        "nvml",
        "ray",
        "tools",
        "torch",
    )


def test_fast_runs_torch_checks_at_no_cost():
    chosen = plan([BY_ID["torch-arch"]], 2.1, fast=True, costs=COSTS)  # nvml: 1 s
    assert [c.id for c in chosen.run] == ["torch-arch"]


def _tools_dir(tmp_path, *names):
    """A PATH of its own: real executables named like the vendor tools, which print nothing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in names:
        (bin_dir / name).write_text("#!/bin/sh\nexit 1\n")
        (bin_dir / name).chmod(0o755)
    return str(bin_dir)


def test_run_doctor_reports_the_checks_over_budget_as_skips(tmp_path):
    only = ("nofile-limit", "gpu-ecc")
    path = _tools_dir(tmp_path, "rocm-smi")
    report = run_doctor(DoctorOptions(fast=True, budget_s=1.5, only=only, env={"PATH": path}))
    rows = {c["id"]: c for c in report["checks"]}
    assert rows["nofile-limit"]["status"] != "skip" or "budget" not in rows["nofile-limit"]["summary"]
    assert rows["gpu-ecc"]["status"] == "skip"
    # the vendor tools start (3 s); gpu-ecc's own tools (amd-smi, nvidia-smi) are not on PATH: 0.02 s
    assert rows["gpu-ecc"]["summary"].startswith("over the budget: would add ~3.02 s (starting tools)")
    assert report["budget"]["over"] == ["gpu-ecc"]


def test_tools_not_on_path_cost_nothing(tmp_path):
    only = ("nofile-limit", "gpu-ecc")
    report = run_doctor(DoctorOptions(fast=True, budget_s=1.5, only=only, env={"PATH": _tools_dir(tmp_path)}))
    assert report["budget"]["over"] == []
    assert {c["id"]: c["status"] for c in report["checks"]}["gpu-ecc"] == "skip"  # no GPU: its own skip
    assert "budget" not in report["checks"][1]["summary"]


def test_a_budget_without_a_level_chooses_among_levels_1_and_2():
    assert default_level(None, None) == 1
    assert default_level(None, 120.0) == 2
    assert default_level(4, 900.0) == 4
    level2 = [BY_ID[i] for i in ("nofile-limit", "gpu-hbm-bandwidth", "collective-bandwidth")]
    fits = plan(level2, 30.0, costs=COSTS)
    assert [c.id for c in fits.run] == ["nofile-limit", "gpu-hbm-bandwidth"]
    assert [c.id for c, _, _ in fits.over] == ["collective-bandwidth"]


def test_checks_after_a_spent_budget_are_skipped_not_overrun(monkeypatch):
    import time as _time

    from rocmstack.doctor import runner

    real = _time.monotonic
    calls = {"n": 0}

    def slow_clock() -> float:  # every reading of the clock is 0.4 s later than the last: the probes overran
        calls["n"] += 1
        return real() + 0.4 * calls["n"]

    monkeypatch.setattr(runner.time, "monotonic", slow_clock)
    report = run_doctor(DoctorOptions(fast=True, budget_s=1.5, only=("nofile-limit", "dev-shm", "ray-env")))
    spent = [c["id"] for c in report["checks"] if "was spent before this check" in c["summary"]]
    assert spent and spent == report["budget"]["over"][-len(spent) :]


# This machine as node_of sees it (a 2-core VM, no GPU, torch and Ray installed, vLLM and amdsmi not).
CPU_NODE = Node(
    amd_hw=False,
    nvidia_hw=False,
    missing=frozenset({"vllm", "amdsmi", "loads"}),
    on_path=frozenset({"rocm-smi", "rocminfo", "dmesg"}),
)


def level_checks(level: int):
    from rocmstack.doctor.runner import select_checks

    return [c for c in select_checks(level=level) if c.scope == "node"]


def test_only_probes_that_start_here_are_charged():
    costs = load_costs()
    chosen = plan(level_checks(2), 10.0, node=CPU_NODE)
    # the whole of level 1: torch is the slowest probe (6 s); vLLM is not installed (a Python start), NVML
    # and the partition query do not start without their GPU; level 2 does not fit, but for the memory-return
    # loops, which start nothing without a GPU (a skip at no cost)
    assert [c.id for c in chosen.run] == [
        c.id for c in level_checks(2) if c.level == 1 or c.id == "memory-return"
    ]
    assert {c.level for c, _, _ in chosen.over} == {2}
    # level 2 without GPUs (CPU actors over gloo) is charged its own, far larger figures
    added = {c.id: a for c, a, _ in chosen.over}
    assert added["weight-sync-ipc"] == pytest.approx(costs.sequential_no_gpu["weight-sync"] + 0.02)
    assert costs.sequential_no_gpu["weight-sync"] > costs.sequential["weight-sync"]
    on_gpu = {c.id: a for c, a, _ in plan(level_checks(2), 10.0, node=Node()).over}
    assert on_gpu["weight-sync-ipc"] == pytest.approx(costs.sequential["weight-sync"] + 0.02)
    assert chosen.estimate_s <= 10.0
    vllm = plan([BY_ID["vllm-flavour"]], 10.0, node=CPU_NODE)
    assert vllm.estimate_s == pytest.approx(costs.start + costs.not_installed + costs.default_check)
    # where it cannot be told (the default node), every probe is charged in full
    worst = plan(level_checks(1), 10.0)
    over = {c.id: probes for c, _, probes in worst.over}
    assert "vllm" in over["vllm-flavour"]
    assert plan([BY_ID["torch-arch"]], 10.0, node=CPU_NODE).over == ()
    # no vendor tool on PATH, no AMD GPU (no partition query), no NVIDIA driver: amdsmi's Python start only
    bare = dataclasses.replace(CPU_NODE, on_path=frozenset())
    assert plan([BY_ID["gpu-partition"]], 1.6, node=bare).estimate_s == pytest.approx(1.52)
    amd = dataclasses.replace(bare, amd_hw=True, on_path=frozenset({"amd-smi"}))
    ((_, added, probes),) = plan([BY_ID["gpu-partition"]], 1.6, node=amd).over
    assert (added, probes) == (pytest.approx(3.02), ("amdsmi", "partition", "tools"))  # in parallel


def test_node_of_this_machine_asks_this_python_only(tmp_path):
    import importlib.util

    node = node_of(DoctorOptions(sysfs_root=tmp_path, dev_root=tmp_path, proc_root=tmp_path))
    assert (node.amd_hw, node.nvidia_hw) == (False, False)
    assert ("torch" in node.missing) == (importlib.util.find_spec("torch") is None)
    assert ("vllm" in node.missing) == (importlib.util.find_spec("vllm") is None)
    (tmp_path / "kfd").touch()
    assert node_of(DoctorOptions(sysfs_root=tmp_path, dev_root=tmp_path, proc_root=tmp_path)).amd_hw
    # another interpreter, or other import settings: its libraries cannot be told from here
    assert node_of(DoctorOptions(python="/opt/other/bin/python")).missing == frozenset()
    assert node_of(DoctorOptions(env={"PYTHONPATH": str(tmp_path)})).missing == frozenset()


def test_every_need_has_a_figure_and_every_figure_a_check():
    costs = load_costs()
    needs = {n for c in BY_ID.values() for n in c.needs} - {"burn-in"}  # the burn-in: --burn-in
    assert needs <= set(costs.parallel) | set(costs.sequential)
    assert set(costs.checks) | set(costs.check_tools) <= set(BY_ID)


def test_a_10s_budget_runs_what_a_full_level_1_run_runs():
    judged = {"pass", "warn", "fail", "error"}
    full = run_doctor(DoctorOptions(expect_gpus=0))
    budget = run_doctor(DoctorOptions(expect_gpus=0, budget_s=10.0, level=default_level(None, 10.0)))
    # every level-2 check is over the budget but the memory-return loops, a skip at no cost without GPUs
    assert budget["budget"]["over"] == [
        c["id"] for c in budget["checks"] if BY_ID[c["id"]].level == 2 and c["id"] != "memory-return"
    ]
    assert {c["id"] for c in budget["checks"] if c["status"] in judged} == {
        c["id"] for c in full["checks"] if c["status"] in judged
    }


def test_a_10s_budget_fits_level_1_on_the_h200_node_of_the_evidence():
    # docs/evidence/doctor-h200-2026-11-29: NVIDIA driver, nvidia-smi on PATH, no amdsmi; full level 1 4.38 s
    h200 = Node(
        amd_hw=False,
        nvidia_hw=True,
        missing=frozenset({"amdsmi", "vllm", "loads"}),
        on_path=frozenset({"nvidia-smi", "dmesg"}),
    )
    assert [c.id for c in plan(level_checks(2), 10.0, node=h200).run] == [c.id for c in level_checks(1)]
    # with vLLM installed its import (11-15 s there) cannot fit, and the checks that need it are named
    with_vllm = dataclasses.replace(h200, missing=frozenset({"amdsmi"}))
    over = [c.id for c, _, _ in plan(level_checks(1), 10.0, node=with_vllm).over]
    assert over == [
        "vllm-flavour",
        "device-name",
        "fp8-type",
        "fast-path-kernels",
        "native-extensions",
        "engine-defaults",
        "rocm-kernel-files",
        "smi-init",
    ]


def test_communicator_churn_runs_as_many_inits_as_the_budget_holds():
    costs = load_costs()
    gpu_node = Node(amd_hw=False, nvidia_hw=True, missing=frozenset({"amdsmi", "vllm"}))
    churn = [BY_ID["communicator-churn"]]
    full = plan(churn, 1000.0, node=gpu_node)
    assert full.run == tuple(churn) and full.comm_inits is None  # all 20 fit: nothing changed
    per_init = costs.sequential["communicator-churn"] / 20
    # room for 10 inits: 10 of them, charged as 10
    tight = plan(churn, full.estimate_s - 10 * per_init + 0.01, node=gpu_node)
    assert tight.run == tuple(churn) and tight.comm_inits == 10
    assert tight.estimate_s == pytest.approx(full.estimate_s - 10 * per_init)
    # room for fewer than 5: left out, not run with too few to judge
    short = plan(churn, full.estimate_s - 16 * per_init, node=gpu_node)
    assert short.run == () and short.comm_inits is None


def test_the_run_says_how_many_inits_the_budget_gave(monkeypatch):
    from rocmstack.doctor import runner

    seen = {}

    def fake_active(opts, wanted, progress):
        seen["inits"] = opts.active.comm_inits
        return {"error": "not run here"}

    monkeypatch.setattr("rocmstack.doctor.collect.collectors.run_active", fake_active)
    monkeypatch.setattr(runner, "node_of", lambda _opts: Node(amd_hw=False, nvidia_hw=True))
    costs = load_costs()
    budget = costs.start + costs.parallel["ray"] + costs.sequential["communicator-churn"] / 2 + 0.5
    report = run_doctor(DoctorOptions(only=("communicator-churn",), level=2, budget_s=budget, expect_gpus=0))
    assert report["budget"]["comm_inits"] == seen["inits"] and 5 <= seen["inits"] < 20


def test_a_cluster_runs_limit_follows_the_probes_it_sends():
    from rocmstack.doctor.cluster import MIN_CLUSTER_S, default_limit

    level3 = DoctorOptions(level=3)
    costs = load_costs()
    # without GPUs the level-2 stand-ins cost far more than 180 s (weight-sync alone: 270 s measured)
    assert default_limit(level3, gpus=False) > 2 * costs.sequential_no_gpu["weight-sync"]
    assert MIN_CLUSTER_S < default_limit(level3, gpus=True) < default_limit(level3, gpus=False)
    # a level-1 run across the cluster keeps the floor
    assert default_limit(DoctorOptions(level=1), gpus=True) == MIN_CLUSTER_S
