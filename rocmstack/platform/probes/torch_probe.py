"""Probe: what torch sees (device count, compiled arch list) and which libamd_smi copies it mapped.

By default nothing here initialises the GPU runtime: device_count() goes through NVML (CUDA) or amdsmi
(ROCm), which is also where the RTLD_GLOBAL clash shows, and the arch list is read from the build. With
ROCMSTACK_PROBE_DEEP=1 the runtime is initialised too (cuInit/hipInit, device properties): seconds more.
"""

import os
import sys
import time
from typing import Any

from _emit import emit, error_text, loaded_copies

t0 = time.monotonic()
out: dict[str, Any] = {"python": ".".join(map(str, sys.version_info[:3]))}
try:
    import torch
except BaseException as exc:  # amdsmi's KeyError, a missing .so, anything: it is the finding
    out["import_error"] = error_text(exc)
    emit(out)
    sys.exit(0)
out["import_s"] = round(time.monotonic() - t0, 3)
out["version"] = torch.__version__
out["hip"] = getattr(torch.version, "hip", None)
out["cuda"] = getattr(torch.version, "cuda", None)
try:
    out["count"] = int(torch.cuda.device_count())
    flags = getattr(torch._C, "_cuda_getArchFlags", lambda: None)()
    out["arch_list"] = flags.split() if flags else []
    if os.environ.get("ROCMSTACK_PROBE_DEEP") == "1":
        out["available"] = bool(torch.cuda.is_available())
        out["runtime_count"] = int(torch._C._cuda_getDeviceCount()) if out["available"] else 0
        devices = []
        for i in range(out["count"] if out["available"] else 0):
            props = torch.cuda.get_device_properties(i)
            if out["hip"]:
                arch = str(getattr(props, "gcnArchName", "")).split(":")[0]
            else:
                arch = f"sm_{props.major}{props.minor}"
            devices.append({"index": i, "name": props.name, "arch": arch})
        out["devices"] = devices
except BaseException as exc:
    out["device_error"] = error_text(exc)
out["libamd_smi_loaded"] = loaded_copies("libamd_smi")
out["seconds"] = round(time.monotonic() - t0, 3)
emit(out)
