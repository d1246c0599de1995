"""The GPU error counters the driver keeps between jobs, and what is new in them since this boot's first run.

amdgpu: ``/sys/class/drm/<card>/device/ras/<block>_err_count`` (``ue: N`` / ``ce: N``, and ``de: N`` on
ACA-based GPUs; the driver's ``amdgpu_ras_sysfs_read``), the ACA files ``aca_<block>`` in the same format, and
the retired pages ``gpu_vram_bad_pages`` (one ``0x... : 0x... : R`` line each). NVIDIA: nvidia-smi's
volatile uncorrected ECC count per GPU. A counter keeps what happened since the driver loaded, so a health
check that failed on any non-zero count would keep a node out for an event a reboot already dealt with: the
counts are compared with the node's first run of this boot (``--history``), which a reboot starts afresh.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

RAS_CHECK = "gpu-ras-events"
# One counter of one GPU: "card1 umc" -> {"ue": 3, "ce": 10, "de": 0}; "card1 bad_pages" -> {"pages": 2}
Counters = dict[str, dict[str, int]]
# The kinds whose growth is an uncorrectable event: a new one drains the node
UNCORRECTABLE = ("ue", "pages")
_LINE = re.compile(r"^\s*(ue|ce|de)\s*:\s*(\d+)\s*$")
_BAD_PAGE = re.compile(r"^\s*0x[0-9a-fA-F]+\s*:\s*0x[0-9a-fA-F]+\s*:\s*\w\s*$")


def parse_count_file(text: str) -> dict[str, int] | None:
    """``ue: 0\\nce: 2\\n`` (and ``de: 1``) -> {"ue": 0, "ce": 2}; None when no line reads so (e.g. the
    driver's "Query currently inaccessible")."""
    found = {m.group(1): int(m.group(2)) for m in map(_LINE.match, text.splitlines()) if m}
    return found or None


def _label(device: Path, name: str) -> str:
    """The GPU's PCI address where the kernel gives it (uevent's PCI_SLOT_NAME), else its DRM name."""
    try:
        for line in (device / "uevent").read_text(errors="replace").splitlines():
            if line.startswith("PCI_SLOT_NAME="):
                return line.split("=", 1)[1].strip() or name
    except OSError:
        pass
    return name


def read_amd(sysfs_root: Path) -> Counters:
    """Every amdgpu RAS counter under ``sysfs_root`` (each GPU once, whichever DRM node names it)."""
    out: Counters = {}
    seen: set[Path] = set()
    for ras in sorted((sysfs_root / "class/drm").glob("*/device/ras")):
        device = ras.parent
        real = device.resolve()
        if real in seen:
            continue
        seen.add(real)
        gpu = _label(device, device.parent.name)
        for file in sorted(ras.iterdir()):
            name = file.name
            block = (
                name.removesuffix("_err_count")
                if name.endswith("_err_count")
                else name.removeprefix("aca_")
                if name.startswith("aca_")
                else None
            )
            try:
                text = file.read_text(errors="replace")
            except OSError:
                continue
            if block is not None:
                counts = parse_count_file(text)
                if counts is not None:
                    out[f"{gpu} {block}"] = counts
            elif name == "gpu_vram_bad_pages":
                out[f"{gpu} bad_pages"] = {"pages": sum(1 for ln in text.splitlines() if _BAD_PAGE.match(ln))}
    return out


def from_nvidia(rows: Iterable[tuple[str, int | None, int | None]]) -> Counters:
    """nvidia-smi's (index, corrected, uncorrected) volatile ECC rows; a GPU with ECC off has none."""
    return {f"GPU {i} ecc": {"ue": ue, "ce": ce or 0} for i, ce, ue in rows if ue is not None}


def boot_id(proc_root: Path) -> str | None:
    try:
        return (proc_root / "sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def new_events(baseline: Mapping[str, Mapping[str, int]], now: Counters) -> list[str]:
    """One line per counter of an uncorrectable kind that grew since ``baseline``. A counter lower than its
    baseline was reset (the driver reloaded): all it counts now is new."""
    lines = []
    for key, counts in sorted(now.items()):
        before = baseline.get(key, {})
        for kind in UNCORRECTABLE:
            if kind not in counts:
                continue
            was, is_ = int(before.get(kind, 0)), counts[kind]
            grew = is_ - was if is_ >= was else is_
            if grew > 0:
                what = "retired page(s)" if kind == "pages" else "uncorrectable error(s)"
                lines.append(f"{key}: {grew} new {what} ({kind} {was} -> {is_})")
    return lines


def _counters(obj: object) -> Counters | None:
    if not isinstance(obj, dict):
        return None
    out: Counters = {}
    for key, counts in obj.items():
        if not isinstance(key, str) or not isinstance(counts, dict):
            return None
        if not all(isinstance(k, str) and type(v) is int and v >= 0 for k, v in counts.items()):
            return None
        out[key] = dict(counts)
    return out


def recorded_kernel(run: Mapping[str, object]) -> tuple[int, list[str]] | None:
    """(the last kernel log record read, the GPU error events of this boot seen so far) a history record
    kept; None when it kept none or they are not well formed."""
    ras = run.get("ras")
    kernel = ras.get("kernel") if isinstance(ras, dict) else None
    if not isinstance(kernel, dict):
        return None
    seq, events = kernel.get("seq"), kernel.get("events")
    if type(seq) is not int or seq < 0 or not isinstance(events, list):
        return None
    if not all(isinstance(e, str) for e in events):
        return None
    return seq, list(events)


def recorded(run: Mapping[str, object]) -> tuple[str, Counters, str | None] | None:
    """(boot id, the boot's first counters, when they were read) a history record kept; None when it kept
    none or they are not well formed (a damaged or hand-edited line judges nothing). Each run carries its
    boot's first counters on, so the last run of the boot is enough: the file keeps only its last 4 MiB."""
    ras = run.get("ras")
    if not isinstance(ras, dict) or not isinstance(ras.get("boot_id"), str):
        return None
    counters = _counters(ras.get("counters"))
    baseline = _counters(ras.get("baseline")) if "baseline" in ras else counters
    if counters is None or baseline is None:
        return None
    since = ras.get("since") if isinstance(ras.get("since"), str) else run.get("started_at")
    return ras["boot_id"], baseline, since if isinstance(since, str) else None
