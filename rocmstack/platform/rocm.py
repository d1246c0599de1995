"""AMD GPUs counted from independent sources: KFD topology (sysfs), DRM render nodes, rocm-smi, amd-smi,
rocminfo and the compute-partition mode. Pure parsers plus small readers that take a root path, so tests
can hand them a fake sysfs tree or a tool's verbatim output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from rocmstack.platform.tools import ToolRun, extract_json, strip_ansi

AMD_VENDOR_ID = "0x1002"
PARTITION_FACTORS = {"SPX": 1, "DPX": 2, "TPX": 3, "QPX": 4, "CPX": 8}  # CPX: one per XCD (8 on MI300X)


@dataclass(frozen=True)
class KfdNode:
    node: int
    gfx_target_version: int
    location_id: int
    domain: int
    device_id: int = 0  # the PCI device id (KFD's device_id; 0x74a1 is an MI300X)

    @property
    def arch(self) -> str:
        return gfx_name(self.gfx_target_version)


def gfx_name(target_version: int) -> str:
    """KFD's ``gfx_target_version`` (90402, 90010, 110000) as an LLVM target (gfx942, gfx90a, gfx1100)."""
    major, minor, step = target_version // 10000, (target_version // 100) % 100, target_version % 100
    return f"gfx{major}{minor}{step:x}"


def _properties(path: Path) -> dict[str, int]:
    values: dict[str, int] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return values
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                values[parts[0]] = int(parts[1])
            except ValueError:
                continue
    return values


def kfd_gpu_nodes(sysfs_root: Path) -> list[KfdNode] | None:
    """GPU nodes in the KFD topology (CPU nodes have gfx_target_version 0). None: no KFD at all."""
    nodes_dir = sysfs_root / "class/kfd/kfd/topology/nodes"
    if not nodes_dir.is_dir():
        return None
    found = []
    for node_dir in sorted(nodes_dir.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1):
        if not node_dir.name.isdigit():
            continue
        props = _properties(node_dir / "properties")
        version = props.get("gfx_target_version", 0)
        if version > 0 and props.get("simd_count", 1) > 0:
            found.append(
                KfdNode(
                    int(node_dir.name),
                    version,
                    props.get("location_id", 0),
                    props.get("domain", 0),
                    props.get("device_id", 0),
                )
            )
    return found


@dataclass(frozen=True)
class RenderNode:
    name: str
    path: Path
    vendor: str | None  # PCI vendor id from sysfs, None when sysfs does not say


def render_nodes(dev_root: Path, sysfs_root: Path) -> list[RenderNode]:
    dri = dev_root / "dri"
    if not dri.is_dir():
        return []
    nodes = []
    for path in sorted(dri.glob("renderD*")):
        vendor_file = sysfs_root / "class/drm" / path.name / "device/vendor"
        try:
            vendor = vendor_file.read_text().strip().lower()
        except OSError:
            vendor = None
        nodes.append(RenderNode(path.name, path, vendor))
    return nodes


def amd_render_nodes(dev_root: Path, sysfs_root: Path) -> list[RenderNode]:
    """Render nodes that belong to AMD devices (an NVIDIA or ASPEED card has its own renderD too)."""
    return [n for n in render_nodes(dev_root, sysfs_root) if n.vendor == AMD_VENDOR_ID]


def compute_partitions(sysfs_root: Path) -> dict[str, str]:
    """``current_compute_partition`` of each AMD card that exposes one (MI300 and later), by card name."""
    modes: dict[str, str] = {}
    drm = sysfs_root / "class/drm"
    if not drm.is_dir():
        return modes
    for card in sorted(drm.glob("card[0-9]*")):
        if not card.name[4:].isdigit():
            continue
        try:
            mode = (card / "device/current_compute_partition").read_text().strip().upper()
        except OSError:
            continue
        if mode:
            modes[card.name] = mode
    return modes


@dataclass(frozen=True)
class SmiCount:
    """A device count from a vendor tool; ``count`` None with a ``reason`` when the tool gave none."""

    count: int | None
    reason: str = ""
    driver_missing: bool = False


_DRIVER_MISSING = (
    "amdgpu not found in modules",  # rocm-smi without the amdgpu driver (Debian's 5.2 in a container)
    "ROCk module is NOT loaded",  # rocminfo without KFD
    "Driver not initialized",
    "amdgpu driver not loaded",
)


def driver_missing(text: str) -> bool:
    return any(marker in text for marker in _DRIVER_MISSING)


def parse_rocm_smi_json(text: str) -> SmiCount:
    """rocm-smi --json: ``{"card0": {...}, "card1": {...}}``; older releases add a "system" key, any release
    may print warnings first. Key names inside a card drift between versions; only the cards are counted."""
    data = extract_json(text)
    if not isinstance(data, dict):
        if driver_missing(text):
            return SmiCount(0, "amdgpu driver not loaded", driver_missing=True)
        return SmiCount(None, "no JSON in rocm-smi output")
    cards = [k for k in data if re.fullmatch(r"card\d+", k)]
    return SmiCount(len(cards))


def parse_amd_smi_list_json(text: str) -> SmiCount:
    """amd-smi list --json: a list of ``{"gpu": N, ...}``; amd-smi 26+ wraps it as ``{"gpu_data": [...]}``."""
    data = extract_json(text)
    if isinstance(data, dict) and isinstance(data.get("gpu_data"), list):
        data = data["gpu_data"]
    if isinstance(data, list):
        return SmiCount(sum(1 for item in data if isinstance(item, dict) and "gpu" in item))
    if driver_missing(text):
        return SmiCount(0, "amdgpu driver not loaded", driver_missing=True)
    return SmiCount(None, "no JSON list in amd-smi output")


def parse_rocminfo_agents(text: str) -> list[str]:
    """GPU agents' ``Name: gfxNNN`` from rocminfo (CPU agents have a ``Name:`` line too: skip them)."""
    return re.findall(r"^\s*Name:\s+(gfx[0-9a-f]+)\s*$", strip_ansi(text), flags=re.MULTILINE)


def parse_rocminfo(text: str, returncode: int | None) -> SmiCount:
    if driver_missing(text):
        return SmiCount(0, "KFD driver (ROCk) not loaded", driver_missing=True)
    agents = parse_rocminfo_agents(text)
    if returncode not in (0, None) and not agents:
        return SmiCount(None, f"rocminfo exited {returncode}")
    return SmiCount(len(agents))


def parse_amd_smi_partition(text: str) -> list[str]:
    """Compute-partition modes per GPU from ``amd-smi partition`` (JSON or its text table)."""
    data = extract_json(text)
    if data is not None:
        modes: list[str] = []

        def walk(node: object) -> None:
            if isinstance(node, dict):
                for key, value in node.items():
                    k = str(key).lower()
                    if k in ("accelerator_type", "compute_partition", "current_compute_partition") and (
                        isinstance(value, str) and value.strip("*").upper() in PARTITION_FACTORS
                    ):
                        modes.append(value.strip("*").upper())
                    else:
                        walk(value)
            elif isinstance(node, list):
                for item in node:
                    walk(item)

        walk(data.get("current_partition", data) if isinstance(data, dict) else data)
        return modes
    # Text: the CURRENT_PARTITION table, columns GPU_ID MEMORY ACCELERATOR_TYPE ...
    modes = []
    in_table = False
    for line in text.splitlines():
        if line.strip().startswith("CURRENT_PARTITION"):
            in_table = True
            continue
        if in_table:
            parts = line.split()
            if not parts:
                break
            if parts[0].isdigit() and len(parts) >= 3 and parts[2].upper() in PARTITION_FACTORS:
                modes.append(parts[2].upper())
    return modes


def count_from_tool(name: str, run: ToolRun) -> SmiCount:
    if run.missing or run.timed_out or run.error:
        return SmiCount(None, run.reason())
    text = run.stdout + "\n" + run.stderr
    if name == "rocm-smi":
        return parse_rocm_smi_json(run.stdout if extract_json(run.stdout) is not None else text)
    if name == "amd-smi":
        return parse_amd_smi_list_json(run.stdout if extract_json(run.stdout) is not None else text)
    if name == "rocminfo":
        return parse_rocminfo(text, run.returncode)
    raise ValueError(f"unknown AMD tool {name!r}")


TOOL_ARGV = {
    "rocm-smi": ["rocm-smi", "--showid", "--json"],
    "amd-smi": ["amd-smi", "list", "--json"],
    "rocminfo": ["rocminfo"],
}
PARTITION_ARGV = ["amd-smi", "partition", "--json"]
