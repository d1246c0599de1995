"""GPU memory held by someone else: per GPU, what is in use, who holds it, and whether the job still fits.

A leftover process holding most of a GPU leaves every other check green, yet any engine at its default
memory share (vLLM's gpu_memory_utilization 0.9) then fails to start. NVIDIA: NVML's memory info and compute
process list (the nvml probe). AMD: the amdgpu driver's mem_info_vram_* and KFD's per-process
/sys/class/kfd/kfd/proc/<pid>/vram_<gpu_id> (amdkfd kfd_process.c), the amdsmi probe where sysfs has none.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rocmstack.doctor.model import (
    Check,
    DoctorOptions,
    Result,
    failed,
    passed,
    probe_problem,
    skipped,
    warned,
)
from rocmstack.errors import printable
from rocmstack.platform.probes._emit import ancestors
from rocmstack.platform.snapshot import Snapshot

MIB = 1 << 20
# Memory in use that no listed process accounts for, above which it is called a leaked context (an idle
# H200 shows ~0.5 GiB used by the driver itself).
LEAK_FLOOR = 1 << 30


@dataclass(frozen=True)
class Holder:
    pid: int
    size: int | None  # bytes; None where the driver gives no per-process figure
    command: str
    not_counted: str | None = None  # why it is not held against the job (the doctor, --allow-pid, the job)


@dataclass(frozen=True)
class GpuMemory:
    index: int
    total: int
    used: int
    holders: tuple[Holder, ...]


def _mib(size: int | float) -> int:
    return int(size // MIB)


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


def _why_not_counted(
    pid: int, ancestry: list[int], own: set[int], opts: DoctorOptions, snap: Snapshot
) -> str | None:
    line = {pid, *ancestry}
    if line & own:
        return "the doctor's own process"
    if line & set(opts.allow_pids):
        return "--allow-pid"
    job = snap.env.get("SLURM_JOB_ID")
    if job:
        cgroup = _read(opts.proc_root / str(pid) / "cgroup") or ""
        if any(seg == f"job_{job}" for line_ in cgroup.splitlines() for seg in line_.split("/")):
            return f"Slurm job {job}'s own process"
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
    return Holder(
        pid, size, _command(opts.proc_root, pid, name), _why_not_counted(pid, chain, own, opts, snap)
    )


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


def judge(gpus: list[GpuMemory], share: float) -> Result:
    problems: list[str] = []
    notes: list[str] = []
    fixes: list[str] = []
    for g in gpus:
        listed = sum(h.size or 0 for h in g.holders)
        not_counted = sum(h.size or 0 for h in g.holders if h.not_counted)
        available = g.total - g.used + not_counted
        need = share * g.total
        unattributed = g.used - listed
        line = (
            f"GPU {g.index}: {_mib(available)} MiB free for the job of {_mib(g.total)} MiB, "
            f"the job needs {_mib(need)} MiB (share {share:g})"
        )
        if available >= need:
            notes.append(line)
            continue
        problems.append(line)
        others = [h for h in g.holders if not h.not_counted]
        for h in others:
            size = "an amount the driver does not report" if h.size is None else f"{_mib(h.size)} MiB"
            problems.append(f"GPU {g.index}: pid {h.pid} ({h.command}) holds {size}")
        if others:
            pids = " ".join(str(h.pid) for h in others)
            fixes.append(
                f"Stop pid(s) {pids} (kill {pids}), or pass --allow-pid PID if they belong to this job"
            )
        if unattributed >= LEAK_FLOOR:
            problems.append(
                f"GPU {g.index}: {_mib(unattributed)} MiB in use with no live process listed: a leaked "
                "context; only a GPU reset or a reboot frees it"
            )
            fixes.append(
                f"Reset GPU {g.index} (nvidia-smi --gpu-reset -i {g.index} / amd-smi reset --gpureset -g "
                f"{g.index}) or reboot the node"
            )
        if not others and unattributed < LEAK_FLOOR:
            fixes.append(f"Lower the engine's memory share to what GPU {g.index} has free (--memory-share)")
    for g in gpus:
        for h in g.holders:
            if h.not_counted:
                size = "?" if h.size is None else str(_mib(h.size))
                notes.append(
                    f"GPU {g.index}: pid {h.pid} ({h.command}) {size} MiB, not counted: {h.not_counted}"
                )
    if problems:
        short = [p for p in problems if "the job needs" in p]
        held = [
            f"pid {h.pid} ({_mib(h.size or 0)} MiB)" for g in gpus for h in g.holders if not h.not_counted
        ]
        return failed(
            f"{len(short)} GPU(s) lack the memory the job will ask for: {short[0]}"
            + (f"; held by {', '.join(held)}" if held else ""),
            *problems,
            *notes,
            fix="; ".join(dict.fromkeys(fixes)),
        )
    return passed(f"{len(gpus)} GPU(s) have the memory the job will ask for (share {share:g})", *notes)


def gpu_memory_free(snap: Snapshot, opts: DoctorOptions) -> Result:
    vendor = snap.vendor()
    if vendor == "nvidia":
        if problem := probe_problem(snap, "nvml", "nvml", fix="Run `nvidia-smi` by hand"):
            return problem
        data = snap.probe("nvml") or {}
        if "import_error" in data or "init_error" in data:
            why = data.get("import_error") or data.get("init_error")
            return warned(
                f"cannot see GPU memory: NVML unavailable ({why})",
                fix="Install nvidia-ml-py in the checked environment (pip install nvidia-ml-py)",
            )
        gpus: list[GpuMemory] | str | None = nvidia_memory(snap, opts, data)
    elif vendor == "amd":
        gpus = amd_memory(snap, opts)
        if gpus is None:
            return skipped("no VRAM figures here (no mem_info_vram_* in sysfs, amdsmi gave none)")
    else:
        return skipped("no GPU on this node")
    if isinstance(gpus, str):
        return warned(f"cannot read GPU memory: {gpus}", fix="Update the GPU driver and its SMI library")
    if not gpus:
        return skipped("no GPU memory figures")
    return judge(gpus, opts.memory_share)


CHECKS = (
    Check(
        "gpu-memory-free",
        "gpus",
        "GPU memory not held by other processes",
        gpu_memory_free,
        "https://github.com/torvalds/linux/blob/master/drivers/gpu/drm/amd/amdkfd/kfd_process.c",
        frozenset({"nvml", "amdsmi"}),
    ),
)
