#!/usr/bin/env python3
"""AITER's JIT modules, built into the image and timed at their first call (standard library and aiter only).

aiter_prebuild.py build --out FILE MODULE ...  build each module for $GPU_ARCHS into aiter's JIT folder
                                               ($AITER_JIT_DIR); fail unless every .so carries every arch;
                                               write the manifest FILE
aiter_prebuild.py first-call MODULE            load the module as an engine's first call does and print
                                               {"module", "import_s", "first_call_s", "file"} as JSON

Cold modules are built at the first step: 16 took 633 s, past SGLang's 300 s watchdog (sgl-project/sglang#34586).
How aiter builds and finds a module: aiter/jit/core.py (get_args_of_build, build_module, get_user_jit_dir,
get_module) at ROCm/aiter e4048607a535ace3a2b51ded31b1c8c2d45c0879.
"""

from __future__ import annotations

import argparse
import inspect
import json
import mmap
import os
import re
import sys
import time
from pathlib import Path

EXIT_FAILED = 3
# clang's offload-bundle entry id of each device target ("hipv4-amdgcn-amd-amdhsa--gfx942")
BUNDLE_TARGET = re.compile(rb"amdhsa--(gfx[0-9a-z]+)")


def fail(message: str) -> None:
    print(f"aiter-prebuild: {message}", file=sys.stderr)
    sys.exit(EXIT_FAILED)


def so_archs(path: Path) -> list[str]:
    try:
        with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return sorted({m.group(1).decode() for m in BUNDLE_TARGET.finditer(mm)})
    except (OSError, ValueError):
        return []


def build(modules: list[str], out: Path) -> None:
    archs = [a for a in os.environ.get("GPU_ARCHS", "").split(";") if a and a != "native"]
    if not archs:
        fail(
            "GPU_ARCHS names no arch (a build has no GPU to detect): set it to the image's archs, e.g. gfx942;gfx950"
        )
    from aiter.jit import core

    known = json.loads((Path(core.__file__).parent / "optCompilerConfig.json").read_text(encoding="utf-8"))
    unknown = [m for m in modules if m not in known]
    if unknown:
        fail(
            f"aiter has no module {', '.join(unknown)} (optCompilerConfig.json); e.g. {', '.join(sorted(known)[:3])}"
        )
    params = inspect.signature(core.build_module).parameters
    jit_dir = Path(core.get_user_jit_dir())
    done = []
    for name in modules:
        t0 = time.monotonic()
        args = {**core.get_args_of_build(name), "md_name": name}
        core.build_module(**{k: v for k, v in args.items() if k in params})
        so = jit_dir / f"{name}.so"
        built = so_archs(so)
        missing = [a for a in archs if a not in built]
        if missing:
            fail(f"{name}: {so} carries device code for {built or 'no arch'}, not {', '.join(missing)}")
        done.append(
            {"module": name, "seconds": round(time.monotonic() - t0, 1), "archs": built, "file": str(so)}
        )
        print(f"aiter-prebuild: {name} built for {', '.join(built)} in {done[-1]['seconds']} s", flush=True)
    try:
        from importlib.metadata import version

        aiter_version = version("aiter")
    except Exception:  # a source checkout may have no distribution metadata
        aiter_version = None
    manifest = {
        "schema": 1,
        "gpu_archs": archs,
        "jit_dir": str(jit_dir),
        "aiter": aiter_version,
        "modules": done,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def first_call(name: str) -> None:
    t0 = time.perf_counter()
    from aiter.jit import core

    t1 = time.perf_counter()
    module = core.get_module(name)  # what the first call of any of its ops does; builds it when absent
    t2 = time.perf_counter()
    print(
        json.dumps(
            {
                "module": name,
                "import_s": round(t1 - t0, 3),
                "first_call_s": round(t2 - t1, 3),
                "file": getattr(module, "__file__", None),
            }
        )
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="aiter_prebuild.py")
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("modules", nargs="+")
    f = sub.add_parser("first-call")
    f.add_argument("module")
    args = parser.parse_args(argv)
    if args.cmd == "build":
        build(args.modules, args.out)
    else:
        first_call(args.module)


if __name__ == "__main__":
    main()
