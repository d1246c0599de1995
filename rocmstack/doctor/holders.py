"""Who holds each GPU's memory: per GPU, the total, what is in use and the processes behind it.

NVIDIA: NVML's memory info and compute process list (the nvml probe). AMD: the amdgpu driver's
mem_info_vram_* and KFD's per-process /sys/class/kfd/kfd/proc/<pid>/vram_<gpu_id> (amdkfd kfd_process.c),
the amdsmi probe where sysfs has none. Each holder carries what excuses it (the doctor itself, --allow-pid)
and, under a Slurm hook, the job it belongs to: gpu-memory-free judges with it, and level 2 keeps its
probes off a GPU a job is using.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from rocmstack.doctor.model import DoctorOptions
from rocmstack.errors import printable
from rocmstack.platform.probes._emit import ancestors
from rocmstack.platform.snapshot import Snapshot

_CGROUP_JOB = re.compile(r"(?:^|/)job_(\d+)(?:/|$)")


@dataclass(frozen=True)
class Holder:
    pid: int
    size: int | None  # bytes; None where the driver gives no per-process figure
    command: str
    not_counted: str | None = None  # why it is never held against the node (the doctor, --allow-pid)
    job: str | None = None  # the running Slurm job it belongs to (a hook's scope only)
    left_by: str | None = None  # the Slurm job it came from, which no longer runs (a leftover)


@dataclass(frozen=True)
class GpuMemory:
    index: int
    total: int
    used: int
    holders: tuple[Holder, ...]


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _command(proc_root: Path, pid: int, fallback: str = "") -> str:
    raw = _read(proc_root / str(pid) / "cmdline")
    text = " ".join(p for p in (raw or "").split("\0") if p) or fallback
    if not text:
        return "command not visible here (another PID namespace, or exited)"
    text = printable(text)
    return text if len(text) <= 160 else text[:159] + "…"


def claimed_job(proc_root: Path, pid: int) -> str | None:
    """The Slurm job a process says it belongs to: its cgroup (proctrack/cgroup's job_N), else the
    SLURM_JOB_ID it was started with (slurmstepd sets it in every task; children inherit it)."""
    cgroup = _read(proc_root / str(pid) / "cgroup") or ""
    for line in cgroup.splitlines():
        found = _CGROUP_JOB.search(line.split(":", 2)[-1])
        if found:
            return found.group(1)
    try:
        environ = (proc_root / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(b"SLURM_JOB_ID="):
            value = entry.partition(b"=")[2].decode("ascii", "replace")
            return value if value.isdigit() else None
    return None


def _excused(
    pid: int, chain: list[int], own: set[int], opts: DoctorOptions, env_job: str | None
) -> str | None:
    line = [pid, *chain]
    if set(line) & own:
        return "the doctor's own process"
    allowed = next((p for p in line if p in opts.allow_pids), None)
    if allowed is not None:
        return "--allow-pid" if allowed == pid else f"--allow-pid {allowed} (its ancestor)"
    # the doctor run inside a job (srun rocmstack doctor): that job's own processes are its own
    if opts.scope is None and env_job is not None and claimed_job(opts.proc_root, pid) == env_job:
        return f"Slurm job {env_job}'s own process"
    return None


def _holder(
    pid: int,
    size: int | None,
    snap: Snapshot,
    opts: DoctorOptions,
    own: set[int],
    ancestry: list[int] | None = None,
    name: str = "",
) -> Holder:
    chain = ancestry if ancestry else ancestors(pid, str(opts.proc_root))
    command = _command(opts.proc_root, pid, name)
    excuse = _excused(pid, chain, own, opts, snap.env.get("SLURM_JOB_ID"))
    scope = opts.scope
    if scope is None:
        return Holder(pid, size, command, excuse)
    # slurmd's own list first (scontrol listpids), then what the process or a parent says of itself
    job = next((scope.job_pids[p] for p in (pid, *chain) if p in scope.job_pids), None)
    claim = job or claimed_job(opts.proc_root, pid)
    if job is None and claim is not None and claim in scope.running:
        job = claim
    if job is not None and job == scope.job and scope.hook == "epilog":
        return Holder(pid, size, command, excuse, left_by=job)  # the job has ended: what it left
    return Holder(pid, size, command, excuse, job=job, left_by=None if job else claim)


def nvidia_memory(snap: Snapshot, opts: DoctorOptions, data: dict) -> list[GpuMemory] | str:
    own = {os.getpid()} | ({int(data["doctor_pid"])} if data.get("doctor_pid") else set())
    gpus = []
    for entry in data.get("memory") or []:
        if "error" in entry:
            return f"GPU {entry.get('index')}: {entry['error']}"
        holders = tuple(
            _holder(p["pid"], p.get("bytes"), snap, opts, own, p.get("ancestors"))
            for p in entry.get("processes") or []
        )
        gpus.append(GpuMemory(int(entry["index"]), int(entry["total"]), int(entry["used"]), holders))
    return gpus


def _kfd_gpus(sysfs_root: Path) -> list[tuple[str, str]]:
    """(gpu_id, drm_render_minor) of every KFD GPU node, in node order (the HIP device order)."""
    nodes = sysfs_root / "class/kfd/kfd/topology/nodes"
    found: list[tuple[str, str]] = []
    if not nodes.is_dir():
        return found
    for node in sorted((n for n in nodes.iterdir() if n.name.isdigit()), key=lambda n: int(n.name)):
        gpu_id = (_read(node / "gpu_id") or "0").strip()
        props = dict(
            line.split(None, 1) for line in (_read(node / "properties") or "").splitlines() if " " in line
        )
        if gpu_id != "0" and props.get("simd_count", "0").strip() != "0":
            found.append((gpu_id, props.get("drm_render_minor", "").strip()))
    return found


def amd_memory(snap: Snapshot, opts: DoctorOptions) -> list[GpuMemory] | str | None:
    """None: neither sysfs nor amdsmi gives memory figures here."""
    data = snap.probe("amdsmi") or {}
    by_smi = {e.get("index"): e for e in data.get("memory") or [] if "error" not in e}
    own = {os.getpid()} | ({int(data["doctor_pid"])} if data.get("doctor_pid") else set())
    procs = opts.sysfs_root / "class/kfd/kfd/proc"
    pids = sorted(int(p.name) for p in procs.iterdir() if p.name.isdigit()) if procs.is_dir() else []
    gpus = []
    for index, (gpu_id, minor) in enumerate(_kfd_gpus(opts.sysfs_root)):
        device = opts.sysfs_root / f"class/drm/renderD{minor}/device"
        total, used = _read(device / "mem_info_vram_total"), _read(device / "mem_info_vram_used")
        smi = by_smi.get(index) or {}
        if total is None or used is None:
            if not smi:
                continue
            total, used = str(smi["total"]), str(smi["used"])
        holders: dict[int, Holder] = {}
        for pid in pids:
            vram = _read(procs / str(pid) / f"vram_{gpu_id}")
            if vram is not None and vram.strip().isdigit() and int(vram) > 0:
                holders[pid] = _holder(pid, int(vram), snap, opts, own)
        for p in smi.get("processes") or []:
            if p["pid"] not in holders and p.get("bytes"):
                holders[p["pid"]] = _holder(p["pid"], p["bytes"], snap, opts, own, name=p.get("name", ""))
        gpus.append(GpuMemory(index, int(total), int(used), tuple(holders.values())))
    return gpus or None


def gpu_memory(snap: Snapshot, opts: DoctorOptions) -> list[GpuMemory] | str | None:
    """Every GPU's memory and holders; a str says why it cannot be read, None: no figures here."""
    vendor = snap.vendor()
    if vendor == "nvidia":
        data = snap.probe("nvml") or {}
        if not data or "import_error" in data or "init_error" in data:
            return None
        return nvidia_memory(snap, opts, data)
    if vendor == "amd":
        return amd_memory(snap, opts)
    return None


def probe_gpus(
    snap: Snapshot, opts: DoctorOptions
) -> tuple[tuple[int, ...], dict[int, tuple[str, ...]]] | None:
    """Under a hook's scope, the GPUs level 2 may run on and those it leaves to running jobs (each with its
    jobs: Slurm gave it to them, or a process of theirs holds it); None outside Slurm (every GPU)."""
    scope = opts.scope
    if scope is None:
        return None
    busy = dict(scope.in_use)
    gpus = gpu_memory(snap, opts)
    for g in gpus if isinstance(gpus, list) else []:
        jobs = tuple(dict.fromkeys(h.job for h in g.holders if h.job and not h.not_counted))
        if jobs:
            busy[g.index] = tuple(dict.fromkeys((*busy.get(g.index, ()), *jobs)))
    count = snap.physical_count() or 0
    free = tuple(i for i in range(count) if i not in busy and scope.judges(i))
    return free, busy
