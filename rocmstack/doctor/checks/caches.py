"""Kernel JIT caches (AITER, Triton): where they are, whether a job can use them, what they hold.

A cold or unusable cache is found only when the first step runs: 16 AITER modules built at first use took
633 s, past SGLang's 300 s watchdog (sgl-project/sglang#34586); ranks wait forever on the lock of a builder
that died (ROCm/aiter#1162); a library cached for gfx942 segfaults on gfx950 (AMD-Ecosystem/flashinfer#283).
Where each cache lives and what its files look like is data: jit_caches.yaml."""

from __future__ import annotations

import json
import mmap
import os
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from rocmstack.doctor.checks.network import _process_runs
from rocmstack.doctor.model import Check, DoctorOptions, Result, failed, passed, skipped, warned
from rocmstack.platform.snapshot import Snapshot
from rocmstack.resources import yaml_data

DATA = Path(__file__).resolve().parents[1] / "jit_caches.yaml"
# The offload-bundle entry id clang writes for each device target of a HIP module ("hipv4-amdgcn-amd-amdhsa--
# gfx942"); aiter reads a module's targets the same way (_so_offload_archs in aiter/jit/core.py).
_BUNDLE_TARGET = re.compile(rb"amdhsa--(gfx[0-9a-z]+)")


def data() -> dict:
    loaded: dict = yaml_data(DATA)
    return loaded


@dataclass(frozen=True)
class Folder:
    cache: str  # "aiter" or "triton"
    path: Path
    why: str  # where the path came from (the variable, or the default rule)


def _home(env: dict[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


def cache_folders(snap: Snapshot, opts: DoctorOptions) -> list[Folder]:
    """The folders the image's AITER and Triton would use, as their own code picks them; a cache whose
    package is not installed and whose variable is not set has none."""
    env = opts.environ()
    spec = data()["caches"]
    found: list[Folder] = []
    aiter = spec["aiter"]
    if env.get(aiter["env"]):
        found.append(Folder("aiter", Path(env[aiter["env"]]), f"${aiter['env']}"))
    elif (pkg := snap.module(aiter["package"])) is not None:
        own = Path(pkg) / aiter["package_subdir"]
        if os.access(own, os.W_OK):
            found.append(Folder("aiter", own, "aiter's package folder (writable)"))
        else:
            found.append(
                Folder("aiter", _home(env) / aiter["home_default"], "~/.aiter/jit (package read-only)")
            )
    triton = spec["triton"]
    if env.get(triton["env"]):
        found.append(Folder("triton", Path(env[triton["env"]]), f"${triton['env']}"))
    elif snap.module(triton["package"]) is not None or triton["package"] in snap.dists:
        home = Path(env[triton["home_env"]]) if env.get(triton["home_env"]) else _home(env)
        found.append(Folder("triton", home / triton["home_default"], "Triton's default"))
    return found


# -- mounts --------------------------------------------------------------------------------------------


def _unescape(field: str) -> str:
    # /proc/mounts writes space, tab, newline and backslash in paths as octal escapes (proc(5)).
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mount_of(path: Path, mounts_text: str) -> tuple[str, str, str] | None:
    """(mount point, fstype, source) of the mount that holds ``path``: the longest mount point above it,
    the last one mounted winning on a tie."""
    best: tuple[str, str, str] | None = None
    target = str(path)
    for line in mounts_text.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        point = _unescape(parts[1])
        inside = target == point or target.startswith(point.rstrip("/") + "/") or point == "/"
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, parts[2], _unescape(parts[0]))
    return best


def _existing(path: Path) -> Path:
    """The folder itself or, when it is not made yet, the nearest folder above it (where it will be made)."""
    current = path
    while not current.exists() and current != current.parent:
        current = current.parent
    return current


def cache_location(snap: Snapshot, opts: DoctorOptions) -> Result:
    folders = cache_folders(snap, opts)
    if not folders:
        return skipped("no AITER or Triton in this environment and no AITER_JIT_DIR/TRITON_CACHE_DIR set")
    try:
        mounts = (opts.proc_root / "mounts").read_text(encoding="utf-8", errors="replace")
    except OSError:
        mounts = ""
    network = set(data()["network_fstypes"])
    problems, lines = [], []
    for f in folders:
        real = _existing(f.path.expanduser()).resolve()
        where = mount_of(real, mounts)
        fstype = where[1] if where else "?"
        lines.append(f"{f.cache}: {f.path} ({f.why}; {fstype} at {where[0] if where else '?'})")
        if where and fstype in network:
            problems.append(f"{f.cache} cache {f.path} is on {fstype} ({where[2]} mounted at {where[0]})")
        if not os.access(real, os.W_OK | os.X_OK):
            made = "" if real == f.path else f" (not made yet; {real} is not writable)"
            problems.append(f"{f.cache} cache {f.path} is not writable{made}")
    if problems:
        return failed(
            f"{len(problems)} JIT cache problem(s): {problems[0]}",
            *problems,
            *lines,
            fix="Point AITER_JIT_DIR / TRITON_CACHE_DIR at a writable local disk (node-local NVMe or /tmp), "
            "one per node; prebuild AITER's modules into the image (recipe render option prebuild_aiter)",
        )
    return passed(f"{len(folders)} JIT cache folder(s) writable and local", *lines)


# -- locks ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lock:
    path: Path
    pid: int | None
    host: str | None
    age_s: float


def read_lock(path: Path, now: float) -> Lock | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
        age = now - path.stat().st_mtime
    except OSError:
        return None  # released while we looked
    lines = text.splitlines()
    if len(lines) >= 2 and lines[0].strip().isdigit():
        return Lock(path, int(lines[0].strip()), lines[1].strip(), age)
    return Lock(path, None, None, age)


def cache_locks(snap: Snapshot, opts: DoctorOptions) -> Result:
    folders = [f for f in cache_folders(snap, opts) if f.cache == "aiter"]
    if not folders:
        return skipped("no AITER JIT folder in this environment")
    now, host = time.time(), socket.gethostname()
    grace = float(data()["empty_lock_grace_s"])
    dead, foreign, orphan, live = [], [], [], 0
    for f in folders:
        for pattern in data()["caches"]["aiter"]["locks"]:
            for path in sorted(f.path.glob(pattern)):
                lock = read_lock(path, now)
                if lock is None or not path.is_file():
                    continue
                if lock.pid is None:
                    if lock.age_s > grace:
                        orphan.append(f"{path}: no owner recorded, {lock.age_s / 3600:.1f} h old")
                    else:
                        live += 1
                elif lock.host != host:
                    foreign.append(f"{path}: held by pid {lock.pid} on host {lock.host!r}")
                elif not _process_runs(opts, lock.pid):
                    dead.append(f"{path}: pid {lock.pid} on {host} is gone")
                else:
                    live += 1
    fix = (
        "Remove the stale lock file(s) listed (no build holds them), and give each node its own "
        "AITER_JIT_DIR on local disk"
    )
    if dead:
        return failed(
            f"{len(dead)} AITER lock(s) of a process that is gone: ranks wait on them forever "
            f"('waiting for baton release'): {dead[0]}",
            *dead,
            *foreign,
            *orphan,
            fix=fix,
        )
    if foreign or orphan:
        items = foreign + orphan
        return warned(
            f"{len(items)} AITER lock(s) no process here can be shown to hold: {items[0]}",
            *items,
            fix=fix + "; a lock from another host means the folder is shared (or baked in at build time)",
        )
    return passed(
        f"no stale lock in {len(folders)} AITER JIT folder(s)"
        + (f" ({live} held by a running build)" if live else "")
    )


# -- archs ---------------------------------------------------------------------------------------------


def module_archs(path: Path) -> set[str]:
    """The gfx targets whose device code a built HIP module carries (empty: host-only or unreadable)."""
    try:
        with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return {m.group(1).decode() for m in _BUNDLE_TARGET.finditer(mm)}
    except (OSError, ValueError):
        return set()


def triton_kernel_arch(path: Path) -> str | None:
    """The target arch in a Triton cache entry's metadata (``target: {backend: hip, arch: gfx942}``)."""
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    target = meta.get("target") if isinstance(meta, dict) else None
    if not isinstance(target, dict) or target.get("backend") != "hip":
        return None
    arch = target.get("arch")
    return str(arch) if arch else None


def cached_archs(folder: Folder) -> dict[str, int]:
    """How many cached modules (AITER) or kernels (Triton) the folder holds per gfx target."""
    counts: dict[str, int] = {}
    spec = data()["caches"][folder.cache]
    if folder.cache == "aiter":
        for so in folder.path.glob(spec["modules"]):
            for arch in module_archs(so):
                counts[arch] = counts.get(arch, 0) + 1
    else:
        for meta in folder.path.glob(spec["metadata"]):
            if not meta.name.startswith("__grp__") and (target := triton_kernel_arch(meta)):
                counts[target] = counts.get(target, 0) + 1
    return counts


def cache_arch(snap: Snapshot, opts: DoctorOptions) -> Result:
    gpu_archs = sorted({n.arch for n in snap.kfd or []})
    if not gpu_archs:
        return skipped("no AMD GPU in the KFD topology")
    folders = cache_folders(snap, opts)
    if not folders:
        return skipped("no AITER or Triton JIT folder in this environment")
    wrong, lines = [], []
    for f in folders:
        counts = cached_archs(f)
        held = ", ".join(f"{a}: {n}" for a, n in sorted(counts.items())) or "empty"
        lines.append(f"{f.cache}: {f.path} ({held})")
        missing = [a for a in gpu_archs if a not in counts]
        if counts and missing:
            wrong.append(
                f"{f.cache} cache {f.path} holds modules for {', '.join(sorted(counts))} only, "
                f"none for this node's {', '.join(missing)}"
            )
    if wrong:
        return failed(
            f"{wrong[0]}: every kernel is rebuilt at the first step, and a module loaded for the wrong "
            "arch faults at launch",
            *wrong,
            *lines,
            fix="Prebuild for this arch (add it to the recipe's gpu_archs with prebuild_aiter), or give "
            "this GPU model its own AITER_JIT_DIR / TRITON_CACHE_DIR",
        )
    return passed(f"JIT caches hold modules for {', '.join(gpu_archs)} (or are empty)", *lines)


CHECKS = (
    Check(
        "jit-cache-location",
        "caches",
        "AITER/Triton JIT folders writable and on local disk",
        cache_location,
        "https://github.com/deepspeedai/DeepSpeed/pull/6487",
    ),
    Check(
        "jit-cache-locks",
        "caches",
        "No AITER JIT lock of a process that is gone",
        cache_locks,
        "https://github.com/ROCm/aiter/issues/1162",
    ),
    Check(
        "jit-cache-arch",
        "caches",
        "JIT caches hold modules built for this GPU's arch",
        cache_arch,
        "https://github.com/AMD-Ecosystem/flashinfer/issues/283",
    ),
)
