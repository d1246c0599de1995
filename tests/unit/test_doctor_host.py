"""Host settings and GPU error counters: kernel logs and amd-smi output quoted from public issues
(tests/fixtures/doctor/SOURCES.md), /proc and sysfs files in the kernel's own formats."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot

from rocmstack.doctor.checks import host
from rocmstack.doctor.model import DoctorOptions
from rocmstack.status import Status

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "doctor"
THIS_CMDLINE = "mitigations=auto console=ttyS0 quiet reboot=k panic=1"  # this machine's /proc/cmdline, cut


def opts(root: Path, **kw) -> DoctorOptions:
    return DoctorOptions(
        sysfs_root=root / "sys",
        proc_root=root / "proc",
        dev_root=root / "dev",
        env=kw.pop("env", {"PATH": ""}),
    )


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_numa_balancing(tmp_path):
    write(tmp_path / "proc/sys/kernel/numa_balancing", "1\n")
    assert host.numa_balancing(make_snapshot(), opts(tmp_path)).status == Status.WARN
    write(tmp_path / "proc/sys/kernel/numa_balancing", "0\n")  # this machine's value
    assert host.numa_balancing(make_snapshot(), opts(tmp_path)).status == Status.PASS


def test_iommu_pt_on_amd(tmp_path):
    amd = make_snapshot(kfd_archs=(90402,), amd_render=1)
    write(tmp_path / "proc/cmdline", THIS_CMDLINE + "\n")
    result = host.iommu_pt(amd, opts(tmp_path))
    assert result.status == Status.WARN and "iommu=pt" in result.fix
    write(tmp_path / "proc/cmdline", THIS_CMDLINE + " amd_iommu=on iommu=pt\n")
    assert host.iommu_pt(amd, opts(tmp_path)).status == Status.PASS
    assert host.iommu_pt(make_snapshot(), opts(tmp_path)).status == Status.SKIP


def pci(root: Path, addr: str, cls: str, vendor: str, cur: str, mx: str, cw: str, mw: str) -> Path:
    d = root / "sys/bus/pci" / "devices" / addr
    for name, value in (
        ("class", cls),
        ("vendor", vendor),
        ("current_link_speed", cur),
        ("max_link_speed", mx),
        ("current_link_width", cw),
        ("max_link_width", mw),
    ):
        write(d / name, value + "\n")
    return d


def test_pcie_link_downtrained_gpu_and_nic(tmp_path):
    pci(tmp_path, "0000:05:00.0", "0x120000", "0x1002", "32.0 GT/s PCIe", "32.0 GT/s PCIe", "16", "16")
    assert host.pcie_link(make_snapshot(), opts(tmp_path)).status == Status.PASS
    pci(tmp_path, "0000:25:00.0", "0x120000", "0x1002", "16.0 GT/s PCIe", "32.0 GT/s PCIe", "16", "16")
    nic = pci(tmp_path, "0000:0c:00.0", "0x020000", "0x15b3", "32.0 GT/s PCIe", "32.0 GT/s PCIe", "8", "16")
    (tmp_path / "sys/class/infiniband/mlx5_0").mkdir(parents=True)
    (tmp_path / "sys/class/infiniband/mlx5_0/device").symlink_to(nic)
    result = host.pcie_link(make_snapshot(), opts(tmp_path))
    assert result.status == Status.WARN
    assert result.summary == "NIC 0000:0c:00.0 runs at 32.0 GT/s PCIe x8, below its 32.0 GT/s PCIe x16"
    assert "GPU 0000:25:00.0 runs at 16.0 GT/s PCIe x16" in result.details[0]


def test_pcie_ignores_other_devices(tmp_path):
    pci(tmp_path, "0000:00:1f.0", "0x060100", "0x8086", "2.5 GT/s PCIe", "8.0 GT/s PCIe", "1", "4")
    assert host.pcie_link(make_snapshot(), opts(tmp_path)).status == Status.SKIP


def test_numactl(tmp_path):
    for n in (0, 1):
        (tmp_path / f"sys/devices/system/node/node{n}").mkdir(parents=True)
    assert host.numactl(make_snapshot(), opts(tmp_path)).status == Status.WARN
    bin_dir = tmp_path / "bin"
    write(bin_dir / "numactl", "#!/bin/sh\n")
    (bin_dir / "numactl").chmod(0o755)
    assert host.numactl(make_snapshot(), opts(tmp_path, env={"PATH": str(bin_dir)})).status == Status.PASS


def test_amd_smi_ecc_counts():
    text = (FIX / "tools/amd-smi-metric-k-umc-excerpt.txt").read_text()
    assert host.parse_amd_smi_ecc(text) == (2, 0)
    result = host.judge_ecc("amd", text)
    assert result.status == Status.WARN and result.summary == "2 correctable ECC error(s)"
    bad = text.replace("UNCORRECTABLE_COUNT: 0", "UNCORRECTABLE_COUNT: 1")
    assert host.judge_ecc("amd", bad).status == Status.FAIL


@pytest.mark.parametrize(
    "csv,status",
    [
        ("0, 0, 0\n1, 0, 0\n", Status.PASS),
        ("0, 3, 0\n", Status.WARN),
        ("0, 0, 2\n", Status.FAIL),
        ("0, [N/A], [N/A]\n", Status.PASS),
    ],
)
def test_nvidia_ecc(csv, status):
    assert host.judge_ecc("nvidia", csv).status == status


def test_kernel_log_amdgpu_ring_timeout():
    result = host.judge_kernel_log((FIX / "kernel/dmesg-rocm-6273-ring-timeout.txt").read_text())
    assert result.status == Status.FAIL and result.summary == "2 GPU fault line(s) in the kernel log"
    assert result.details[0].startswith("amdgpu ring timeout: [127033.279661]")
    assert result.details[1].startswith("amdgpu GPU reset:")


def test_kernel_log_xid():
    result = host.judge_kernel_log((FIX / "kernel/dmesg-nvidia-1151-xid79.txt").read_text())
    assert result.status == Status.FAIL and result.details == (
        "NVIDIA Xid 79 (GPU has fallen off the bus): NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus.",
    )


def test_kernel_log_an_applications_own_xid_is_no_node_fault():
    # Xid 45 (a process's channel cleaned up, https://github.com/leptonai/gpud/pull/117): NVIDIA's catalog
    # has the application restarted; the node stays in service
    log = (
        "[Sat Oct 12 18:35:32 2024] NVRM: Xid (PCI:0000:61:00): 45, pid=1496200, name=distprovers-gpu, "
        "Ch 0000000a\n"
    )
    assert host.judge_kernel_log(log).status == Status.PASS
    both = log + (FIX / "kernel/dmesg-nvidia-1151-xid79.txt").read_text()
    assert [d.split(":")[0] for d in host.judge_kernel_log(both).details] == [
        "NVIDIA Xid 79 (GPU has fallen off the bus)"
    ]


def test_kernel_log_and_the_ras_events_read_xid_lines_alike():
    """kernel-faults (dmesg) and gpu-ras-events (/dev/kmsg) judge each Xid line of the verbatim kmsg fixtures
    the same way: one reading of NVIDIA's catalog, recovery actions included (an Xid 154 whose new action is
    none names no fault; the dmesg check took any 154 for one)."""
    from rocmstack.doctor.kmsg import gpu_events, read_kmsg

    kmsg = FIX / "kmsg"
    for fixture in sorted(kmsg.glob("*.kmsg")):
        records = read_kmsg(fixture)
        xid_lines = [r.text for r in records if "NVRM: Xid" in r.text]
        from_dmesg = [
            d.split(": NVRM: ")[0].removeprefix("NVIDIA ") for d in host.find_faults("\n".join(xid_lines))
        ]
        assert from_dmesg == [e.what for e in gpu_events(records) if e.what.startswith("Xid")], fixture.name
    # the format of nvidia-xid-62-154.kmsg's verbatim line, with the action going back to none
    none = "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)"
    assert host.judge_kernel_log(none).status == Status.PASS


def test_kernel_log_clean():
    assert host.judge_kernel_log("[    0.000000] Linux version 6.1.0\n").status == Status.PASS
