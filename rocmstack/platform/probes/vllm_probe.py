"""Probe: do vLLM's compiled extensions load? A CUDA wheel on ROCm fails here asking for libcudart.

vLLM's platforms load ``vllm._C`` and, since vLLM moved its CUDA kernels to torch's stable ABI (0.2x),
``vllm._C_stable_libtorch`` (vllm/platforms/cuda.py, rocm.py): each of them that the package ships must load.
"""

import importlib
import importlib.util
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
EXTENSIONS = ("vllm._C", "vllm._C_stable_libtorch")
try:
    shipped = [name for name in EXTENSIONS if importlib.util.find_spec(name) is not None]
    out["ext_modules"] = shipped
    if not shipped:
        out["ext_ok"] = False
        out["ext_error"] = f"the package ships none of {', '.join(EXTENSIONS)}"
    for name in shipped:
        importlib.import_module(name)  # loading the compiled extension is the probe
    out.setdefault("ext_ok", True)
except BaseException as exc:
    out["ext_ok"] = False
    out["ext_error"] = error_text(exc)
out["seconds"] = round(time.monotonic() - t0, 3)
emit(out)
