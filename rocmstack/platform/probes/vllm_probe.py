"""Probe: do vLLM's compiled extensions load? A CUDA wheel on ROCm fails here asking for libcudart.

vLLM's platforms load ``vllm._C`` and, since vLLM moved its CUDA kernels to torch's stable ABI (0.2x),
``vllm._C_stable_libtorch`` (vllm/platforms/cuda.py, rocm.py): each of them that the package ships must load.

It also records what vLLM's platform answers (``platform``: the device names it looks tuned configs up
by, get_device_name(); the FP8 type it picked, fp8_dtype() / is_fp8_fnuz(), and the arch it decided from)
and, without importing aiter, which arch folders of prebuilt AITER kernels the image ships (``aiter``).
"""

import importlib
import importlib.util
import os
import sys
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


def _aiter_kernels() -> dict:
    """aiter's prebuilt kernels by arch: <meta>/hsa/<gfx>/<family>/*.co, the folder aiter/jit/core.py
    resolves (aiter_meta/ beside the package when installed, the checkout in develop mode, or
    $AITER_META_DIR), read without importing aiter (its import starts JIT builds)."""
    spec = importlib.util.find_spec("aiter")
    if spec is None:
        return {"found": False}
    package = next(iter(spec.submodule_search_locations or [os.path.dirname(spec.origin or "")]))
    root = os.path.dirname(os.path.abspath(package))
    try:
        with open(os.path.join(package, "install_mode"), encoding="utf-8") as fh:
            develop = fh.read().strip() == "develop"
    except OSError:
        develop = True
    meta = root if develop else os.path.join(root, "aiter_meta")
    if os.environ.get("AITER_META_DIR"):
        meta = os.path.abspath(os.environ["AITER_META_DIR"])
    if not os.path.exists(os.path.join(meta, "csrc")):
        meta = root
    hsa = os.path.join(meta, "hsa")
    archs: dict = {}
    if os.path.isdir(hsa):
        for gfx in sorted(os.listdir(hsa)):
            top = os.path.join(hsa, gfx)
            if not os.path.isdir(top):
                continue
            families: dict = {}
            loose = 0
            for folder, _dirs, files in os.walk(top):
                n = sum(1 for f in files if f.endswith(".co"))
                rel = os.path.relpath(folder, top)
                if rel == ".":
                    loose += n
                else:
                    family = rel.split(os.sep)[0]
                    families[family] = families.get(family, 0) + n
            archs[gfx] = {"co": loose + sum(families.values()), "families": families}
    return {"found": True, "package": package, "meta_dir": meta, "hsa_dir": hsa, "archs": archs}


try:
    out["aiter"] = _aiter_kernels()
except BaseException as exc:
    out["aiter"] = {"error": error_text(exc)}


def _platform() -> dict:
    from vllm.platforms import current_platform

    plat: dict = {"class": type(current_platform).__name__}
    for key, call in (("is_rocm", "is_rocm"), ("is_cuda", "is_cuda")):
        try:
            plat[key] = bool(getattr(current_platform, call)())
        except BaseException as exc:
            plat[f"{key}_error"] = error_text(exc)
    try:
        plat["fp8_dtype"] = str(current_platform.fp8_dtype()).replace("torch.", "")
    except BaseException as exc:
        plat["fp8_error"] = error_text(exc)
    if hasattr(current_platform, "is_fp8_fnuz"):
        try:
            plat["is_fp8_fnuz"] = bool(current_platform.is_fp8_fnuz())
        except BaseException as exc:
            plat["fp8_error"] = error_text(exc)
    rocm = sys.modules.get("vllm.platforms.rocm")
    if rocm is not None and isinstance(getattr(rocm, "_GCN_ARCH", None), str):
        plat["gcn_arch"] = rocm._GCN_ARCH  # what is_fp8_fnuz() reads: the first device's arch
    if plat.get("is_rocm") or plat.get("is_cuda"):
        names = []
        try:
            for i in range(int(current_platform.device_count())):
                names.append(str(current_platform.get_device_name(i)))
        except BaseException as exc:
            plat["device_name_error"] = error_text(exc)
        plat["device_names"] = names
    return plat


try:
    out["platform"] = _platform()
except BaseException as exc:
    out["platform"] = {"error": error_text(exc)}
out["seconds"] = round(time.monotonic() - t0, 3)
emit(out)
