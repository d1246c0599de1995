"""Probe: import amdsmi and count processor handles the way Ray's AMD detector does; VRAM and who holds it."""

import contextlib
import os
import sys
import time
from typing import Any

from _emit import emit, error_text, loaded_copies


def _vram(value: Any) -> int | None:
    """amdsmi gives a process's vram_mem as bytes, or as {"value": N, "unit": "B"} in newer releases."""
    if isinstance(value, dict):
        value = value.get("value")
    return int(value) if isinstance(value, int | float) else None


def _memory(handle: Any, index: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"index": index}
    try:
        usage = amdsmi.amdsmi_get_gpu_vram_usage(handle)  # MB
        entry.update(total=int(usage["vram_total"]) << 20, used=int(usage["vram_used"]) << 20)
        procs = []
        for p in amdsmi.amdsmi_get_gpu_process_list(handle):
            if not isinstance(p, dict):  # releases before 6.1 return process handles without figures
                continue
            mem = p.get("memory_usage") or {}
            procs.append(
                {"pid": int(p["pid"]), "name": str(p.get("name", "")), "bytes": _vram(mem.get("vram_mem"))}
            )
        entry["processes"] = procs
    except Exception as exc:  # the count above stands; the memory check reports the gap
        entry["error"] = error_text(exc)
    return entry


t0 = time.monotonic()
out: dict[str, Any] = {"doctor_pid": os.getppid()}
try:
    import amdsmi
except BaseException as exc:  # without libamd_smi.so the import raises KeyError, not ImportError
    out["import_error"] = error_text(exc)
    out["import_error_type"] = type(exc).__name__
    emit(out)
    sys.exit(0)
out["module_file"] = getattr(amdsmi, "__file__", None)
try:
    amdsmi.amdsmi_init()
    try:
        handles = amdsmi.amdsmi_get_processor_handles()
        out["count"] = len(handles)
        out["memory"] = [_memory(h, i) for i, h in enumerate(handles)]
    finally:
        with contextlib.suppress(BaseException):
            amdsmi.amdsmi_shut_down()
except BaseException as exc:
    out["init_error"] = error_text(exc)
out["libamd_smi_loaded"] = loaded_copies("libamd_smi")
out["seconds"] = round(time.monotonic() - t0, 3)
emit(out)
