"""Probe: NVML's device count (nvidia-ml-py), independent of CUDA_VISIBLE_DEVICES, and who holds memory."""

import os
import sys
import time
from typing import Any

from _emit import ancestors, emit, error_text


def _memory(handle: Any, index: int) -> dict[str, Any]:
    """Memory in use on one GPU and the compute processes holding it (bytes; None where NVML has no figure)."""
    entry: dict[str, Any] = {"index": index}
    try:
        info = pynvml.nvmlDeviceGetMemoryInfo(handle)
        entry.update(total=int(info.total), used=int(info.used), free=int(info.free))
        procs = []
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            used = p.usedGpuMemory
            # ancestors are read now: a child of the doctor (a sibling probe) has exited by the time checks run
            procs.append(
                {
                    "pid": int(p.pid),
                    "bytes": None if used is None else int(used),
                    "ancestors": ancestors(p.pid),
                }
            )
        entry["processes"] = procs
    except Exception as exc:  # an old driver without the call: the memory check says so, the count stands
        entry["error"] = error_text(exc)
    return entry


t0 = time.monotonic()
out: dict[str, Any] = {"doctor_pid": os.getppid()}
try:
    import pynvml
except BaseException as exc:
    out["import_error"] = error_text(exc)
    emit(out)
    sys.exit(0)
try:
    pynvml.nvmlInit()
    try:
        out["count"] = int(pynvml.nvmlDeviceGetCount())
        names, archs, memory = [], [], []
        for i in range(out["count"]):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            names.append(name.decode() if isinstance(name, bytes) else str(name))
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            archs.append(f"sm_{major}{minor}")
            memory.append(_memory(handle, i))
        out["names"] = names
        out["memory"] = memory
        out["archs"] = archs
        version = pynvml.nvmlSystemGetDriverVersion()
        out["driver"] = version.decode() if isinstance(version, bytes) else str(version)
    finally:
        pynvml.nvmlShutdown()
except BaseException as exc:
    out["init_error"] = error_text(exc)
out["seconds"] = round(time.monotonic() - t0, 3)
emit(out)
