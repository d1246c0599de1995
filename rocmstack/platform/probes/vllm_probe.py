"""Probe: does vLLM's compiled extension load? A CUDA wheel on ROCm fails here asking for libcudart."""

import time
from typing import Any

from _emit import emit, error_text

t0 = time.monotonic()
out: dict[str, Any] = {}
try:
    from importlib.metadata import version

    out["version"] = version("vllm")
except BaseException as exc:
    out["metadata_error"] = error_text(exc)
try:
    import vllm._C  # noqa: F401  (loading the compiled extension is the probe)

    out["ext_ok"] = True
except BaseException as exc:
    out["ext_ok"] = False
    out["ext_error"] = error_text(exc)
out["seconds"] = round(time.monotonic() - t0, 3)
emit(out)
