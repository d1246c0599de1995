"""Level 1 host settings (NUMA balancing, iommu=pt, PCIe link speed/width, numactl) and GPU error counters
(ECC/RAS from amd-smi or nvidia-smi, known fault lines in the kernel log where it is readable)."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

from rocmstack.doctor.kmsg import node_xid
from rocmstack.doctor.model import Check, DoctorOptions, Result, failed, passed, skipped, warned
from rocmstack.platform.snapshot import Snapshot
from rocmstack.platform.tools import run_tool

GPU_VENDORS = {"0x1002", "0x10de"}
GPU_CLASSES = ("0x0300", "0x0302", "0x0380", "0x1200")  # display, 3D, other display, processing accelerator
NIC_CLASSES = ("0x0200", "0x0207")  # Ethernet, InfiniBand
KERNEL_FAULTS = (
    (re.compile(r"amdgpu.*\bring \S+ timeout"), "amdgpu ring timeout"),
    (re.compile(r"amdgpu.*GPU reset begin"), "amdgpu GPU reset"),
    (re.compile(r"amdgpu.*(uncorrectable|poison)", re.IGNORECASE), "amdgpu RAS uncorrectable/poison"),
)  # NVIDIA's Xid lines: kmsg.node_xid


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def numa_balancing(snap: Snapshot, opts: DoctorOptions) -> Result:
    value = _read(opts.proc_root / "sys" / "kernel" / "numa_balancing")
    if value is None:
        return skipped("no /proc/sys/kernel/numa_balancing (kernel without NUMA balancing)")
    if value != "0":
        return warned(
            f"automatic NUMA balancing is on ({value}): it migrates pages under GPU jobs and costs throughput",
            fix="sysctl kernel.numa_balancing=0 (on the host)",
        )
    return passed("automatic NUMA balancing is off")


def iommu_pt(snap: Snapshot, opts: DoctorOptions) -> Result:
    if snap.vendor() != "amd":
        return skipped("no AMD GPU: iommu=pt is an AMD Instinct recommendation")
    cmdline = _read(opts.proc_root / "cmdline") or ""
    if "iommu=pt" not in cmdline.split():
        return warned(
            "iommu=pt is not on the kernel command line: RCCL warns and peer-to-peer traffic may hang",
            f"cmdline: {cmdline[:300]}",
            fix="Add iommu=pt (amd_iommu=on iommu=pt) to GRUB_CMDLINE_LINUX and reboot the host",
        )
    return passed("iommu=pt on the kernel command line")


def _pci_devices(opts: DoctorOptions) -> list[tuple[str, str, Path]]:
    """(kind, address, sysfs dir) of every AMD/NVIDIA GPU and every RDMA NIC."""
    out = []
    base = opts.sysfs_root / "bus" / "pci" / "devices"
    try:
        entries = sorted(base.iterdir())
    except OSError:
        return []
    rdma_parents = set()
    try:
        for dev in (opts.sysfs_root / "class" / "infiniband").iterdir():
            rdma_parents.add((dev / "device").resolve().name)
    except OSError:
        pass
    for d in entries:
        cls = (_read(d / "class") or "")[:6]
        vendor = _read(d / "vendor") or ""
        if cls in GPU_CLASSES and vendor in GPU_VENDORS:
            out.append(("GPU", d.name, d))
        elif cls in NIC_CLASSES and d.name in rdma_parents:
            out.append(("NIC", d.name, d))
    return out


def pcie_link(snap: Snapshot, opts: DoctorOptions) -> Result:
    devices = _pci_devices(opts)
    if not devices:
        return skipped("no AMD/NVIDIA GPU or RDMA NIC on the PCI bus here")
    slow, details = [], []
    for kind, addr, d in devices:
        cur_s, max_s = _read(d / "current_link_speed"), _read(d / "max_link_speed")
        cur_w, max_w = _read(d / "current_link_width"), _read(d / "max_link_width")
        if None in (cur_s, max_s, cur_w, max_w):
            details.append(f"{kind} {addr}: link attributes not exposed")
            continue
        details.append(f"{kind} {addr}: {cur_s} x{cur_w} (max {max_s} x{max_w})")
        if _link_speed(cur_s) < _link_speed(max_s) or int(cur_w or 0) < int(max_w or 0):
            slow.append(f"{kind} {addr} runs at {cur_s} x{cur_w}, below its {max_s} x{max_w}")
    if slow:
        return warned(
            slow[0],
            *slow[1:],
            *details,
            fix="Reseat the card or riser, check the BIOS PCIe settings; an idle GPU may train down, so re-check "
            "under load",
        )
    return passed(f"{len(devices)} device(s) at full PCIe speed and width", *details)


def numactl(snap: Snapshot, opts: DoctorOptions) -> Result:
    try:
        nodes = list((opts.sysfs_root / "devices" / "system" / "node").glob("node[0-9]*"))
    except OSError:
        nodes = []
    if len(nodes) < 2:
        return skipped(f"{len(nodes) or 'no'} NUMA node(s): no binding to do")
    if shutil.which("numactl", path=opts.environ().get("PATH")) is None:
        return warned(
            f"{len(nodes)} NUMA nodes and no numactl: engines that bind workers to the GPU's NUMA node "
            "(SGLang --enable-numa-bind, vLLM) cannot",
            fix="Install numactl in the image (apt install numactl)",
        )
    return passed(f"numactl present for {len(nodes)} NUMA nodes")


def parse_amd_smi_ecc(text: str) -> tuple[int, int]:
    """(correctable, uncorrectable) summed over every block of `amd-smi metric -k` text output."""
    ce = sum(int(m) for m in re.findall(r"^\s*CORRECTABLE_COUNT:\s*(\d+)", text, re.MULTILINE))
    ue = sum(int(m) for m in re.findall(r"^\s*UNCORRECTABLE_COUNT:\s*(\d+)", text, re.MULTILINE))
    return ce, ue


def parse_nvidia_ecc(text: str) -> list[tuple[str, int | None, int | None]]:
    """`nvidia-smi --query-gpu=index,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total
    --format=csv,noheader,nounits` -> (index, corrected, uncorrected); None for "[N/A]" (ECC off)."""
    out = []
    for line in text.splitlines():
        cols = [c.strip() for c in line.split(",")]
        if len(cols) != 3:
            continue
        out.append((cols[0], _int_or_none(cols[1]), _int_or_none(cols[2])))
    return out


def judge_ecc(vendor: str, text: str) -> Result:
    if vendor == "amd":
        ce, ue = parse_amd_smi_ecc(text)
        per = [f"correctable {ce}, uncorrectable {ue} (all GPUs, all blocks)"]
        counters = [{"gpu": "all", "correctable": ce, "uncorrectable": ue}]
    else:
        rows = parse_nvidia_ecc(text)
        if not rows:
            return skipped("nvidia-smi gave no ECC counters")
        ce = sum(r[1] or 0 for r in rows)
        ue = sum(r[2] or 0 for r in rows)
        per = [f"GPU {i}: corrected {c}, uncorrected {u}" for i, c, u in rows]
        counters = [{"gpu": i, "correctable": c, "uncorrectable": u} for i, c, u in rows if c is not None]
    fix = "Drain the node and have the GPU checked (RMA if uncorrectable errors recur); see the RAS/bad-page log"
    if ue:
        result = failed(f"{ue} uncorrectable ECC error(s)", *per, fix=fix)
    elif ce:
        result = warned(f"{ce} correctable ECC error(s)", *per, fix=fix)
    else:
        result = passed("no ECC errors", *per)
    return dataclasses.replace(result, data={"ecc": counters})


# The ECC counters each vendor's tool prints (amd-smi's "metric -k" block; nvidia-smi's volatile totals per GPU)
ECC_ARGV = {
    "amd": ("amd-smi", "metric", "-k"),
    "nvidia": (
        "nvidia-smi",
        "--query-gpu=index,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total",
        "--format=csv,noheader,nounits",
    ),
}


def ecc_output(vendor: str, opts: DoctorOptions) -> str | Result:
    """The vendor tool's ECC output, or the skip that says why there is none."""
    argv = ECC_ARGV.get(vendor)
    if argv is None:
        return skipped("no GPU: no ECC counters")
    exe = shutil.which(argv[0], path=opts.environ().get("PATH"))
    if exe is None:
        return skipped(f"{argv[0]} is not installed")
    run = run_tool([exe, *argv[1:]], timeout=opts.tool_timeout, env=opts.environ())
    if run.returncode != 0:
        return skipped(f"{argv[0]} failed: {(run.stderr or run.stdout).strip()[:200]}")
    return run.stdout


def gpu_ecc(snap: Snapshot, opts: DoctorOptions) -> Result:
    vendor = snap.vendor()
    out = ecc_output(vendor, opts)
    return out if isinstance(out, Result) else judge_ecc(vendor, out)


def find_faults(text: str) -> list[str]:
    hits = []
    for line in text.splitlines():
        if "NVRM: Xid" in line:
            # an application's own Xid (13, 31, 43, 94, ...: NVIDIA's catalog) leaves the node sound
            if xid := node_xid(line):
                hits.append(f"NVIDIA {xid[1]}: {line.strip()[:200]}")
            continue
        for pattern, label in KERNEL_FAULTS:
            if pattern.search(line):
                hits.append(f"{label}: {line.strip()[:200]}")
                break
    return hits


def kernel_faults(snap: Snapshot, opts: DoctorOptions) -> Result:
    exe = shutil.which("dmesg", path=opts.environ().get("PATH"))
    if exe is None:
        return skipped("dmesg is not installed")
    run = run_tool([exe], timeout=opts.tool_timeout, env=opts.environ())
    if run.returncode != 0:
        return skipped(
            f"the kernel log is not readable here ({(run.stderr or '').strip()[:120] or 'dmesg failed'})"
        )
    return judge_kernel_log(run.stdout)


def judge_kernel_log(text: str) -> Result:
    hits = find_faults(text)
    if hits:
        return failed(
            f"{len(hits)} GPU fault line(s) in the kernel log",
            *hits[:20],
            fix="Read the full log (dmesg -T); ring timeouts, resets, Xid 48/79/94/95 and RAS uncorrectable "
            "errors mean the GPU or node needs attention before a long job",
        )
    return passed("no known GPU fault pattern in the kernel log")


ROCM_TUNING = "https://rocm.docs.amd.com/en/latest/how-to/system-optimization/mi300x.html"
CHECKS = (
    Check("host-numa-balancing", "host", "Automatic NUMA balancing off", numa_balancing, ROCM_TUNING),
    Check("host-iommu", "host", "iommu=pt on AMD", iommu_pt, ROCM_TUNING),
    Check(
        "host-pcie-link",
        "host",
        "GPU and NIC PCIe links at full speed/width",
        pcie_link,
        "https://www.kernel.org/doc/Documentation/ABI/testing/sysfs-bus-pci",
    ),
    Check(
        "host-numactl",
        "host",
        "numactl for NUMA binding",
        numactl,
        "https://docs.sglang.ai/advanced_features/server_arguments.html",
    ),
    Check(
        "gpu-ecc",
        "host",
        "ECC/RAS error counters",
        gpu_ecc,
        "https://github.com/ROCm/device-metrics-exporter/pull/368",
        frozenset({"tools"}),
    ),
    Check(
        "kernel-gpu-faults",
        "host",
        "No GPU fault lines in the kernel log",
        kernel_faults,
        "https://docs.nvidia.com/deploy/xid-errors/index.html",
    ),
)


def _link_speed(text: str | None) -> float:
    """GT/s of a sysfs link speed (``16.0 GT/s PCIe``); 0 when unreadable."""
    first = text.split()[0] if text else ""
    return float(first) if first.replace(".", "").isdigit() else 0.0


def _int_or_none(text: str) -> int | None:
    return int(text) if text.isdigit() else None
