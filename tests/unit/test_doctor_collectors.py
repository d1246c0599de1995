"""The doctor's collectors: each need has one collector, and a run starts only those its checks need."""

from __future__ import annotations

import dataclasses

from rocmstack.doctor.budget import VENDOR_TOOLS, load_costs
from rocmstack.doctor.checks import ALL_CHECKS
from rocmstack.doctor.collect import collectors
from rocmstack.doctor.collect.collectors import (
    COLLECTORS,
    PROBES,
    Collector,
    collect,
    needs_of,
    run_time_costs,
    snapshot_request,
)
from rocmstack.doctor.model import BurninOptions, DoctorOptions


def _fake(name: str, provides: frozenset[str], seen: list, **kw) -> Collector:
    def run(opts, wanted, snap, progress):
        seen.append((name, wanted))
        return snap if snap is not None else "snap"

    return Collector(name, provides, run, **kw)


class _Snap:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}


def test_every_need_of_a_node_check_has_exactly_one_collector():
    provided = [need for c in COLLECTORS for need in c.provides]
    assert len(provided) == len(set(provided))
    node_needs = needs_of(c for c in ALL_CHECKS if c.scope == "node")
    assert node_needs <= set(provided)


def test_every_need_the_budget_charges_is_a_collectors():
    costs = load_costs()
    provided = {need for c in COLLECTORS for need in c.provides}
    assert set(costs.parallel) <= provided
    assert set(costs.sequential) <= provided


def test_only_the_collectors_the_needs_name_run_and_the_always_one(monkeypatch):
    seen: list = []
    snap = _Snap()

    def base(opts, wanted, _snap, progress):
        seen.append(("base", wanted))
        return snap

    chain = (
        Collector("base", frozenset({"a"}), base, always=True, timed=False),
        _fake("b", frozenset({"b", "c"}), seen),
        _fake("d", frozenset({"d"}), seen),
    )
    got = collect(DoctorOptions(), frozenset({"c"}), collectors=chain)
    assert got is snap
    assert seen == [("base", frozenset()), ("b", frozenset({"c"}))]
    assert set(snap.timings) == {"b"}  # the untimed base records its own parts


def test_the_burn_in_adds_its_minutes_to_the_budget():
    assert run_time_costs(DoctorOptions(burnin=BurninOptions(minutes=2))) == {
        "burn-in": 2 * 60 + collectors.BURN_IN_OVERHEAD_S
    }


def test_the_snapshot_request_starts_the_probes_and_tool_sets_wanted():
    opts = DoctorOptions(deep=True, env={"PATH": "/bin"})
    req = snapshot_request(opts, frozenset({"torch", "tools", "partition", "collectives"}))
    assert req.probes == {"torch"}
    assert req.tools == VENDOR_TOOLS | {"amd-smi-partition"}
    assert req.env == {"PATH": "/bin", "ROCMSTACK_PROBE_DEEP": "1"}
    assert snapshot_request(dataclasses.replace(opts, deep=False), PROBES).tools == frozenset()


# -- level 2 under a Slurm hook: never on a GPU a job is using --------------------------------------------


def _amd_node(tmp_path, held: dict[int, tuple[int, str]]):
    """Two replayed MI300X GPUs (KFD sysfs); ``held[pid] = (gpu, SLURM_JOB_ID or "")`` at a 0.9 share."""
    from tests.fixtures.doctor.doctor_fakes import make_snapshot
    from tests.unit.test_doctor_memory import ENGINE_BYTES, busy_amd

    _, sysfs, proc = busy_amd(tmp_path, {pid: (gpu, ENGINE_BYTES, job) for pid, (gpu, job) in held.items()})
    return make_snapshot(kfd_archs=(90402, 90402), amd_render=2), sysfs, proc


def _scoped_active(monkeypatch, snap, opts) -> tuple[dict, list]:
    started: list = []

    def run_active(opts, wanted, progress, gpus=None):
        started.append(gpus)
        return {"health": [{"ok": True}]}

    monkeypatch.setattr(collectors, "run_active", run_active)
    got = collectors._active(opts, frozenset({"gpu-health"}), snap, lambda _m: None)
    return dict(got.active or {}), started


def test_level_2_runs_on_the_free_gpus_only(monkeypatch, tmp_path):
    from rocmstack.doctor.model import GpuScope

    snap, sysfs, proc = _amd_node(tmp_path, {})
    scope = GpuScope(hook="healthcheck", in_use={0: ("12",)}, running=frozenset({"12"}))
    opts = DoctorOptions(sysfs_root=sysfs, proc_root=proc, scope=scope)
    active, started = _scoped_active(monkeypatch, snap, opts)
    assert started == [("amd", (1,))]
    assert active["gpus"] == [1] and active["left_to_jobs"] == "GPU 0: job 12"


def test_level_2_leaves_a_gpu_a_jobs_process_holds_though_slurm_did_not_give_it(monkeypatch, tmp_path):
    from rocmstack.doctor.model import GpuScope

    snap, sysfs, proc = _amd_node(tmp_path, {1168514: (1, "12")})
    scope = GpuScope(hook="healthcheck", in_use={0: ("12",)}, running=frozenset({"12"}))
    active, started = _scoped_active(
        monkeypatch, snap, DoctorOptions(sysfs_root=sysfs, proc_root=proc, scope=scope)
    )
    assert started == []  # no Ray, no probe
    assert active == {
        "skipped": "every GPU is in use by a job (GPU 0: job 12; GPU 1: job 12): level 2 runs on free GPUs only, "
        "so level 1 only"
    }


def test_a_prolog_probes_its_jobs_gpus_only(monkeypatch, tmp_path):
    from rocmstack.doctor.model import GpuScope

    snap, sysfs, proc = _amd_node(tmp_path, {})
    scope = GpuScope(hook="prolog", job="15", judged=frozenset({1}))
    _, started = _scoped_active(
        monkeypatch, snap, DoctorOptions(sysfs_root=sysfs, proc_root=proc, scope=scope)
    )
    assert started == [("amd", (1,))]
    none = GpuScope(hook="prolog", job="16", judged=frozenset())  # a job with no GPU
    active, started = _scoped_active(
        monkeypatch, snap, DoctorOptions(sysfs_root=sysfs, proc_root=proc, scope=none)
    )
    assert started == [] and active["skipped"].startswith("this hook has no GPU to probe")


def test_outside_slurm_level_2_is_as_before(monkeypatch, tmp_path):
    snap, sysfs, proc = _amd_node(tmp_path, {1168514: (1, "12")})
    _, started = _scoped_active(monkeypatch, snap, DoctorOptions(sysfs_root=sysfs, proc_root=proc))
    assert started == [None]


def test_the_private_rays_mask_is_set_for_its_start_and_put_back(monkeypatch):
    import os

    from rocmstack.doctor.collect.active import _only_gpus

    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "0,1,2,3")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with _only_gpus(("amd", (2, 5))):
        assert os.environ["HIP_VISIBLE_DEVICES"] == "2,5"
    assert os.environ["HIP_VISIBLE_DEVICES"] == "0,1,2,3"
    with _only_gpus(("nvidia", (1,))):
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"
    assert "CUDA_VISIBLE_DEVICES" not in os.environ
