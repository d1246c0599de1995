"""Judge of the memory-return loops (rocmstack.gpu.memory_return): after each cycle of allocate, share or
map, and release, the driver's figure of what the process holds must come back down.

A loop judges only what its figures show: the allocation must show in them (else the figure does not follow
this process and nothing is judged), and a cycle keeps memory when more than half of what it allocated is
still held after the release. Memory that creeps up by less per cycle still fails once the loop's total
growth passes half of one cycle's allocation: a colocated RL job runs out after a few steps that way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rocmstack.doctor.checks.fabric import active_data
from rocmstack.doctor.model import Check, DoctorOptions, Result, failed, passed, skipped
from rocmstack.platform.snapshot import Snapshot

MIB = 1 << 20
WHAT = {
    "ipc": "IPC export, import, free",
    "vmm": "VMM map, unmap and release (torch expandable segments)",
    "cumem": "vLLM sleep allocator: sleep, wake up",
    "saver": "torch_memory_saver: pause, resume",
    "dmabuf": "dma-buf export, free, a fresh allocation",
}
# What a failing loop points at, per loop: the field's reports of the same symptom and their fixes.
FIXES = {
    "ipc": "On ROCm 7.x set HSA_ENABLE_IPC_MODE_LEGACY=1 (the pre-7.0 IPC keeps no pin after hipFree, "
    "ROCm/hip#3886); rocmstack advisories --id rocm-7.x-hsa-ipc-export-pins-memory-after-hipfree",
    "vmm": "ROCm 7.2's runtime does not free VMM pages while the address range stays reserved (ROCm/ROCm#6021, "
    "fixed on ROCm/rocm-systems develop by PR 4363): use ROCm 7.0 or a runtime with that fix, or turn "
    "expandable_segments off for the job",
    "cumem": "vLLM's sleep mode frees nothing on ROCm 7.2 unless its allocator cycles the address reservation "
    "(vllm-project/vllm#46203): upgrade vLLM, or use ROCm 7.0; colocated rollout OOMs after a few steps "
    "otherwise",
    "saver": "torch_memory_saver's pause frees nothing on ROCm 7.2 (fzyzcjy/torch_memory_saver#83): a release "
    "that frees the address range (PR 84) or a rebuilt libhsa-runtime64 (radixark/miles#1680), or ROCm 7.0",
    "dmabuf": "Exporting device memory as a dma-buf corrupts ROCr 7.2's state and the next allocation faults "
    "(ROCm/rocm-systems#8517): turn the dma-buf path off (e.g. MOONCAKE_DISABLE_HIP_DMABUF=1) until the "
    "runtime is fixed",
}


@dataclass(frozen=True)
class LoopVerdict:
    loop: str
    status: str  # pass | fail | skip
    line: str


def _mib(nbytes: float) -> str:
    return f"{nbytes / MIB:,.0f} MiB"


def _figure(fig: Mapping[str, Any] | None, on: str) -> int | None:
    value = None if fig is None else fig.get(on)
    return value if isinstance(value, int) else None


def _runtime(row: Mapping[str, Any]) -> str:
    rt = row.get("runtime") or {}
    if rt.get("hip"):
        return f"HIP {rt['hip']}"
    if rt.get("cuda"):
        return f"CUDA {rt['cuda']}"
    return "runtime unknown"


def judge_loop(row: Mapping[str, Any]) -> LoopVerdict:
    """One loop's verdict from its cycles' figures (``judged_on``: process, the default, or device)."""
    loop = str(row.get("loop"))
    what = WHAT.get(loop, loop)
    if "crash" in row:
        return LoopVerdict(loop, "fail", f"{what}: {row['crash']} ({_runtime(row)})")
    if "skipped" in row:
        return LoopVerdict(loop, "skip", f"{what}: not run: {row['skipped']}")
    if "error" in row:
        return LoopVerdict(loop, "fail", f"{what}: {row['error']} ({_runtime(row)})")
    # the leading cycles that set the process up (its context, the allocator's pools) are not judged
    cycles: Sequence[Mapping[str, Any]] = (row.get("cycles") or [])[int(row.get("warmup") or 0) :]
    nbytes = int(row.get("nbytes") or 0)
    on = str(row.get("judged_on") or "process")
    if not cycles or nbytes <= 0:
        return LoopVerdict(loop, "skip", f"{what}: no cycle finished: nothing judged")
    first = cycles[0]
    b0, h0 = _figure(first.get("before"), on), _figure(first.get("held"), on)
    if b0 is None or h0 is None:
        source = (first.get("before") or {}).get("source", "no figure")
        return LoopVerdict(loop, "skip", f"{what}: the driver gave no {on} figure ({source}): nothing judged")
    if h0 - b0 < nbytes // 2:
        return LoopVerdict(
            loop,
            "skip",
            f"{what}: the driver's {on} figure rose {_mib(h0 - b0)} for a {_mib(nbytes)} allocation: it does not "
            "follow this process, nothing judged",
        )
    kept = []
    for c in cycles:
        before, held, after = (_figure(c.get(k), on) for k in ("before", "held", "after"))
        if before is None or held is None or after is None:
            continue
        if after - before > nbytes // 2:
            kept.append(
                f"cycle {c.get('cycle')}: {_mib(after - before)} of {_mib(held - before)} not returned"
            )
    last_after = _figure(cycles[-1].get("after"), on)
    growth = None if last_after is None else last_after - b0
    n = len(cycles)
    if kept:
        return LoopVerdict(
            loop,
            "fail",
            f"{what}: memory not returned, {'; '.join(kept[:3])} ({_runtime(row)}, {on} figure)",
        )
    if growth is not None and growth > nbytes // 2:
        return LoopVerdict(
            loop,
            "fail",
            f"{what}: held memory grew {_mib(growth)} over {n} cycles ({_mib(growth / n)} per cycle, each "
            f"allocating {_mib(nbytes)}; {_runtime(row)}, {on} figure)",
        )
    return LoopVerdict(
        loop,
        "pass",
        f"{what}: {n} cycles of {_mib(nbytes)}, held {_mib(h0 - b0)} each, "
        f"{_mib(max(growth or 0, 0))} left after the last ({_runtime(row)})",
    )


def memory_return(snap: Snapshot, opts: DoctorOptions) -> Result:
    data, problem = active_data(snap, "memory_return")
    if problem:
        return problem
    verdicts = [judge_loop(row) for row in data.get("loops") or []]
    failures = [v for v in verdicts if v.status == "fail"]
    judged = [v for v in verdicts if v.status != "skip"]
    details = tuple(v.line for v in verdicts)
    if failures:
        return failed(
            f"GPU memory does not come back on {len(failures)} of {len(judged)} loop(s): {failures[0].line}",
            *details,
            fix="; ".join(dict.fromkeys(FIXES.get(v.loop, "see the details") for v in failures)),
        )
    if not judged:
        return skipped("no memory-return loop could judge anything here", *details)
    return passed(
        f"memory came back after every cycle of {len(judged)} loop(s) "
        f"({', '.join(v.loop for v in judged)}), GPU {data.get('gpu', '?')}",
        *details,
    )


CHECKS = (
    Check(
        "memory-return",
        "memory",
        "GPU memory comes back after IPC export, VMM release, sleep/pause and a dma-buf export",
        memory_return,
        "https://github.com/fzyzcjy/torch_memory_saver/issues/83",
        frozenset({"memory-return"}),
        level=2,
    ),
)
