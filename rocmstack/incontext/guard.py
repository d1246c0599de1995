#!/usr/bin/env python3
"""Build-time guards run inside the image (standard library only). Each failure names its cause.

guard.py freeze NAME==EXPECTED|NAME ...  write the constraints file pinning the base's packages
guard.py python X.Y                      the interpreter must be Python X.Y
guard.py pin NAME==VERSION               a source-built dist is at its declared version; freeze it
guard.py final [--require-hip] [--forbid-nvidia]
guard.py pip-check [--accept PACKAGE:REQUIRES ...] [--no-deps PACKAGE ...]
                                         `pip check`, except conflicts the recipe accepts and the missing
                                         requirements of packages it installs with no_deps
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

EXIT_FAILED = 3


def _root() -> Path:
    return Path(os.environ.get("ROCMSTACK_ROOT", "/opt/rocmstack"))


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed() -> dict[str, str]:
    return {_norm(d.metadata["Name"]): d.version for d in md.distributions() if d.metadata["Name"]}


def fail(message: str) -> int:
    print(f"rocmstack guard FAILED: {message}", file=sys.stderr)
    return EXIT_FAILED


def freeze(items: list[str]) -> int:
    installed = _installed()
    lines = []
    for item in items:
        name, _, expected = item.partition("==")
        have = installed.get(_norm(name))
        if have is None:
            if expected:
                return fail(
                    f"the base image has no {name}, but the recipe declares {name} {expected} from the base"
                )
            continue
        release = re.match(r"\d+(?:\.\d+)*", have)
        if expected and (release.group() if release else have) != expected:
            return fail(
                f"the base image provides {name} {have}, but the recipe declares {expected}:"
                f" fix base.{name} or the base tag"
            )
        lines.append(f"{name}=={have}")
    path = _root() / "constraints.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    print(f"rocmstack guard: froze {', '.join(lines) or 'nothing'} in {path}")
    return 0


def pin(item: str) -> int:
    """After a source build: the dist must exist at the declared version, and later installs may not replace it."""
    name, _, expected = item.partition("==")
    have = _installed().get(_norm(name))
    if have is None:
        return fail(
            f"{name} was built from source but no distribution named {name} is installed"
            " (check the component's package name)"
        )
    release = re.match(r"\d+(?:\.\d+)*", have)
    declared = re.search(r"\d+(?:\.\d+)*", expected)
    # A declared version with no release number (a branch name) cannot be compared: only numbers are.
    if declared and not (release and release.group() == declared.group()):
        return fail(
            f"{name} built from source reports version {have}, but the recipe declares {expected}:"
            " the ref is not that release"
        )
    path = _root() / "constraints.txt"
    with path.open("a", encoding="utf-8") as fh:
        fh.write(f"{name}=={have}\n")
    print(f"rocmstack guard: pinned {name}=={have} for every later install")
    return 0


def python(version: str) -> int:
    have = f"{sys.version_info.major}.{sys.version_info.minor}"
    if have != version:
        return fail(
            f"Python {have} in the image, but vLLM ROCm wheels/builds need Python {version}: "
            "on other versions pip silently installs the CUDA wheel (libcudart.so errors at run time)"
        )
    return 0


def final(require_hip: bool, forbid_nvidia: bool) -> int:
    installed = _installed()
    if forbid_nvidia:
        cuda = sorted(n for n in installed if n.startswith("nvidia-"))
        if cuda:
            return fail(
                f"CUDA wheels got installed: {', '.join(cuda)}; a dependency pulled them in "
                "(find it with pip show, install it with --no-deps or constrain it)"
            )
    constraints = _root() / "constraints.txt"
    if constraints.is_file():
        for line in constraints.read_text(encoding="utf-8").split():
            name, _, pinned = line.partition("==")
            if installed.get(_norm(name)) != pinned:
                return fail(
                    f"{name} changed from the base's {pinned} to {installed.get(_norm(name))}: "
                    "a later install replaced it despite the constraints file"
                )
    if require_hip:
        try:
            import torch
        except Exception as exc:
            return fail(f"import torch failed: {exc!r}")
        if not getattr(torch.version, "hip", None):
            return fail(f"torch {torch.__version__} is not a ROCm build (torch.version.hip is unset)")
    print("rocmstack guard: final checks passed")
    return 0


_PIP_CHECK = re.compile(r"^(?P<pkg>\S+) \S+ (?P<kind>has requirement|requires) (?P<req>[A-Za-z0-9._-]+)")


def pip_check(accepted: Sequence[str], no_deps: Sequence[str] = ()) -> int:
    """Every installed distribution's requirements are met, except the (package, requirement) pairs accepted
    and requirements that are absent for a package the recipe installs with no_deps (a declared choice);
    a version conflict of a no_deps package still fails."""
    allowed = {tuple(_norm(x) for x in item.split(":", 1)) for item in accepted if ":" in item}
    without_deps = {_norm(n) for n in no_deps}
    proc = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, check=False)
    broken, kept = [], []
    for line in proc.stdout.splitlines():
        m = _PIP_CHECK.match(line.strip())
        pair = (_norm(m.group("pkg")), _norm(m.group("req"))) if m else None
        absent_by_choice = bool(m and m.group("kind") == "requires" and pair and pair[0] in without_deps)
        if pair in allowed or absent_by_choice:
            kept.append(line.strip())
        elif line.strip() and line.strip() != "No broken requirements found.":
            broken.append(line.strip())
    for line in kept:
        print(f"rocmstack guard: declared in the recipe (accepted conflict or no_deps): {line}")
    if broken:
        return fail(
            "pip check found conflicts the recipe does not accept: "
            + "; ".join(broken)
            + " (fix the pins, or declare the conflict under accepted_conflicts with a reason and source)"
        )
    print("rocmstack guard: pip check passed")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("freeze").add_argument("items", nargs="*")
    sub.add_parser("python").add_argument("version")
    sub.add_parser("pin").add_argument("item")
    f = sub.add_parser("final")
    f.add_argument("--require-hip", action="store_true")
    f.add_argument("--forbid-nvidia", action="store_true")
    c = sub.add_parser("pip-check")
    c.add_argument("--accept", action="append", default=[], metavar="PACKAGE:REQUIRES")
    c.add_argument("--no-deps", action="append", default=[], metavar="PACKAGE")
    args = parser.parse_args(argv)
    if args.cmd == "pip-check":
        return pip_check(args.accept, args.no_deps)
    if args.cmd == "freeze":
        return freeze(args.items)
    if args.cmd == "python":
        return python(args.version)
    if args.cmd == "pin":
        return pin(args.item)
    return final(args.require_hip, args.forbid_nvidia)


if __name__ == "__main__":
    sys.exit(main())
