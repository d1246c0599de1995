"""Regenerate rocmstack/doctor/known_env.json: every environment variable name with a linted prefix that the
real packages mention, found by grepping the installed package files (Python sources for string literals,
shared libraries for their embedded strings).

    python ci/gen_known_env.py PACKAGE_OR_WHEEL... > rocmstack/doctor/known_env.json

Each argument is an installed package name (its directory is scanned: ray, torch) or a wheel file (unzipped in
memory: nvidia_nccl_cu12-*.whl, vllm-*.whl, sglang-*.whl). The output records what was scanned, with versions.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import sys
import zipfile
from pathlib import Path

# The package that owns a prefix: its list is complete enough to judge a name as unknown. HSA_/HIP_/RCCL_/
# AITER_ have no owner installable here (ROCm runtime, RCCL and aiter ship outside PyPI), so they are not judged.
OWNERS = {
    "nvidia_nccl": ("NCCL_",),
    "ray": ("RAY_",),
    "vllm": ("VLLM_",),
    "sglang": ("SGLANG_",),
    "torch": ("TORCH_", "PYTORCH_"),
}
# Read by builds that cannot be installed here (the torch scanned is the CPU wheel), cited instead.
CITED = {
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "https://github.com/pytorch/pytorch/tree/main/torch/csrc/distributed/c10d/symm_mem"
    " (CUDA builds of torch only; seen read by torch 2.11.0+cu130, docs/evidence/doctor-levels-h200x2-2026-11-30)",
}
PREFIXES = ("NCCL_", "RCCL_", "HSA_", "HIP_", "RAY_", "VLLM_", "SGLANG_", "AITER_", "TORCH_", "PYTORCH_")
NAME = re.compile(
    rb"(?<![A-Za-z0-9_])((?:" + b"|".join(p.encode() for p in PREFIXES) + rb")[A-Za-z0-9_]*[A-Za-z0-9])"
)


def names_in(data: bytes) -> set[str]:
    return {m.decode() for m in NAME.findall(data)}


def scan_files(items) -> set[str]:  # items: iterable of (name, bytes)
    out: set[str] = set()
    for name, data in items:
        if name.endswith((".py", ".so", ".pyi")) or ".so." in name:
            out |= names_in(data)
    return out


def scan_package(name: str) -> tuple[str, set[str]]:
    spec = importlib.util.find_spec(name)
    assert spec and spec.origin, f"{name} is not installed"
    root = Path(spec.origin).parent
    version = importlib.metadata.version(name)
    found = scan_files((str(p), p.read_bytes()) for p in root.rglob("*") if p.is_file())
    return f"{name}=={version} (installed package files)", found


def scan_wheel(path: Path) -> tuple[str, set[str]]:
    with zipfile.ZipFile(path) as zf:
        found = scan_files((i.filename, zf.read(i)) for i in zf.infolist() if not i.is_dir())
    return f"{path.name} (wheel from PyPI)", found


def main(args: list[str]) -> None:
    sources, names = [], set()
    for arg in args:
        label, found = scan_wheel(Path(arg)) if arg.endswith(".whl") else scan_package(arg)
        sources.append(label)
        names |= found
    covered = sorted(
        {p for arg in args for owner, ps in OWNERS.items() if Path(arg).name.startswith(owner) for p in ps}
    )
    json.dump(
        {
            "generated_by": "ci/gen_known_env.py",
            "sources": sources,
            "prefixes_judged": covered,
            "names": sorted(names),
        },
        sys.stdout,
        indent=1,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
