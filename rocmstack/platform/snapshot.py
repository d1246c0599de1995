"""One snapshot of a node: every GPU source counted separately, the environment, the Python packages.

Tools and probes start together and run in parallel (each with its own time limit), the cheap sysfs and
/dev reads happen while they run. Nothing here judges anything: rocmstack.doctor.checks does.
"""

from __future__ import annotations

import resource
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocmstack.platform import cuda, rocm
from rocmstack.platform.masks import MaskView, mask_view
from rocmstack.platform.tools import Pending, ProbeResult, ToolRun, finish_probe, start_probe, start_tool
from rocmstack.signals import stops_deferred

HEAVY_PROBES = ("torch", "ray", "vllm", "loads")  # --fast skips these: they import torch, ray or vLLM
TOOLS = {**rocm.TOOL_ARGV, "nvidia-smi": cuda.NVIDIA_SMI_ARGV, "amd-smi-partition": rocm.PARTITION_ARGV}


@dataclass(frozen=True)
class SnapshotRequest:
    """What to collect. ``probes``/``tools``: names wanted by the selected checks."""

    probes: frozenset[str]
    tools: frozenset[str]
    fast: bool
    python: str
    env: Mapping[str, str]
    probe_timeout: float
    tool_timeout: float
    sysfs_root: Path
    dev_root: Path
    proc_root: Path


@dataclass(frozen=True)
class Snapshot:
    env: Mapping[str, str]
    kfd: list[rocm.KfdNode] | None
    render: list[rocm.RenderNode]
    amd_render: list[rocm.RenderNode]
    partitions_sysfs: dict[str, str]
    nvidia_proc: list[str] | None
    nvidia_dev: list[Path]
    tools: dict[str, ToolRun]
    probes: dict[str, ProbeResult]
    not_run: dict[str, str]  # probe or tool name -> why it was not run
    nofile: tuple[int, int]
    dev_root: Path
    timings: dict[str, float] = field(default_factory=dict)
    active: dict = field(
        default_factory=dict
    )  # level-2 probe results (rocmstack.doctor.collect.active), else empty

    # -- plain accessors used by the checks ---------------------------------------------------------------
    def probe(self, name: str) -> dict | None:
        result = self.probes.get(name)
        return result.data if result is not None else None

    @property
    def site(self) -> dict:
        return self.probe("site") or {}

    @property
    def dists(self) -> dict[str, str]:
        return dict(self.site.get("dists") or {})

    def module(self, name: str) -> str | None:
        return (self.site.get("modules") or {}).get(name)

    @property
    def python_version(self) -> str:
        return str(self.site.get("python") or ".".join(map(str, sys.version_info[:3])))

    def vendor(self) -> str:
        """amd, nvidia or none: which GPU family this node has, from driver-level evidence only."""
        if self.kfd or self.amd_render:
            return "amd"
        if self.nvidia_proc or self.nvidia_dev:
            return "nvidia"
        for name in ("amd-smi", "rocm-smi", "rocminfo"):
            count = self.amd_tool_count(name)
            if count.count:
                return "amd"
        if self.nvidia_smi_count().count:
            return "nvidia"
        return "none"

    def rocm_env(self) -> bool:
        """Is this Python environment a ROCm one (whatever hardware is present)?"""
        torch_version = self.dists.get("torch", "")
        return (
            "+rocm" in torch_version
            or bool(self.module("rocm_sdk") or self.module("_rocm_sdk_core"))
            or bool((self.probe("torch") or {}).get("hip"))
            or self.vendor() == "amd"
        )

    def amd_tool_count(self, name: str) -> rocm.SmiCount:
        run = self.tools.get(name)
        if run is None:
            return rocm.SmiCount(None, self.not_run.get(name, "not run"))
        return rocm.count_from_tool(name, run)

    def nvidia_smi_count(self) -> rocm.SmiCount:
        run = self.tools.get("nvidia-smi")
        if run is None:
            return rocm.SmiCount(None, self.not_run.get("nvidia-smi", "not run"))
        return cuda.count_from_nvidia_smi(run)

    def sources(self) -> list[GpuSource]:
        return gpu_sources(self)

    def physical_count(self) -> int:
        """The largest count any physical source reports (disagreement is the gpu-count check's business)."""
        counts = [s.count for s in self.sources() if s.scope == "physical" and s.count is not None]
        return max(counts, default=0)

    def masks(self) -> MaskView:
        return mask_view(self.vendor(), self.physical_count(), self.env)


@dataclass(frozen=True)
class GpuSource:
    """One independent count. ``scope``: physical (ignores masks), rocr (after ROCR_VISIBLE_DEVICES only)
    or visible (after every mask: what a job in this environment gets)."""

    name: str
    vendor: str
    scope: str
    count: int | None
    detail: str

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "vendor": self.vendor,
            "scope": self.scope,
            "count": self.count,
            "detail": self.detail,
        }


def _probe_source(
    snap: Snapshot,
    probe: str,
    name: str,
    vendor: str,
    scope: str,
    count_of: Callable[[dict], tuple[int | None, str]],
) -> GpuSource:
    result = snap.probes.get(probe)
    if result is None:
        return GpuSource(name, vendor, scope, None, snap.not_run.get(probe, "not run"))
    if result.data is None:
        return GpuSource(name, vendor, scope, None, result.reason())
    count, detail = count_of(result.data)
    return GpuSource(name, vendor, scope, count, detail)


def _amdsmi_count(data: dict) -> tuple[int | None, str]:
    if "import_error" in data:
        return None, f"import amdsmi: {data['import_error']}"
    if "init_error" in data:
        return None, f"amdsmi_init: {data['init_error']}"
    return data.get("count"), "amdsmi_get_processor_handles()"


def _nvml_count(data: dict) -> tuple[int | None, str]:
    if "import_error" in data:
        return None, f"import pynvml: {data['import_error']}"
    if "init_error" in data:
        return None, f"nvmlInit: {data['init_error']}"
    return data.get("count"), f"NVML, driver {data.get('driver', '?')}"


def _torch_count(data: dict) -> tuple[int | None, str]:
    if "import_error" in data:
        return None, f"import torch: {data['import_error']}"
    if "device_error" in data:
        return None, data["device_error"]
    flavour = (
        f"HIP {data['hip']}" if data.get("hip") else (f"CUDA {data['cuda']}" if data.get("cuda") else "CPU")
    )
    return data.get("count"), f"torch {data.get('version')} ({flavour}) device_count()"


def _ray_count(data: dict) -> tuple[int | None, str]:
    if "import_error" in data:
        return None, f"import ray: {data['import_error']}"
    for key in ("manager_error", "resolved_error", "visible_error"):
        if key in data:
            return 0, f"Ray {data.get('version')}: {data[key]}"
    detected = data.get("detected")
    return data.get("resolved_gpus"), (
        f"Ray {data.get('version')} {data.get('manager')}: detected {detected}, "
        f"visible ids {data.get('visible_ids')}"
    )


def gpu_sources(snap: Snapshot) -> list[GpuSource]:
    sources: list[GpuSource] = []
    vendor = snap.vendor()
    want_amd = vendor in ("amd", "none")
    want_nvidia = vendor in ("nvidia", "none")
    if want_amd:
        sources.append(
            GpuSource(
                "kfd",
                "amd",
                "physical",
                None if snap.kfd is None else len(snap.kfd),
                "no /sys/class/kfd (amdgpu driver not loaded here)"
                if snap.kfd is None
                else "KFD topology nodes with a gfx_target_version: "
                + (", ".join(n.arch for n in snap.kfd) or "none"),
            )
        )
        sources.append(
            GpuSource(
                "dri",
                "amd",
                "physical",
                len(snap.amd_render),
                f"/dev/dri render nodes of vendor 0x1002 ({len(snap.render)} render nodes in all)",
            )
        )
        sources.append(_probe_source(snap, "amdsmi", "amdsmi", "amd", "physical", _amdsmi_count))
        for name in ("amd-smi", "rocm-smi"):
            c = snap.amd_tool_count(name)
            sources.append(
                GpuSource(name, "amd", "physical", c.count, c.reason or " ".join(rocm.TOOL_ARGV[name]))
            )
        c = snap.amd_tool_count("rocminfo")
        sources.append(GpuSource("rocminfo", "amd", "rocr", c.count, c.reason or "GPU agents (Name: gfx...)"))
    if want_nvidia:
        sources.append(
            GpuSource(
                "nvidia-proc",
                "nvidia",
                "physical",
                None if snap.nvidia_proc is None else len(snap.nvidia_proc),
                "no /proc/driver/nvidia/gpus" if snap.nvidia_proc is None else "/proc/driver/nvidia/gpus/*",
            )
        )
        sources.append(
            GpuSource("nvidia-dev", "nvidia", "physical", len(snap.nvidia_dev), "/dev/nvidia<N> nodes")
        )
        sources.append(_probe_source(snap, "nvml", "nvml", "nvidia", "physical", _nvml_count))
        c = snap.nvidia_smi_count()
        sources.append(
            GpuSource("nvidia-smi", "nvidia", "physical", c.count, c.reason or "nvidia-smi --query-gpu")
        )
    sources.append(_probe_source(snap, "torch", "torch", vendor, "visible", _torch_count))
    sources.append(_probe_source(snap, "ray", "ray", vendor, "visible", _ray_count))
    return sources


def _vendors(
    kfd: Any, amd_render: Any, nvidia_proc: Any, nvidia_dev: Any, dev_root: Path
) -> tuple[bool, bool]:
    """(AMD, NVIDIA): driver-level evidence of a GPU of that vendor; it decides which probes start."""
    return bool(kfd) or bool(amd_render) or (dev_root / "kfd").exists(), bool(nvidia_proc) or bool(nvidia_dev)


def gpu_hardware(sysfs_root: Path, dev_root: Path, proc_root: Path) -> tuple[bool, bool]:
    """``_vendors`` read from the roots, before a snapshot (--budget reads this)."""
    render = rocm.render_nodes(dev_root, sysfs_root)
    return _vendors(
        rocm.kfd_gpu_nodes(sysfs_root),
        [n for n in render if n.vendor == rocm.AMD_VENDOR_ID],
        cuda.proc_driver_gpus(proc_root),
        cuda.dev_nvidia_nodes(dev_root),
        dev_root,
    )


def not_started(name: str, *, fast: bool, amd_hw: bool, nvidia_hw: bool) -> str | None:
    """Why a snapshot does not start this probe or tool here, or None when it does (--budget reads this)."""
    if fast and name in HEAVY_PROBES:
        return "skipped by --fast (imports torch or ray)"
    if name == "nvml" and not nvidia_hw:
        return "no NVIDIA driver on this node"
    if name == "amd-smi-partition" and not amd_hw:
        return "no AMD GPU on this node"
    return None


def take_snapshot(req: SnapshotRequest) -> Snapshot:
    env = dict(req.env)
    pending_probes: dict[str, Pending] = {}
    pending_tools: dict[str, Pending] = {}

    # Cheap evidence first: it decides which probes are worth a process.
    kfd = rocm.kfd_gpu_nodes(req.sysfs_root)
    render = rocm.render_nodes(req.dev_root, req.sysfs_root)
    amd_render = [n for n in render if n.vendor == rocm.AMD_VENDOR_ID]
    nvidia_proc = cuda.proc_driver_gpus(req.proc_root)
    nvidia_dev = cuda.dev_nvidia_nodes(req.dev_root)

    try:
        return _gather(
            req, env, kfd, render, amd_render, nvidia_proc, nvidia_dev, pending_probes, pending_tools
        )
    except BaseException:
        # Ctrl-C: the probes and tools run in sessions of their own and would run on for their whole limit.
        for pending in (*pending_probes.values(), *pending_tools.values()):
            pending.stop()
        raise


def _gather(
    req: SnapshotRequest,
    env: dict[str, str],
    kfd: Any,
    render: Any,
    amd_render: Any,
    nvidia_proc: Any,
    nvidia_dev: Any,
    pending_probes: dict[str, Pending],
    pending_tools: dict[str, Pending],
) -> Snapshot:
    timings: dict[str, float] = {}
    not_run: dict[str, str] = {}
    amd_hw, nvidia_hw = _vendors(kfd, amd_render, nvidia_proc, nvidia_dev, req.dev_root)
    # Everything starts at once; a probe whose library is missing answers "not installed" in milliseconds.
    with stops_deferred():  # every process started here is in the dicts take_snapshot stops on Ctrl-C
        for name in sorted(req.probes | {"site"}):
            if why := not_started(name, fast=req.fast, amd_hw=amd_hw, nvidia_hw=nvidia_hw):
                not_run[name] = why
                continue
            pending_probes[name] = start_probe(name, python=req.python, timeout=req.probe_timeout, env=env)
        for name in sorted(req.tools):
            if why := not_started(name, fast=req.fast, amd_hw=amd_hw, nvidia_hw=nvidia_hw):
                not_run[name] = why
                continue
            pending_tools[name] = start_tool(list(TOOLS[name]), timeout=req.tool_timeout, env=env)

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    partitions = rocm.compute_partitions(req.sysfs_root)

    probes = {}
    for name, pending in pending_probes.items():
        probes[name] = finish_probe(name, pending)
        timings[name] = probes[name].run.seconds
    tools = {}
    for name, pending in pending_tools.items():
        tools[name] = pending.result()
        if tools[name].missing:
            not_run[name] = tools[name].reason()
            del tools[name]
        else:
            timings[name] = tools[name].seconds
    return Snapshot(
        env=env,
        kfd=kfd,
        render=render,
        amd_render=amd_render,
        partitions_sysfs=partitions,
        nvidia_proc=nvidia_proc,
        nvidia_dev=nvidia_dev,
        tools=tools,
        probes=probes,
        not_run=not_run,
        nofile=(int(soft), int(hard)),
        dev_root=req.dev_root,
        timings=timings,
    )
