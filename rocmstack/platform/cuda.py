"""NVIDIA GPUs counted from independent sources: the driver's /proc tree, /dev/nvidia* nodes and nvidia-smi.
NVML and torch are probes (rocmstack.platform.probes). Same shape as rocm.py, for the same comparisons.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from rocmstack.platform.rocm import SmiCount
from rocmstack.platform.tools import ToolRun

NVIDIA_SMI_ARGV = ["nvidia-smi", "--query-gpu=index,name,uuid,pci.bus_id", "--format=csv"]


def proc_driver_gpus(proc_root: Path) -> list[str] | None:
    """PCI addresses under /proc/driver/nvidia/gpus (one folder per GPU). None: no NVIDIA driver loaded."""
    gpus = proc_root / "driver/nvidia/gpus"
    if not gpus.is_dir():
        return None
    return sorted(p.name for p in gpus.iterdir() if p.is_dir())


def dev_nvidia_nodes(dev_root: Path) -> list[Path]:
    """/dev/nvidia0, /dev/nvidia1, ... (nvidiactl, nvidia-uvm and friends are not GPUs)."""
    if not dev_root.is_dir():
        return []
    return sorted(
        (p for p in dev_root.glob("nvidia*") if re.fullmatch(r"nvidia\d+", p.name)),
        key=lambda p: int(p.name[6:]),
    )


@dataclass(frozen=True)
class NvidiaSmiGpu:
    index: int
    name: str
    uuid: str
    bus_id: str


def parse_nvidia_smi_csv(text: str) -> list[NvidiaSmiGpu]:
    """``nvidia-smi --query-gpu=... --format=csv``: a header row names the columns (in any order; units like
    ``memory.total [MiB]`` are ignored), one row per GPU."""
    rows = [[c.strip() for c in line.split(",")] for line in text.splitlines() if line.strip()]
    header_at = next((i for i, r in enumerate(rows) if "index" in [c.split(" [")[0] for c in r]), None)
    if header_at is None:
        return []
    cols = {c.split(" [")[0]: i for i, c in enumerate(rows[header_at])}
    gpus = []
    for row in rows[header_at + 1 :]:
        if len(row) != len(cols) or not row[cols["index"]].isdigit():
            continue
        field = {name: row[i] for name, i in cols.items()}
        gpus.append(
            NvidiaSmiGpu(
                int(field["index"]),
                field.get("name", ""),
                field.get("uuid", ""),
                field.get("pci.bus_id") or field.get("pci.bus", ""),
            )
        )
    return gpus


def count_from_nvidia_smi(run: ToolRun) -> SmiCount:
    if run.missing or run.timed_out or run.error:
        return SmiCount(None, run.reason())
    text = run.stdout + "\n" + run.stderr
    if "couldn't communicate with the NVIDIA driver" in text or "No devices were found" in text:
        return SmiCount(0, "no NVIDIA driver or device", driver_missing=True)
    if run.returncode != 0:
        return SmiCount(None, run.reason())
    return SmiCount(len(parse_nvidia_smi_csv(run.stdout)))
