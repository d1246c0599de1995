"""Level 2's memory-return loops (rocmstack.gpu.memory_return), one process each on one free GPU, started
before Ray so that they run while Ray starts, and collected before the first Ray probe touches the GPU.

One GPU answers for the node: what is judged is the runtime and the driver (whether they give memory back),
which every GPU of the node shares. The loops run side by side, so each is judged on the driver's figure
of its own processes, never on the device's total that the others move.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rocmstack.doctor.model import DoctorOptions
from rocmstack.gpu.memory_return import LOOPS, finish_loops, start_loops
from rocmstack.platform.tools import Pending

PROBE = "memory-return"
MASK = {"nvidia": "CUDA_VISIBLE_DEVICES", "amd": "HIP_VISIBLE_DEVICES"}


@dataclass(frozen=True)
class Started:
    gpu: str  # the GPU the loops run on, as the driver numbers it ("first visible" without a list)
    pending: Mapping[str, Pending] = field(default_factory=dict)
    skipped: str | None = None


def gpus_here() -> bool:
    """A GPU device node on this machine (NVIDIA's or AMD's KFD)."""
    return bool(glob.glob("/dev/nvidia[0-9]*")) or os.path.exists("/dev/kfd")


def start(
    opts: DoctorOptions,
    gpus: tuple[str, tuple[int, ...]] | None,
    progress: Callable[[str], None],
    env: Mapping[str, str] | None = None,
) -> Started:
    """The loops, started now on the first GPU level 2 may use (``gpus``: a Slurm hook's free ones)."""
    if not gpus_here():
        return Started("none", skipped="no GPU on this node: device memory has no driver figure to read")
    child = dict(os.environ if env is None else env)
    gpu = "first visible"
    if gpus is not None and gpus[0] in MASK and gpus[1]:
        gpu = str(gpus[1][0])
        child[MASK[gpus[0]]] = gpu
    a = opts.active
    progress(
        f"level 2: memory-return loops ({', '.join(LOOPS)}), {a.return_cycles} cycles of "
        f"{a.return_bytes >> 20} MiB each, on GPU {gpu}, while Ray starts"
    )
    return Started(gpu, start_loops(LOOPS, a.return_bytes, a.return_cycles, child, a.return_timeout))


def finish(started: Started, opts: DoctorOptions) -> dict[str, Any]:
    if started.skipped:
        return {"skipped": started.skipped}
    return {
        "gpu": started.gpu,
        "cycles": opts.active.return_cycles,
        "nbytes": opts.active.return_bytes,
        "loops": finish_loops(started.pending, opts.active.return_bytes),
    }
