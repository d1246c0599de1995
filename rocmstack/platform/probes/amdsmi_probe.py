"""Probe: import amdsmi and count processor handles the way Ray's AMD detector does."""

import contextlib
import sys
import time
from typing import Any

from _emit import emit, error_text, loaded_copies

t0 = time.monotonic()
out: dict[str, Any] = {}
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
        out["count"] = len(amdsmi.amdsmi_get_processor_handles())
    finally:
        with contextlib.suppress(BaseException):
            amdsmi.amdsmi_shut_down()
except BaseException as exc:
    out["init_error"] = error_text(exc)
out["libamd_smi_loaded"] = loaded_copies("libamd_smi")
out["seconds"] = round(time.monotonic() - t0, 3)
emit(out)
