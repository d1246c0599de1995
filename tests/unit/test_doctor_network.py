"""Network preflight against sysfs trees and tool outputs quoted from public issues (tests/fixtures/doctor/
SOURCES.md): show_gids (NVIDIA/nccl#1131) becomes the GID table, ibv_devinfo blocks (deepseek-ai/DeepEP#38,
#60) the port states, libibverbs' own warnings (ofiwg/libfabric#975) the provider-less case."""

from __future__ import annotations

import dataclasses
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot

from rocmstack.doctor.checks import network
from rocmstack.doctor.model import DoctorOptions
from rocmstack.platform import rdma
from rocmstack.status import Status

RDMA = Path(__file__).resolve().parents[1] / "fixtures" / "doctor" / "rdma"
SNAP = make_snapshot()
TYPES = {"v1": "IB/RoCE v1", "v2": "RoCE v2"}  # what the kernel writes to gid_attrs/types/N


def sysfs_from_show_gids(root: Path, state: str = "4: ACTIVE", link: str = "Ethernet") -> Path:
    """A /sys tree holding exactly the GIDs show_gids printed (show_gids reads these very files)."""
    sys_root = root / "sys"
    for line in (RDMA / "show_gids-nccl-1131.txt").read_text().splitlines():
        cols = line.split()
        if len(cols) < 6 or not cols[0].startswith("mlx5"):
            continue
        dev, port, index, gid = cols[:4]
        ver, ndev = cols[-2], cols[-1]
        pdir = sys_root / "class" / "infiniband" / dev / "ports" / port
        for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
            (pdir / sub).mkdir(parents=True, exist_ok=True)
        (pdir / "gids" / index).write_text(gid + "\n")
        (pdir / "gid_attrs" / "types" / index).write_text(TYPES[ver] + "\n")
        (pdir / "gid_attrs" / "ndevs" / index).write_text(ndev + "\n")
        (pdir / "state").write_text(state + "\n")
        (pdir / "link_layer").write_text(link + "\n")
        (pdir / "rate").write_text("200 Gb/sec (4X HDR)\n")
        (sys_root / "class" / "net" / ndev).mkdir(parents=True, exist_ok=True)
    return sys_root


def opts(sys_root: Path, **kw) -> DoctorOptions:
    root = sys_root.parent
    return DoctorOptions(
        sysfs_root=sys_root, dev_root=root / "dev", proc_root=root / "proc", env=kw.pop("env", {}), **kw
    )


def test_gid_table_parsed_from_show_gids(tmp_path):
    ports = rdma.ports(sysfs_from_show_gids(tmp_path))
    assert [(p.device, p.number) for p in ports] == [("mlx5_0", 1), ("mlx5_1", 1)]
    v2 = ports[0].roce_v2_ipv4()
    assert [(g.index, g.ipv4, g.ndev) for g in v2] == [(3, "11.0.0.72", "ens3np0")]


def test_net_rdma_active_with_roce_v2(tmp_path):
    result = network.net_rdma(SNAP, opts(sysfs_from_show_gids(tmp_path)))
    assert result.status == Status.PASS and "RoCE v2 IPv4 GID(s) 3 (11.0.0.72)" in result.details[0]


def test_net_rdma_port_down(tmp_path):
    result = network.net_rdma(SNAP, opts(sysfs_from_show_gids(tmp_path, state="1: DOWN")))
    assert result.status == Status.FAIL and "mlx5_0 port 1 is 1: DOWN" in result.summary


def test_net_rdma_without_ipv4_roce_v2_gid(tmp_path):
    sys_root = sysfs_from_show_gids(tmp_path)
    for dev in ("mlx5_0", "mlx5_1"):
        (sys_root / f"class/infiniband/{dev}/ports/1/gids/3").write_text(rdma.ZERO_GID + "\n")
    result = network.net_rdma(SNAP, opts(sys_root))
    assert result.status == Status.FAIL and "no RoCE v2 GID with an IPv4" in result.summary


def test_no_rdma_skips_everything(tmp_path):
    o = opts(tmp_path / "sys")
    for fn in (
        network.net_rdma,
        network.net_uverbs,
        network.net_libibverbs,
        network.memlock,
        network.net_ibv_devinfo,
    ):
        assert fn(SNAP, o).status == Status.SKIP


def test_uverbs_missing_in_container(tmp_path):
    result = network.net_uverbs(SNAP, opts(sysfs_from_show_gids(tmp_path)))
    assert result.status == Status.FAIL and "--device /dev/infiniband" in result.fix


def test_uverbs_present_and_openable(tmp_path):
    o = opts(sysfs_from_show_gids(tmp_path))
    (o.dev_root / "infiniband").mkdir(parents=True)
    for i in range(2):
        (o.dev_root / "infiniband" / f"uverbs{i}").write_text("")
    assert network.net_uverbs(SNAP, o).status == Status.PASS


def test_ibv_devinfo_agrees(tmp_path):
    text = (RDMA / "ibv_devinfo-deepep-38-mlx5_2.txt").read_text()
    port = rdma.Port("mlx5_2", 1, "4: ACTIVE", "Ethernet", "?")
    assert network.judge_ibv_devinfo(text, [port]).status == Status.PASS
    down = dataclasses.replace(port, state="1: DOWN")
    assert network.judge_ibv_devinfo(text, [down]).status == Status.FAIL


def test_ibv_devinfo_port_down_parsed():
    seen = rdma.parse_ibv_devinfo((RDMA / "ibv_devinfo-deepep-60-mlx5_12-down.txt").read_text())
    assert seen == [rdma.DevinfoPort("mlx5_12", 1, "PORT_DOWN", "Ethernet")]


def test_ibv_devinfo_sees_nothing_while_sysfs_does():
    text = (RDMA / "libibverbs-no-provider-libfabric-975.txt").read_text()
    result = network.judge_ibv_devinfo(text, [rdma.Port("bnxt_re0", 1, "4: ACTIVE", "Ethernet", "?")])
    assert result.status == Status.FAIL and "no RDMA device while sysfs shows 1" in result.summary
    assert result.details[0].startswith("libibverbs: Warning: no userspace device-specific driver")


def test_libibverbs_and_provider(tmp_path):
    o = opts(sysfs_from_show_gids(tmp_path))
    lib = tmp_path / "usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True)
    assert "libibverbs.so.1 is not installed" in network.net_libibverbs(SNAP, o).summary
    (lib / "libibverbs.so.1").write_text("")
    result = network.net_libibverbs(SNAP, o)
    assert result.status == Status.FAIL and "no libibverbs provider for mlx5" in result.summary
    (lib / "libibverbs").mkdir()
    (lib / "libibverbs" / "libmlx5-rdmav34.so").write_text("")
    assert network.net_libibverbs(SNAP, o).status == Status.PASS


@pytest.mark.parametrize(
    "env,status,text",
    [
        ({"NCCL_IB_HCA": "mlx5_0,mlx5_1"}, Status.PASS, ""),
        ({"NCCL_IB_HCA": "mlx5"}, Status.PASS, ""),
        ({"NCCL_IB_HCA": "=mlx5"}, Status.FAIL, "'mlx5' matches no RDMA device"),
        ({"NCCL_IB_HCA": "bnxt_re0:1"}, Status.FAIL, "'bnxt_re0' matches no RDMA device"),
        ({"NCCL_IB_HCA": "^bnxt_re0"}, Status.PASS, ""),
        ({"NCCL_SOCKET_IFNAME": "ens"}, Status.PASS, ""),
        ({"NCCL_SOCKET_IFNAME": "eth0"}, Status.FAIL, "'eth0' matches no interface"),
        ({"NCCL_IB_GID_INDEX": "3"}, Status.PASS, ""),
        ({"NCCL_IB_GID_INDEX": "2"}, Status.FAIL, "GID 2 is IB/RoCE v1, not RoCE v2"),
        ({"NCCL_IB_GID_INDEX": "7"}, Status.FAIL, "has no GID at index 7"),
        ({}, Status.SKIP, ""),
    ],
)
def test_nccl_env_names_things_that_exist(tmp_path, env, status, text):
    result = network.net_nccl_env(SNAP, opts(sysfs_from_show_gids(tmp_path), env=env))
    assert result.status == status and text in result.summary


def limits(tmp_path: Path, soft: str) -> None:
    (tmp_path / "proc/self").mkdir(parents=True, exist_ok=True)
    (tmp_path / "proc/self/limits").write_text(
        "Limit                     Soft Limit           Hard Limit           Units     \n"
        f"Max locked memory         {soft}              {soft}              bytes     \n"
    )


def test_memlock_must_be_unlimited_with_rdma(tmp_path):
    o = opts(sysfs_from_show_gids(tmp_path))
    limits(tmp_path, "8388608")  # this machine's own /proc/self/limits value (recorded here)
    result = network.memlock(SNAP, o)
    assert result.status == Status.FAIL and "--ulimit memlock=-1" in result.fix
    limits(tmp_path, "unlimited")
    assert network.memlock(SNAP, o).status == Status.PASS


def test_dev_shm_the_last_mount_counts(tmp_path):
    """Two tmpfs mounted on /dev/shm, as recorded on an H200 host (the later one, 256 GiB, is in use)."""
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/mounts").write_text(
        "tmpfs /dev/shm tmpfs rw,relatime,size=263998500k 0 0\n"
        "tmpfs /dev/shm tmpfs rw,relatime,size=268435456k 0 0\n"
    )
    assert network.dev_shm(SNAP, opts(tmp_path / "sys")).summary.startswith("/dev/shm is 262144 MiB")


@pytest.mark.parametrize(
    "line,status",
    [
        ("tmpfs /dev/shm tmpfs rw,relatime,size=24684092k 0 0", Status.PASS),  # recorded here
        ("shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0", Status.FAIL),  # Docker default
        ("shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=524288k 0 0", Status.WARN),
    ],
)
def test_dev_shm(tmp_path, line, status):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/mounts").write_text(f"proc /proc proc rw 0 0\n{line}\n")
    assert network.dev_shm(SNAP, opts(tmp_path / "sys")).status == status


def _shm_mount(tmp_path: Path, size: str = "1126400k") -> DoctorOptions:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/mounts").write_text(f"tmpfs /dev/shm tmpfs rw,relatime,size={size} 0 0\n")
    (tmp_path / "dev/shm").mkdir(parents=True)
    return opts(tmp_path / "sys")


def test_dev_shm_names_what_dead_processes_left(tmp_path):
    """A /dev/shm file naming a process that is gone is RAM nobody frees (a holder killed before it let go).
    Names as torch and the CUDA driver write them (seen on an H200 host: a process of pid 7307 that exported
    one CUDA IPC handle left cuda.shm.0.1c8b.1, 80 KiB, after a normal exit)."""
    o = _shm_mount(tmp_path)
    shm = o.dev_root / "shm"
    (shm / "torch_4242_1520728233_0").write_bytes(b"\1" * (120 << 20))  # process 4242 is not running
    (shm / "torch_77_3930081117_0").write_bytes(b"\1" * (8 << 20))
    (o.proc_root / "77").mkdir()  # process 77 is: its file is in use
    (o.proc_root / "77/status").write_text("Name:\tpython3\nTgid:\t77\nPid:\t77\n")
    (shm / "torch_78_1_0").write_bytes(b"\1" * 4096)  # /proc/78 is a thread of 77, not a process 78
    (o.proc_root / "78").mkdir()
    (o.proc_root / "78/status").write_text("Name:\tpython3\nTgid:\t77\nPid:\t78\n")
    (shm / "cuda.shm.0.1c8b.1").write_bytes(b"\1" * 81920)  # the CUDA driver's, of process 0x1c8b = 7307
    (shm / "cuda.shm.0.4d.1").write_bytes(b"\1" * 81920)  # of process 0x4d = 77: running
    (shm / "psm_1f2e3d4c").write_bytes(b"\1" * (8 << 20))  # no pid in the name: not judged
    result = network.dev_shm(SNAP, o)
    assert result.status == Status.WARN, result.summary
    assert "3 file(s) of processes not running here hold 120 MiB" in result.summary
    assert "/dev/shm/torch_<pid>_*" in result.fix
    (shm / "torch_4242_1520728233_0").unlink()
    result = network.dev_shm(SNAP, o)
    assert (
        result.status == Status.PASS
        and "2 file(s) of processes not running here hold 84 KiB" in result.summary
    )


def test_dev_shm_counts_only_regular_files_never_what_a_link_points_at(tmp_path):
    """Anyone can put a link in /dev/shm: named like a dead process's file and pointing at a big file
    elsewhere (or at a folder, a FIFO), it must not be sized, counted or reported."""
    o = _shm_mount(tmp_path)
    shm = o.dev_root / "shm"
    big = tmp_path / "elsewhere.bin"
    big.write_bytes(b"\1" * (64 << 20))
    (shm / "torch_4242_1_0").symlink_to(big)  # process 4242 is not running
    (shm / "torch_4243_1_0").symlink_to(tmp_path)
    (shm / "cuda.shm.0.1c8b.1").symlink_to(tmp_path / "gone")  # dangling
    os.mkfifo(shm / "torch_4244_1_0")
    (shm / "torch_4245_1_0").write_bytes(b"\1" * 81920)  # the one real file of a dead process
    result = network.dev_shm(SNAP, o)
    assert result.status == Status.PASS, result.summary
    assert "1 file(s) of processes not running here hold 80 KiB" in result.summary


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs")
@pytest.mark.parametrize("fill_mib,status", [(16, Status.PASS), (200, Status.WARN), (900, Status.FAIL)])
def test_dev_shm_free_space_on_a_real_tmpfs(tmp_path, fill_mib, status):
    """1100 MiB of tmpfs: 1 GiB free or less warns, less than 256 MiB fails (it is RAM, and full)."""
    o = _shm_mount(tmp_path)
    shm = o.dev_root / "shm"
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1100m", "tmpfs", str(shm)], capture_output=True, text=True
    )
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mount.stderr.strip()}")
    try:
        (shm / "data").write_bytes(b"\1" * (fill_mib << 20))
        result = network.dev_shm(SNAP, o)
        assert result.status == status, result.summary
        assert f"{1100 - fill_mib} MiB free" in result.summary
        if status == Status.FAIL:  # nobody's leftover fills it: the node's tmpfs is too small for the job
            assert result.problem == "node"
            # the same room taken by what a process that is gone left: the finished job's, not the node's
            (shm / "data").rename(shm / "torch_4242_1520728233_0")
            result = network.dev_shm(SNAP, o)
            assert result.status == Status.FAIL and result.problem == "user", result.summary
    finally:
        subprocess.run(["umount", str(shm)], check=True)


def test_uverbs_not_openable(tmp_path):
    o = opts(sysfs_from_show_gids(tmp_path))
    (o.dev_root / "infiniband").mkdir(parents=True)
    node = o.dev_root / "infiniband" / "uverbs0"
    if os.geteuid() == 0:
        # Root opens any file: a real verbs character device (major 231) whose driver is not loaded here
        # fails for root too (ENXIO), as it does in a container that lists the node without the module.
        os.mknod(node, stat.S_IFCHR | 0o600, os.makedev(231, 192))
    else:
        node.write_text("")
        node.chmod(0)
    assert network.net_uverbs(SNAP, o).status == Status.FAIL
