"""known-advisories: this node's inventory (ROCm, the amdgpu driver, torch and the engines and frameworks
installed, the GPU archs, the environment) against the field's known-bad versions (rocmstack/advisories).
A match names the advisory, its source and its fix; FAIL or WARN as the advisory says."""

from __future__ import annotations

from pathlib import Path

from packaging.utils import canonicalize_name

from rocmstack.advisories.load import load_all
from rocmstack.advisories.match import Inventory, match
from rocmstack.advisories.model import COMPONENTS
from rocmstack.doctor.checks.runtime import rocm_version
from rocmstack.doctor.model import Check, DoctorOptions, Result, failed, passed, skipped, warned
from rocmstack.platform.snapshot import Snapshot

# distribution names that are a component under another name
DIST_ALIASES = {"amd-aiter": "aiter", "sgl-kernel": "sgl-kernel", "pytorch-triton-rocm": "triton"}


def _driver(sysfs: Path) -> str | None:
    try:
        return (sysfs / "module/amdgpu/version").read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def node_inventory(snap: Snapshot, opts: DoctorOptions) -> Inventory:
    versions: dict[str, str] = {}
    for dist, version in snap.dists.items():
        name = DIST_ALIASES.get(str(canonicalize_name(dist)), str(canonicalize_name(dist)))
        if name in COMPONENTS and version:
            versions[name] = version
    if snap.rocm_env() and (rocm := rocm_version(snap)):
        versions["rocm"] = rocm
    if driver := _driver(opts.sysfs_root):
        versions["amdgpu-driver"] = driver
    if snap.python_version:
        versions["python"] = snap.python_version
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
