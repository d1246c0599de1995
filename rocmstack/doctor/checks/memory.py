"""GPU memory held by someone else: per GPU, what is in use, who holds it, and whether the job still fits.

A leftover process holding most of a GPU leaves every other check green, yet any engine at its default
memory share (vLLM's gpu_memory_utilization 0.9) then fails to start. Who holds what comes from
rocmstack.doctor.holders. Under a Slurm hook a GPU is judged only where the hook may judge it: a GPU a
running job was given (or one a running job's process holds) is that job's, and never held against the node.
"""

from __future__ import annotations

from rocmstack.doctor.holders import GpuMemory, Holder, gpu_memory
from rocmstack.doctor.model import (
    Check,
    DoctorOptions,
    GpuScope,
    Result,
    failed,
    jobs_text,
    passed,
    probe_problem,
    skipped,
    warned,
)
from rocmstack.platform.snapshot import Snapshot

MIB = 1 << 20
# Memory in use that no listed process accounts for, above which it is called a leaked context (an idle
# H200 shows ~0.5 GiB used by the driver itself).
LEAK_FLOOR = 1 << 30


def _mib(size: int | float) -> int:
    return int(size // MIB)


def _size(h: Holder) -> str:
    return "an amount the driver does not report" if h.size is None else f"{_mib(h.size)} MiB"


def _who(h: Holder) -> str:
    """A holder as a failure names it: its pid, command and, under a hook, the job behind it."""
    if h.left_by:
        return f"pid {h.pid} ({h.command}), left by Slurm job {h.left_by}, which ended,"
    if h.job:
        return f"pid {h.pid} ({h.command}) of Slurm job {h.job}"
    return f"pid {h.pid} ({h.command})"


def _jobs_on(g: GpuMemory) -> tuple[str, ...]:
    return tuple(dict.fromkeys(h.job for h in g.holders if h.job and not h.not_counted))


def _left_to_jobs(g: GpuMemory, scope: GpuScope | None) -> tuple[str | None, str | None]:
    """(a note, a warning) when GPU ``g`` is not the hook's to judge; (None, None) when it is."""
    if scope is None:
        return None, None
    held = sum(h.size or 0 for h in g.holders)
    if not scope.judges(g.index):
        return f"GPU {g.index}: {scope.why_not(g.index)} ({_mib(held)} MiB held): not judged", None
    jobs = _jobs_on(g)
    # A Prolog or Epilog judges its job's GPUs: another job's process on them is a fault. A health check
    # leaves a running job's GPU to it, wherever Slurm's bookkeeping put the job.
    if not jobs or (scope.hook != "healthcheck" and scope.tracked):
        return None, None
    note = f"GPU {g.index}: in use by {jobs_text(jobs)} ({_mib(held)} MiB held): not judged"
    if not scope.tracked:
        return note, None
    strays = [h for h in g.holders if h.job and not h.not_counted]
    return note, "; ".join(
        f"GPU {g.index}: {_who(h)} holds {_size(h)}, though Slurm did not give job {h.job} this GPU: a "
        "job placed on it may not fit"
        for h in strays
    )


def judge(gpus: list[GpuMemory], share: float, scope: GpuScope | None = None) -> Result:
    problems: list[str] = []
    notes: list[str] = []
    fixes: list[str] = []
    cautions: list[str] = []
    judged: list[GpuMemory] = []
    for g in gpus:
        note, caution = _left_to_jobs(g, scope)
        if note is not None:
            notes.append(note)
            if caution:
                cautions.append(caution)
            continue
        judged.append(g)
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
            problems.append(f"GPU {g.index}: {_who(h)} holds {_size(h)}")
        if others:
            pids = " ".join(str(h.pid) for h in others)
            if any(h.left_by for h in others):
                fixes.append(
                    f"Stop pid(s) {pids} (kill {pids}): a job's processes outlived it (Slurm's "
                    "proctrack/cgroup ends every process of a job)"
                )
            else:
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
    for g in judged:
        for h in g.holders:
            if h.not_counted:
                size = "?" if h.size is None else str(_mib(h.size))
                notes.append(
                    f"GPU {g.index}: pid {h.pid} ({h.command}) {size} MiB, not counted: {h.not_counted}"
                )
    if problems:
        short = [p for p in problems if "the job needs" in p]
        held = [
            f"pid {h.pid} ({_mib(h.size or 0)} MiB)" for g in judged for h in g.holders if not h.not_counted
        ]
        leaked = any("a leaked context" in p for p in problems)
        return failed(
            f"{len(short)} GPU(s) lack the memory the job will ask for: {short[0]}"
            + (f"; held by {', '.join(held)}" if held else ""),
            *problems,
            *cautions,
            *notes,
            fix="; ".join(dict.fromkeys(fixes)),
            # a leaked context needs a reset or a reboot; a process someone left is a job's to stop
            problem="node" if leaked else "user",
        )
    left = len(gpus) - len(judged)
    if cautions:
        return warned(
            f"a running job's process holds a GPU Slurm did not give it: {cautions[0]}",
            *cautions,
            *notes,
            fix="Check the job's GPU binding (gres.conf, ConstrainDevices=yes in cgroup.conf)",
        )
    if not judged:
        return skipped(f"no GPU here for this hook to judge ({left} left to their jobs)", *notes)
    aside = f"; {left} not judged (see details)" if left else ""
    return passed(
        f"{len(judged)} GPU(s) have the memory the job will ask for (share {share:g}){aside}", *notes
    )


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
    elif vendor != "amd":
        return skipped("no GPU on this node")
    gpus = gpu_memory(snap, opts)
    if gpus is None:
        return skipped("no VRAM figures here (no mem_info_vram_* in sysfs, amdsmi gave none)")
    if isinstance(gpus, str):
        return warned(f"cannot read GPU memory: {gpus}", fix="Update the GPU driver and its SMI library")
    if not gpus:
        return skipped("no GPU memory figures")
    return judge(gpus, opts.memory_share, opts.scope)


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
