"""Probe (light, no heavy import): the target interpreter's packages and where its ROCm libraries live.

Runs in the target environment (its PYTHONPATH, its sys.path) so that what it finds is what a training
job in that environment would load.
"""

import importlib.util
import os
import re
import sys
import time
from typing import Any

from _emit import emit

t0 = time.monotonic()
out: dict[str, Any] = {"python": ".".join(map(str, sys.version_info[:3])), "executable": sys.executable}

# Installed distributions from the *.dist-info / *.egg-info folder names on sys.path: name and version
# are in the name, so no METADATA file is parsed (that costs ~0.5 s in a 300-package image).
dists: dict[str, Any] = {}
for entry in sys.path:
    try:
        names = os.listdir(entry or ".")
    except OSError:
        continue
    for name in names:
        for suffix in (".dist-info", ".egg-info"):
            if name.endswith(suffix) and "-" in name:
                stem = name[: -len(suffix)]
                dist, _, version = stem.partition("-")
                key = re.sub(r"[-_.]+", "-", dist).lower()
                dists.setdefault(key, version.split("-py")[0])
out["dists"] = dists


def origin(module):
    try:
        spec = importlib.util.find_spec(module)  # top-level names: finds, never imports
    except BaseException:
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return next(iter(spec.submodule_search_locations))
    return spec.origin


modules = {
    m: origin(m)
    for m in (
        "torch",
        "ray",
        "amdsmi",
        "pynvml",
        "vllm",
        "sglang",
        "aiter",
        "triton",
        "rocm_sdk",
        "_rocm_sdk_core",
    )
}
out["modules"] = modules


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


# How rocm_sdk preloads the ROCm libraries (TheRock wheels): initialize_process(rtld_global=True) by default.
preload = {}
if modules["rocm_sdk"]:
    text = read(os.path.join(modules["rocm_sdk"], "__init__.py")) or ""
    m = re.search(
        r"def\s+initialize_process\s*\(.*?rtld_global\s*:\s*bool\s*=\s*(True|False)", text, re.DOTALL
    )
    preload["sdk_default_global"] = None if m is None else m.group(1) == "True"
if modules["torch"]:
    text = read(os.path.join(modules["torch"], "_rocm_init.py"))
    if text is not None:
        m = re.search(r"rtld_global\s*=\s*(True|False)", text)
        preload["torch_passes"] = None if m is None else m.group(1) == "True"
        preload["torch_preloads_amd_smi"] = "amd_smi" in text
out["preload"] = preload

# Every libamd_smi on disk that this environment could load, grouped by the file it really is.
candidates = []
roots = [p for p in sys.path if p and os.path.isdir(p)]
rocm_path = os.environ.get("ROCM_PATH", "/opt/rocm")
patterns = [
    (r, sub) for r in roots for sub in ("amdsmi", "_rocm_sdk_core/lib", "_rocm_sdk_core/share/amd_smi/amdsmi")
]
patterns += [(rocm_path, "lib"), (rocm_path, "share/amd_smi/amdsmi")]
seen: set[tuple[int, int]] = set()
for root, sub in patterns:
    folder = os.path.join(root, sub)
    try:
        names = os.listdir(folder)
    except OSError:
        continue
    for name in sorted(names):
        if not name.startswith("libamd_smi.so"):
            continue
        path = os.path.join(folder, name)
        try:
            st = os.stat(path)
        except OSError:
            continue
        inode = (st.st_dev, st.st_ino)
        if inode in seen:
            continue
        seen.add(inode)
        candidates.append({"path": path, "real": os.path.realpath(path), "size": st.st_size})
out["libamd_smi_files"] = candidates
out["seconds"] = round(time.monotonic() - t0, 3)
emit(out)
