"""known-advisories: this node's inventory (ROCm, the amdgpu driver, torch and the engines and frameworks
installed, the GPU archs, the environment) against the field's known-bad versions (rocmstack/advisories).
A match names the advisory, its source and its fix; FAIL or WARN as the advisory says."""

from __future__ import annotations

import os
import re
from pathlib import Path

from packaging.utils import canonicalize_name

from rocmstack.advisories.load import load_all
from rocmstack.advisories.match import Inventory, match
from rocmstack.advisories.model import COMPONENTS
from rocmstack.doctor.checks.runtime import rocm_version
from rocmstack.doctor.model import Check, DoctorOptions, Result, failed, passed, skipped, warned
from rocmstack.platform.snapshot import Snapshot

# distribution names that are a component under another name
DIST_ALIASES = {"amd-aiter": "aiter", "pytorch-triton-rocm": "triton"}


def _driver(sysfs: Path) -> str | None:
    try:
        return (sysfs / "module/amdgpu/version").read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


# where a distribution keeps the C++ runtime every native extension of the image links against
LIBSTDCXX = (
    Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6"),
    Path("/usr/lib64/libstdc++.so.6"),
    Path("/usr/lib/aarch64-linux-gnu/libstdc++.so.6"),
    Path("/usr/lib/libstdc++.so.6"),
)
_GLIBCXX = re.compile(rb"GLIBCXX_3\.4\.(\d+)\b")


def glibcxx_level(candidates: tuple[Path, ...] = LIBSTDCXX) -> str | None:
    """The highest GLIBCXX_3.4.N the first libstdc++ found provides, as "3.4.N" (its version tags are in the
    file: what a wheel built for a newer one fails on)."""
    for path in candidates:
        try:
            data = path.read_bytes()
        except OSError:
            continue
        levels = [int(m.group(1)) for m in _GLIBCXX.finditer(data)]
        if levels:
            return f"3.4.{max(levels)}"
    return None


def rocm_release(snap: Snapshot) -> str | None:
    """The ROCm release as advisories name it (7.0.2): the installation's own record
    ($ROCM_PATH/.info/version), torch's +rocm tag, the ROCm SDK wheels; else HIP's version, whose third field
    is a build number (7.0.51831), as major.minor only."""
    root = Path(snap.env.get("ROCM_PATH") or "/opt/rocm")
    try:
        found = re.match(r"(\d+\.\d+(?:\.\d+)?)", (root / ".info/version").read_text(encoding="utf-8"))
        if found:
            return found.group(1)
    except OSError:
        pass
    tag = re.search(r"\+rocm(\d+\.\d+(?:\.\d+)?)", snap.dists.get("torch", ""))
    if tag:
        return tag.group(1)
    for name in ("rocm-sdk-core", "rocm"):
        if snap.dists.get(name):
            return snap.dists[name]
    hip = rocm_version(snap)
    found = re.match(r"(\d+\.\d+)", hip or "")
    return found.group(1) if found else None


def node_inventory(snap: Snapshot, opts: DoctorOptions) -> Inventory:
    versions: dict[str, str] = {}
    for dist, version in snap.dists.items():
        name = DIST_ALIASES.get(str(canonicalize_name(dist)), str(canonicalize_name(dist)))
        if name in COMPONENTS and version:
            versions[name] = version
    if snap.rocm_env() and (rocm := rocm_release(snap)):
        versions["rocm"] = rocm
    if driver := _driver(opts.sysfs_root):
        versions["amdgpu-driver"] = driver
    if snap.python_version:
        versions["python"] = snap.python_version
    if level := glibcxx_level():
        versions["libstdcxx"] = level
    libc = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None  # "glibc 2.36"
    if libc and libc.startswith("glibc "):
        versions["glibc"] = libc.split()[1]
    archs = frozenset(n.arch for n in snap.kfd or [])
    return Inventory("this node", versions, archs, dict(snap.env))


def known_advisories(snap: Snapshot, opts: DoctorOptions) -> Result:
    inv = node_inventory(snap, opts)
    if not inv.versions:
        return skipped("no version of anything the advisories name is known here")
    advisories = load_all(opts.advisories_dirs)
    found = sorted(match(advisories, inv), key=lambda m: (m.advisory.versions_alone != "fail", m.advisory.id))
    known = ", ".join(f"{k} {v}" for k, v in sorted(inv.versions.items()))
    if not found:
        return passed(f"none of {len(advisories)} advisories matches this node", f"inventory: {known}")
    lines = [
        f"{m.advisory.id} ({m.advisory.versions_alone}): {m.advisory.title} [{m.why}]; "
        f"symptom: {m.advisory.symptom[:200]}; source: {m.advisory.source}"
        for m in found
    ]
    fix = "; ".join(f"{m.advisory.id}: {m.advisory.fix}" for m in found)
    summary = f"{len(found)} known-bad version(s) here: {found[0].advisory.id}: {found[0].advisory.title}"
    # versions alone fail only where every such install breaks; most bugs also need a usage: a warning
    if any(m.advisory.versions_alone == "fail" for m in found):
        return failed(summary, *lines, f"inventory: {known}", fix=fix)
    return warned(summary, *lines, f"inventory: {known}", fix=fix)


CHECKS = (
    Check(
        "known-advisories",
        "packages",
        "No version the field knows to be broken",
        known_advisories,
        "https://github.com/ROCm/ROCm/releases",
    ),
)
