"""Probe: what torch sees (count, arch list, device archs) and which libamd_smi copies it mapped."""

import sys
import time

from _emit import emit, error_text, loaded_copies

t0 = time.monotonic()
out = {"python": "%d.%d.%d" % sys.version_info[:3]}
try:
    import torch
except BaseException as exc:  # amdsmi's KeyError, a missing .so, anything: it is the finding
    out["import_error"] = error_text(exc)
    emit(out)
    sys.exit(0)
out["version"] = torch.__version__
out["hip"] = getattr(torch.version, "hip", None)
out["cuda"] = getattr(torch.version, "cuda", None)
try:
    out["available"] = bool(torch.cuda.is_available())
    out["count"] = int(torch.cuda.device_count())
    devices = []
    for i in range(out["count"]):
        props = torch.cuda.get_device_properties(i)
        if out["hip"]:
            arch = str(getattr(props, "gcnArchName", "")).split(":")[0]
        else:
            arch = "sm_%d%d" % (props.major, props.minor)
        devices.append({"index": i, "name": props.name, "arch": arch})
    out["devices"] = devices
    out["arch_list"] = list(torch.cuda.get_arch_list()) if out["count"] else []
except BaseException as exc:
    out["device_error"] = error_text(exc)
out["libamd_smi_loaded"] = loaded_copies("libamd_smi")
out["seconds"] = round(time.monotonic() - t0, 3)
emit(out)
