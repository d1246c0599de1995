"""Probe: NVML's device count (nvidia-ml-py), independent of CUDA_VISIBLE_DEVICES."""

import sys
import time
from typing import Any

from _emit import emit, error_text

t0 = time.monotonic()
out: dict[str, Any] = {}
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
        names, archs = [], []
        for i in range(out["count"]):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            names.append(name.decode() if isinstance(name, bytes) else str(name))
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            archs.append(f"sm_{major}{minor}")
        out["names"] = names
        out["archs"] = archs
        version = pynvml.nvmlSystemGetDriverVersion()
        out["driver"] = version.decode() if isinstance(version, bytes) else str(version)
    finally:
        pynvml.nvmlShutdown()
except BaseException as exc:
    out["init_error"] = error_text(exc)
out["seconds"] = round(time.monotonic() - t0, 3)
emit(out)
