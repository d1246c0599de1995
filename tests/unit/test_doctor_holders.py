"""Who holds each GPU: the Slurm job a process belongs to, from its cgroup, its environment or slurmd's list.

The cgroup lines are of proctrack/cgroup's layout (cgroup v2: /system.slice/slurmstepd.scope/job_N/...,
v1: /slurm/uid_U/job_N/step_S); the environment is what slurmstepd gives every task (SLURM_JOB_ID)."""

from __future__ import annotations

from pathlib import Path

from rocmstack.doctor.holders import claimed_job, probe_gpus
from rocmstack.doctor.model import DoctorOptions, GpuScope
from tests.unit.test_doctor_collectors import _amd_node
from tests.unit.test_doctor_memory import proc_entry


def test_a_process_says_its_job_by_cgroup_or_environment(tmp_path: Path):
    proc = tmp_path / "proc"
    proc_entry(
        proc, 10, "python3 train.py", cgroup="0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n"
    )
    proc_entry(proc, 11, "python3 train.py", cgroup="4:memory:/slurm/uid_1000/job_77/step_batch\n")
    proc_entry(proc, 12, "vllm serve", cgroup="0::/user.slice/myjob_3.scope\n")  # no job_N segment
    (proc / "12/environ").write_bytes(b"HOME=/root\0SLURM_JOB_ID=4243\0SLURM_JOB_NAME=grpo\0")
    proc_entry(proc, 13, "sleep 300")
    (proc / "13/environ").write_bytes(b"SLURM_JOB_ID=not-a-number\0")
    assert claimed_job(proc, 10) == "4242"
    assert claimed_job(proc, 11) == "77"
    assert claimed_job(proc, 12) == "4243"
    assert claimed_job(proc, 13) is None
    assert claimed_job(proc, 14) is None  # gone, or in another PID namespace


def test_the_gpus_level_2_may_use(tmp_path: Path):
    snap, sysfs, proc = _amd_node(tmp_path, {1168514: (1, "12")})
    assert probe_gpus(snap, DoctorOptions(sysfs_root=sysfs, proc_root=proc)) is None  # outside Slurm: all
    ended = GpuScope(hook="healthcheck", running=frozenset())  # job 12 no longer runs: a leftover, probed
    assert probe_gpus(snap, DoctorOptions(sysfs_root=sysfs, proc_root=proc, scope=ended)) == ((0, 1), {})
    busy = GpuScope(hook="healthcheck", running=frozenset({"12"}))
    assert probe_gpus(snap, DoctorOptions(sysfs_root=sysfs, proc_root=proc, scope=busy)) == (
        (0,),
        {1: ("12",)},
    )
