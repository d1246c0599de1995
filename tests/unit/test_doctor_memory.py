"""gpu-memory-free: GPU memory held by someone else, replayed from verbatim NVML / KFD / amd-smi output.

Fixture sources: tests/fixtures/doctor/memory/SOURCES.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from rocmstack.doctor.checks import BY_ID
from rocmstack.doctor.checks.memory import gpu_memory_free
from rocmstack.doctor.model import DoctorOptions
from rocmstack.platform.tools import PROBES_DIR, parse_probe_output
from rocmstack.status import Status
from tests.fixtures.doctor.doctor_fakes import STUBS, make_snapshot, probe

MEMORY = Path(__file__).resolve().parents[1] / "fixtures" / "doctor" / "memory"
# docs/evidence/gpu-memory-h200-2026-12-02: a torch process, pid 483, held 100 GiB of an H200
H200_HELD = parse_probe_output((MEMORY / "nvml-probe-h200-held.txt").read_text())
HOLDER_CMD = "python3 -c import time, torch"


def proc_entry(proc: Path, pid: int, cmdline: str, ppid: int = 1, cgroup: str = "0::/user.slice\n") -> None:
    d = proc / str(pid)
    d.mkdir(parents=True)
    (d / "cmdline").write_text(cmdline.replace(" ", "\0") + "\0")
    (d / "stat").write_text(f"{pid} ({cmdline.split()[0][:15]}) S {ppid} {pid} {pid} 0 -1\n")
    (d / "cgroup").write_text(cgroup)


def nvidia(data: dict, tmp_path: Path, **opts) -> tuple:
    snap = make_snapshot(nvidia=1, probes={"nvml": probe("nvml", data)}, env=opts.pop("env", {}))
    return snap, DoctorOptions(proc_root=tmp_path / "proc", sysfs_root=tmp_path / "sys", **opts)


def test_registered_at_level_1():
    check = BY_ID["gpu-memory-free"]
    assert check.level == 1 and check.needs == frozenset({"nvml", "amdsmi"})


def test_h200_held_fails_naming_pid_command_and_mib(tmp_path):
    proc_entry(tmp_path / "proc", 483, HOLDER_CMD, ppid=462)
    result = gpu_memory_free(*nvidia(H200_HELD, tmp_path))
    assert result.status is Status.FAIL
    assert "GPU 0: 40229 MiB free for the job of 143771 MiB, the job needs 129393 MiB" in result.summary
    assert "pid 483 (102918 MiB)" in result.summary
    assert f"GPU 0: pid 483 ({HOLDER_CMD}) holds 102918 MiB" in result.details
    assert result.fix is not None and "kill 483" in result.fix and "--allow-pid" in result.fix
    assert not any("leaked" in d for d in result.details)  # 624 MiB unattributed: the driver's own
    assert result.problem == "user"  # a process someone left: the node needs no repair


def test_h200_holder_in_another_pid_namespace_still_counts(tmp_path):
    result = gpu_memory_free(*nvidia(H200_HELD, tmp_path))
    assert result.status is Status.FAIL
    assert any("pid 483 (command not visible here" in d for d in result.details)


def test_allow_pid_passes(tmp_path):
    proc_entry(tmp_path / "proc", 483, HOLDER_CMD, ppid=462)
    result = gpu_memory_free(*nvidia(H200_HELD, tmp_path, allow_pids=(483,)))
    assert result.status is Status.PASS
    assert any("not counted: --allow-pid" in d for d in result.details)


def test_allow_pid_of_a_parent_covers_its_children(tmp_path):
    result = gpu_memory_free(*nvidia(H200_HELD, tmp_path, allow_pids=(444,)))  # from the probe's ancestors
    assert result.status is Status.PASS


def test_doctors_own_children_not_counted(tmp_path):
    data = json.loads(json.dumps(H200_HELD))
    data["doctor_pid"] = 444  # the holder descends from the doctor (a probe of its own, say)
    assert gpu_memory_free(*nvidia(data, tmp_path)).status is Status.PASS


def test_slurm_jobs_own_process_not_counted(tmp_path):
    cgroup = "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n"
    proc_entry(tmp_path / "proc", 483, HOLDER_CMD, ppid=462, cgroup=cgroup)
    snap, opts = nvidia(H200_HELD, tmp_path, env={"SLURM_JOB_ID": "4242"})
    result = gpu_memory_free(snap, opts)
    assert result.status is Status.PASS
    assert any("Slurm job 4242's own process" in d for d in result.details)
    other = gpu_memory_free(replace(snap, env={"SLURM_JOB_ID": "4243"}), opts)
    assert other.status is Status.FAIL


def freed() -> dict:
    data = json.loads(json.dumps(H200_HELD))
    gpu = data["memory"][0]
    gpu["used"] -= gpu["processes"][0]["bytes"]
    gpu["free"] = gpu["total"] - gpu["used"]
    gpu["processes"] = []
    return data


def test_freed_is_ready(tmp_path):
    result = gpu_memory_free(*nvidia(freed(), tmp_path))
    assert result.status is Status.PASS
    assert "GPU 0: 143147 MiB free for the job of 143771 MiB" in result.details[0]


def test_memory_with_no_live_owner_is_a_leaked_context(tmp_path):
    data = freed()
    gpu = data["memory"][0]
    gpu["used"] = 100 << 30  # in use, no process listed
    result = gpu_memory_free(*nvidia(data, tmp_path))
    assert result.status is Status.FAIL
    assert any("102400 MiB in use with no live process listed: a leaked context" in d for d in result.details)
    assert any("only a GPU reset or a reboot frees it" in d for d in result.details)
    assert result.fix is not None and "nvidia-smi --gpu-reset -i 0" in result.fix
    assert result.problem == "node"  # only a reset or a reboot frees it


def test_share_decides(tmp_path):
    snap, opts = nvidia(H200_HELD, tmp_path)
    assert gpu_memory_free(snap, replace(opts, memory_share=0.25)).status is Status.PASS  # 40229 >= 35942
    assert gpu_memory_free(snap, replace(opts, memory_share=0.3)).status is Status.FAIL


def test_nvml_without_process_figures_still_fails(tmp_path):
    data = json.loads(json.dumps(H200_HELD))
    data["memory"][0]["processes"][0]["bytes"] = None
    result = gpu_memory_free(*nvidia(data, tmp_path))
    assert result.status is Status.FAIL
    assert any("holds an amount the driver does not report" in d for d in result.details)


def test_pynvml_missing_warns(tmp_path):
    result = gpu_memory_free(
        *nvidia({"import_error": "ModuleNotFoundError: No module named 'pynvml'"}, tmp_path)
    )
    assert result.status is Status.WARN and "nvidia-ml-py" in (result.fix or "")


# -- the probes, run for real against stub libraries ----------------------------------------------------


def run_probe(name: str, stub: str, env: dict) -> dict:
    full = {**os.environ, "PYTHONPATH": str(STUBS / stub), **env}
    out = subprocess.run(
        [sys.executable, str(PROBES_DIR / f"{name}_probe.py")],
        capture_output=True,
        text=True,
        env=full,
        check=True,
    )
    data = parse_probe_output(out.stdout)
    assert data is not None, out.stderr
    return data


def test_nvml_probe_lists_processes_with_their_ancestors():
    env = {"STUB_NVML_TOTAL": str(150754820096), "STUB_NVML_USED": str(108571525120)}
    env |= {"STUB_NVML_PID": str(os.getpid()), "STUB_NVML_PROC_BYTES": "107917344768"}
    data = run_probe("nvml", "pynvml_procs", env)
    assert data["doctor_pid"] == os.getpid()
    (gpu,) = data["memory"]
    assert gpu["total"] == 150754820096 and gpu["used"] == 108571525120
    (p,) = gpu["processes"]
    assert p["pid"] == os.getpid() and p["bytes"] == 107917344768
    assert p["ancestors"][0] == os.getppid()


def amd_tree(root: Path, gpus: int, total: int, used: tuple[int, ...] = ()) -> None:
    nodes = root / "class/kfd/kfd/topology/nodes"
    (nodes / "0").mkdir(parents=True)
    (nodes / "0/properties").write_text("cpu_cores_count 64\nsimd_count 0\n")
    (nodes / "0/gpu_id").write_text("0\n")
    for i in range(gpus):
        n = nodes / str(i + 1)
        n.mkdir()
        (n / "properties").write_text(f"simd_count 1216\ndrm_render_minor {128 + i}\n")
        (n / "gpu_id").write_text(f"{10000 + i}\n")
        if total:
            dev = root / f"class/drm/renderD{128 + i}/device"
            dev.mkdir(parents=True)
            (dev / "mem_info_vram_total").write_text(f"{total}\n")
            (dev / "mem_info_vram_used").write_text(f"{used[i]}\n")


def showpids_rows() -> list[tuple[int, str, int, int]]:
    rows = []
    for line in (MEMORY / "rocm-smi-showpids-mi300x.txt").read_text().splitlines():
        f = line.split()
        if len(f) == 6 and f[0].isdigit():
            rows.append((int(f[0]), f[1], int(f[2]), int(f[3])))
    return rows


def test_amd_kfd_sysfs_names_the_holder(tmp_path):
    sysfs, proc = tmp_path / "sys", tmp_path / "proc"
    rows = showpids_rows()
    held = sum(v for *_, v in rows)
    amd_tree(sysfs, 2, 206141652992, (400 << 20, held + (400 << 20)))
    for pid, name, gpu, vram in rows:
        d = sysfs / f"class/kfd/kfd/proc/{pid}"
        d.mkdir(parents=True)
        (d / f"vram_{10000 + gpu}").write_text(f"{vram}\n")
        proc_entry(proc, pid, f"{name} --worker")
    snap = make_snapshot(kfd_archs=(90402, 90402))
    result = gpu_memory_free(snap, DoctorOptions(sysfs_root=sysfs, proc_root=proc))
    assert result.status is Status.FAIL
    assert result.summary.startswith("1 GPU(s) lack the memory the job will ask for: GPU 1: 27022 MiB free")
    assert "pid 1168514 (169169 MiB)" in result.summary
    assert "GPU 1: pid 1168514 (pt_main_thread --worker) holds 169169 MiB" in result.details
    assert not any("test_ref" in d for d in result.details)  # 0 bytes of VRAM: not holders


def test_amd_without_figures_skips(tmp_path):
    amd_tree(tmp_path / "sys", 1, 0)
    snap = make_snapshot(kfd_archs=(90402,))
    result = gpu_memory_free(snap, DoctorOptions(sysfs_root=tmp_path / "sys", proc_root=tmp_path / "proc"))
    assert result.status is Status.SKIP


@pytest.mark.parametrize("used_mb", [190000, 1000])
def test_amdsmi_probe_process_list_judged(tmp_path, used_mb):
    env = {"STUB_AMDSMI_PROCS": str(MEMORY / "amd-smi-process-sort-by-pid.json")}
    env |= {"STUB_AMDSMI_VRAM_TOTAL_MB": "196592", "STUB_AMDSMI_VRAM_USED_MB": str(used_mb)}
    data = run_probe("amdsmi", "amdsmi_procs", env)
    assert data["memory"][1]["processes"] == [
        {"pid": 2168274, "name": "/usr/bin/python3.12", "bytes": 65588000}
    ]
    amd_tree(tmp_path / "sys", 2, 0)  # no mem_info_vram_*: amdsmi's figures stand in
    snap = make_snapshot(kfd_archs=(90402, 90402), probes={"amdsmi": probe("amdsmi", data)})
    result = gpu_memory_free(snap, DoctorOptions(sysfs_root=tmp_path / "sys", proc_root=tmp_path / "proc"))
    if used_mb == 1000:
        assert result.status is Status.PASS
        return
    assert result.status is Status.FAIL
    assert "GPU 1: pid 2168274 (/usr/bin/python3.12) holds 62 MiB" in result.details
    assert any("GPU 1:" in d and "a leaked context" in d for d in result.details)


def test_cli_options():
    from tests.conftest import run_cli

    for share in ("0", "1.5"):
        bad = run_cli("doctor", "--memory-share", share)
        assert bad.code == 2 and bad.err.startswith("rocmstack: error: --memory-share"), bad
    bad = run_cli("doctor", "--allow-pid", "x")
    assert bad.code == 2 and "Traceback" not in bad.err
    ok = run_cli(
        "doctor",
        "--fast",
        "--json",
        "--only",
        "gpu-memory-free",
        "--allow-pid",
        str(os.getpid()),  # pytest's: no ancestor of the doctor's subprocess... but its parent
        "--memory-share",
        "0.85",
    )
    assert ok.code == 2 and "is an ancestor of this doctor" in ok.err, ok  # the CLI runs under pytest
    ok = run_cli("doctor", "--fast", "--json", "--only", "gpu-memory-free", "--allow-pid", "999999999")
    assert ok.code != 2 and json.loads(ok.out)["checks"][0]["id"] == "gpu-memory-free"


@pytest.mark.parametrize(
    ("pid", "said"),
    [
        ("0", "--allow-pid 0 is not a process id"),
        ("-1", "--allow-pid -1 is not a process id"),
        ("1", "--allow-pid 1 is init: every process descends from it"),
    ],
)
def test_an_allow_pid_that_excuses_every_process_is_refused(pid, said):
    from tests.conftest import run_cli

    bad = run_cli("doctor", "--fast", "--only", "gpu-memory-free", f"--allow-pid={pid}")
    assert bad.code == 2 and said in bad.err and "Traceback" not in bad.err, bad
    assert len(bad.err.strip().splitlines()) <= 2, bad.err  # one line, and its fix


def test_an_allow_pid_names_the_ancestor_it_excuses_through(tmp_path):
    result = gpu_memory_free(*nvidia(H200_HELD, tmp_path, allow_pids=(444,)))
    assert result.status is Status.PASS
    assert any("pid 483" in d and "not counted: --allow-pid 444 (its ancestor)" in d for d in result.details)


# -- under a Slurm hook: the GPUs it may judge ----------------------------------------------------------

JOB = "4242"
# AMD: two MI300X GPUs replayed as KFD sysfs (as test_amd_kfd_sysfs_names_the_holder), the job's engine on
# GPU 0 at vLLM's default share, the process list from ROCm/ROC-smi#60's rocm-smi --showpids figure.
MI300X_TOTAL = 206141652992
ENGINE_BYTES = int(0.9 * MI300X_TOTAL)


def busy_amd(tmp_path: Path, holders: dict[int, tuple[int, int, str]]) -> tuple:
    """An AMD node whose GPU i holds ``holders[pid] = (gpu, bytes, SLURM_JOB_ID or "")``."""
    sysfs, proc = tmp_path / "sys", tmp_path / "proc"
    used = [400 << 20, 400 << 20]
    for gpu, size, _ in holders.values():
        used[gpu] += size
    amd_tree(sysfs, 2, MI300X_TOTAL, tuple(used))
    for pid, (gpu, size, job) in holders.items():
        d = sysfs / f"class/kfd/kfd/proc/{pid}"
        d.mkdir(parents=True)
        (d / f"vram_{10000 + gpu}").write_text(f"{size}\n")
        proc_entry(proc, pid, "pt_main_thread --worker")
        if job:
            (proc / str(pid) / "environ").write_bytes(f"HOME=/root\0SLURM_JOB_ID={job}\0".encode())
    return make_snapshot(kfd_archs=(90402, 90402)), sysfs, proc


def scoped(sysfs: Path, proc: Path, **scope) -> DoctorOptions:
    from rocmstack.doctor.model import GpuScope

    return DoctorOptions(sysfs_root=sysfs, proc_root=proc, scope=GpuScope(**scope))


def test_healthcheck_leaves_a_running_jobs_gpu_to_it(tmp_path):
    snap, sysfs, proc = busy_amd(tmp_path, {1168514: (0, ENGINE_BYTES, JOB)})
    # outside Slurm the engine's memory is a holder like any other
    outside = gpu_memory_free(snap, DoctorOptions(sysfs_root=sysfs, proc_root=proc))
    assert outside.status is Status.FAIL
    hook = scoped(sysfs, proc, hook="healthcheck", in_use={0: (JOB,)}, running=frozenset({JOB}))
    result = gpu_memory_free(snap, hook)
    assert result.status is Status.PASS, result
    assert result.summary.startswith(
        "1 GPU(s) have the memory the job will ask for (share 0.9); 1 not judged"
    )
    assert any(
        d.startswith(f"GPU 0: in use by job {JOB} (176932 MiB held): not judged") for d in result.details
    )


def test_healthcheck_knows_a_jobs_process_by_slurmds_list_or_its_environment(tmp_path):
    # Slurm's bookkeeping says nothing of GPU 0 (no gpu gres), yet the job's engine holds it
    snap, sysfs, proc = busy_amd(tmp_path, {1168514: (0, ENGINE_BYTES, "")})
    by_list = scoped(
        sysfs, proc, hook="healthcheck", job_pids={1168514: JOB}, running=frozenset({JOB}), tracked=False
    )
    result = gpu_memory_free(snap, by_list)
    assert result.status is Status.PASS, result
    assert any(f"GPU 0: in use by job {JOB}" in d for d in result.details)
    snap, sysfs, proc = busy_amd(tmp_path / "env", {1168514: (0, ENGINE_BYTES, JOB)})
    by_env = scoped(sysfs, proc, hook="healthcheck", running=frozenset({JOB}), tracked=False)
    assert gpu_memory_free(snap, by_env).status is Status.PASS


def test_a_jobs_process_on_a_gpu_slurm_did_not_give_it_warns_never_fails(tmp_path):
    snap, sysfs, proc = busy_amd(tmp_path, {1168514: (1, ENGINE_BYTES, JOB)})
    hook = scoped(sysfs, proc, hook="healthcheck", in_use={0: (JOB,)}, running=frozenset({JOB}))
    result = gpu_memory_free(snap, hook)
    assert result.status is Status.WARN, result
    assert (
        f"pid 1168514 (pt_main_thread --worker) of Slurm job {JOB} holds 176932 MiB, though Slurm"
        in result.summary
    )


def test_a_leftover_of_a_job_that_ended_still_fails_the_healthcheck(tmp_path):
    snap, sysfs, proc = busy_amd(tmp_path, {1168514: (1, ENGINE_BYTES, "4000")})  # job 4000 no longer runs
    hook = scoped(sysfs, proc, hook="healthcheck", in_use={0: (JOB,)}, running=frozenset({JOB}))
    result = gpu_memory_free(snap, hook)
    assert result.status is Status.FAIL
    assert (
        "GPU 1: pid 1168514 (pt_main_thread --worker), left by Slurm job 4000, which ended, holds 176932 MiB"
        in (result.details)
    )


def test_every_gpu_in_use_judges_nothing(tmp_path):
    snap, sysfs, proc = busy_amd(
        tmp_path, {1168514: (0, ENGINE_BYTES, JOB), 1168515: (1, ENGINE_BYTES, "4243")}
    )
    hook = scoped(
        sysfs, proc, hook="healthcheck", in_use={0: (JOB,), 1: ("4243",)}, running=frozenset({JOB, "4243"})
    )
    result = gpu_memory_free(snap, hook)
    assert result.status is Status.SKIP  # never a pass that judged no GPU
    assert result.summary == "no GPU here for this hook to judge (2 left to their jobs)"


def test_prolog_judges_its_jobs_gpus_only(tmp_path):
    # job A (4242) holds GPU 0 at 0.9; job B (4243) is given GPU 1
    snap, sysfs, proc = busy_amd(tmp_path, {1168514: (0, ENGINE_BYTES, JOB)})
    prolog = {
        "hook": "prolog",
        "job": "4243",
        "judged": frozenset({1}),
        "in_use": {0: (JOB,)},
        "running": frozenset({JOB}),
    }
    result = gpu_memory_free(snap, scoped(sysfs, proc, **prolog))
    assert result.status is Status.PASS, result
    assert any(d.startswith("GPU 0: in use by job 4242") for d in result.details)
    # B's own GPU held by a leftover (no job) or by job A's process: B cannot have it
    for held_by in ("", JOB):
        snap, sysfs, proc = busy_amd(tmp_path / f"b{held_by}", {1168600: (1, ENGINE_BYTES, held_by)})
        result = gpu_memory_free(snap, scoped(sysfs, proc, **prolog))
        assert result.status is Status.FAIL, result
        assert result.summary.startswith("1 GPU(s) lack the memory the job will ask for: GPU 1:")


def test_epilog_names_what_the_ended_job_left_behind(tmp_path):
    snap, sysfs, proc = busy_amd(
        tmp_path, {1168514: (0, ENGINE_BYTES, JOB), 1168515: (1, ENGINE_BYTES, "4243")}
    )
    epilog = scoped(
        sysfs,
        proc,
        hook="epilog",
        job=JOB,
        judged=frozenset({0}),
        in_use={1: ("4243",)},
        running=frozenset({JOB, "4243"}),  # the job is COMPLETING while its Epilog runs
    )
    result = gpu_memory_free(snap, epilog)
    assert result.status is Status.FAIL
    assert (
        f"GPU 0: pid 1168514 (pt_main_thread --worker), left by Slurm job {JOB}, which ended, holds 176932 MiB"
        in (result.details)
    )
    assert "outlived it" in (result.fix or "")
    assert any(d.startswith("GPU 1: in use by job 4243") for d in result.details)


def test_outside_slurm_a_job_running_the_doctor_keeps_its_own_processes(tmp_path):
    snap, sysfs, proc = busy_amd(tmp_path, {1168514: (0, ENGINE_BYTES, JOB)})
    snap = replace(snap, env={"SLURM_JOB_ID": JOB})
    result = gpu_memory_free(snap, DoctorOptions(sysfs_root=sysfs, proc_root=proc))
    assert result.status is Status.PASS
    assert any(f"not counted: Slurm job {JOB}'s own process" in d for d in result.details)


def test_a_prolog_judges_its_own_gpu_even_where_slurm_lists_another_job_on_it(tmp_path):
    # a shared gres (or a job escaping its allocation) on job B's GPU: B still cannot have that memory
    snap, sysfs, proc = busy_amd(tmp_path, {1168514: (1, ENGINE_BYTES, JOB)})
    prolog = scoped(
        sysfs,
        proc,
        hook="prolog",
        job="4243",
        judged=frozenset({1}),
        in_use={1: (JOB,)},
        running=frozenset({JOB}),
    )
    result = gpu_memory_free(snap, prolog)
    assert result.status is Status.FAIL
    assert (
        f"GPU 1: pid 1168514 (pt_main_thread --worker) of Slurm job {JOB} holds 176932 MiB" in result.details
    )
