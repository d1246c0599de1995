"""The rocmstack image contract: installed versions vs the embedded lock, and the patch markers.

Both skip cleanly outside a rocmstack image (no ``$ROCMSTACK_ROOT/lock.json``)."""

from __future__ import annotations

import json
from pathlib import Path

from packaging.utils import canonicalize_name

from rocmstack.doctor.model import Check, DoctorOptions, Result, failed, passed, skipped, warned
from rocmstack.platform.snapshot import Snapshot


def read_lock(root: Path) -> tuple[dict | None, str | None]:
    """(lock, None), (None, None) when there is no lock, or (None, error) when it is unreadable."""
    path = root / "lock.json"
    if not path.is_file():
        return None, None
    try:
        lock = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"{path}: {exc}"
    if not isinstance(lock, dict) or lock.get("schema") != 1:
        return (
            None,
            f"{path}: not a schema-1 rocmstack lock "
            f"(schema={lock.get('schema') if isinstance(lock, dict) else '?'})",
        )
    return lock, None


def applied_markers(root: Path) -> tuple[dict[str, dict], list[str]]:
    markers: dict[str, dict] = {}
    bad: list[str] = []
    folder = root / "patches/applied"
    if not folder.is_dir():
        return markers, bad
    for path in sorted(folder.glob("*.json")):
        try:
            marker = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            bad.append(f"{path.name}: {exc}")
            continue
        if not isinstance(marker, dict) or marker.get("id") != path.stem or not marker.get("target"):
            bad.append(f"{path.name}: marker must be {{id: {path.stem!r}, component, target}}")
            continue
        markers[path.stem] = marker
    return markers, bad


def _same(locked: str, installed: str) -> bool:
    # Pinning "2.12.0" accepts the base image's local build "2.12.0+rocm7.14"; a pinned local tag must match.
    return installed == locked or ("+" not in locked and installed.split("+")[0] == locked)


def lock_drift(snap: Snapshot, opts: DoctorOptions) -> Result:
    root = opts.resolved_image_root()
    lock, error = read_lock(root)
    if error:
        return failed(
            f"image lock unreadable: {error}", fix="Rebuild the image; the render step writes lock.json"
        )
    if lock is None:
        return skipped(f"not a rocmstack image (no {root / 'lock.json'})")
    dists = snap.dists  # keys PEP 503-normalised by the site probe
    drift, missing, checked = [], [], 0
    wanted = dict(lock.get("components") or {})
    base = lock.get("base") or {}
    if base.get("torch"):
        wanted.setdefault("torch", {"package": "torch", "version": base["torch"], "source": "base"})
    for name, comp in sorted(wanted.items()):
        package = (comp or {}).get("package")
        if not package:
            continue
        installed = dists.get(canonicalize_name(package))
        checked += 1
        if installed is None:
            missing.append(
                f"{name}: {package} not installed (lock: {comp.get('version') or comp.get('ref')})"
            )
        elif comp.get("version") and not _same(str(comp["version"]), installed):
            drift.append(f"{name}: {package} {installed} installed, lock says {comp['version']}")
    py_locked = str(base.get("python") or "")
    py = snap.python_version
    if py_locked and not (py == py_locked or py.startswith(py_locked + ".")):
        drift.append(f"python {py}, lock says {py_locked}")
    problems = drift + missing
    recipe = f"recipe {lock.get('recipe')} (render {str(lock.get('render_hash', ''))[:12]})"
    if problems:
        return failed(
            f"{len(problems)} component(s) drifted from the image lock ({recipe}): {problems[0]}",
            *problems,
            fix="Something was installed after the build: rebuild the image, or reinstall "
            "the locked versions with pip install -c the lock's constraints",
        )
    return passed(f"{checked} locked component(s) match ({recipe})")


def patches_applied(snap: Snapshot, opts: DoctorOptions) -> Result:
    root = opts.resolved_image_root()
    lock, error = read_lock(root)
    if error:
        return failed(f"image lock unreadable: {error}", fix="Rebuild the image")
    if lock is None:
        return skipped(f"not a rocmstack image (no {root / 'lock.json'})")
    wanted = [str(p) for p in lock.get("patches") or []]
    markers, bad = applied_markers(root)
    missing = [p for p in wanted if p not in markers]
    extra = sorted(set(markers) - set(wanted))
    if bad or missing:
        items = [f"no marker for patch {p}" for p in missing] + [f"bad marker {b}" for b in bad]
        return failed(
            f"{len(missing)} of {len(wanted)} locked patch(es) not applied"
            + (f" ({', '.join(missing)})" if missing else "")
            + (f"; {len(bad)} malformed marker(s)" if bad else ""),
            *items,
            fix="Rebuild: the patch step writes a marker only when its target text matched",
        )
    if extra:
        return warned(
            f"marker(s) for patch(es) not in the lock: {', '.join(extra)}",
            fix="The image was patched by hand after the build; rebuild it from its recipe",
        )
    return passed(
        f"all {len(wanted)} locked patch(es) applied" + (f": {', '.join(wanted)}" if wanted else "")
    )


def applied_patch_ids(opts: DoctorOptions) -> set[str]:
    """Patch ids with a valid marker (empty outside an image): other checks use them as evidence."""
    markers, _ = applied_markers(opts.resolved_image_root())
    return set(markers)


CHECKS = (
    Check(
        "lock-drift",
        "image",
        "Installed versions match the image lock",
        lock_drift,
        "https://github.com/vllm-project/vime/blob/main/docker/Dockerfile.rocm7.14",
    ),
    Check(
        "patches-applied",
        "image",
        "Every locked patch has its marker",
        patches_applied,
        "https://github.com/AMD-Ecosystem/verl/blob/release/0.9.0.amd0/docker/rocm/Dockerfile.rocm",
    ),
)
