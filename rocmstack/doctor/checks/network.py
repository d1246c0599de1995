"""Level 1 network preflight: RDMA devices and ports (sysfs), the verbs device nodes, ibv_devinfo, libibverbs and
its provider, the NCCL_* variables that name NICs, the locked-memory limit and /dev/shm."""

from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path

from rocmstack.doctor.model import Check, DoctorOptions, Result, failed, passed, skipped, warned
from rocmstack.platform import rdma
from rocmstack.platform.snapshot import Snapshot
from rocmstack.platform.tools import run_tool

SHM_FAIL = 256 << 20  # Docker's default is 64 MiB; NCCL's SHM transport needs far more for 8 GPUs
SHM_WARN = 1 << 30
STALE_WARN = 0.10  # files of dead processes holding a tenth of /dev/shm: RAM the next job does not get
# /dev/shm files that carry their creator's pid (pattern, base of the pid): a process killed before it let go
# leaves them, and they pile up until /dev/shm is full and the next job dies of SIGBUS at start-up
# (sgl-project/sglang#30591: torch_*, cuda.shm.*, 124k files on one runner).
SHM_PID_NAMES = (
    (re.compile(r"torch_(\d+)_\d+_\d+"), 10),  # torch: CPU tensors shared by file name, IPC ref counts
    (re.compile(r"cuda\.shm\.\d+\.([0-9a-f]+)\.\d+"), 16),  # CUDA driver, per IPC-exporting process
)
LIB_DIRS = ("usr/lib/x86_64-linux-gnu", "usr/lib64", "usr/lib", "lib/x86_64-linux-gnu", "lib64")


def _root(opts: DoctorOptions) -> Path:
    return opts.sysfs_root.parent  # / on a real node; the fixture root in tests


def net_rdma(snap: Snapshot, opts: DoctorOptions) -> Result:
    ports = rdma.ports(opts.sysfs_root)
    if not ports:
        return skipped(
            "no RDMA device under /sys/class/infiniband (collectives across nodes use TCP sockets)"
        )
    problems, details = [], []
    for p in ports:
        where = f"{p.device} port {p.number}"
        v2 = p.roce_v2_ipv4()
        details.append(
            f"{where}: {p.state}, {p.link_layer}, {p.rate}"
            + (
                f", RoCE v2 IPv4 GID(s) {', '.join(f'{g.index} ({g.ipv4})' for g in v2)}"
                if p.link_layer == "Ethernet"
                else ""
            )
        )
        if not p.active:
            problems.append(f"{where} is {p.state}, not ACTIVE")
        elif p.link_layer == "Ethernet" and not v2:
            problems.append(f"{where} (RoCE) has no RoCE v2 GID with an IPv4 address")
    if problems:
        return failed(
            problems[0],
            *problems[1:],
            *details,
            fix="Bring the link up (ibv_devinfo, ip link) and give the RoCE netdev an IPv4 address; NCCL/RCCL "
            "need a RoCE v2 GID that routes",
        )
    return passed(f"{len(ports)} RDMA port(s) active", *details)


def net_uverbs(snap: Snapshot, opts: DoctorOptions) -> Result:
    devs = rdma.devices(opts.sysfs_root)
    if not devs:
        return skipped("no RDMA device on this node")
    ib = opts.dev_root / "infiniband"
    nodes = sorted(ib.glob("uverbs*")) if ib.is_dir() else []
    fix = "Run the container with --device /dev/infiniband (and --ulimit memlock=-1, --cap-add IPC_LOCK)"
    if not nodes:
        return failed(
            f"{len(devs)} RDMA device(s) on the host but no {ib}/uverbs* in this container: NCCL/RCCL fall back "
            "to TCP sockets (or stall at init)",
            fix=fix,
        )
    bad = []
    for node in nodes:
        try:
            os.close(os.open(node, os.O_RDWR))
        except OSError as exc:
            bad.append(f"{node}: {exc.strerror}")
    if bad:
        return failed(f"{len(bad)} of {len(nodes)} verbs device node(s) cannot be opened", *bad, fix=fix)
    return passed(f"{len(nodes)} verbs device node(s) open read/write", *map(str, nodes))


def net_ibv_devinfo(snap: Snapshot, opts: DoctorOptions) -> Result:
    devs = rdma.devices(opts.sysfs_root)
    if not devs:
        return skipped("no RDMA device on this node")
    exe = shutil.which("ibv_devinfo", path=opts.environ().get("PATH"))
    if exe is None:
        return skipped("ibv_devinfo is not installed (apt install ibverbs-utils) ")
    run = run_tool([exe], timeout=opts.tool_timeout, env=opts.environ())
    return judge_ibv_devinfo(run.stdout + run.stderr, rdma.ports(opts.sysfs_root))


def judge_ibv_devinfo(text: str, ports: list[rdma.Port]) -> Result:
    seen = rdma.parse_ibv_devinfo(text)
    warnings = [line for line in text.splitlines() if line.startswith("libibverbs: Warning")]
    if not seen:
        return failed(
            f"ibv_devinfo sees no RDMA device while sysfs shows {len({p.device for p in ports})}",
            *warnings,
            fix="libibverbs in this image cannot drive the host NIC: install the provider for it (rdma-core "
            "matching the host's kernel driver ABI), or mount the host's RDMA userspace",
        )
    by_key = {(d.device, d.number): d for d in seen}
    problems = []
    for p in ports:
        d = by_key.get((p.device, p.number))
        if d is None:
            problems.append(f"{p.device} port {p.number}: in sysfs, not in ibv_devinfo")
        elif p.active != (d.state == "PORT_ACTIVE"):
            problems.append(f"{p.device} port {p.number}: sysfs {p.state}, ibv_devinfo {d.state}")
    if problems:
        return failed(
            problems[0], *problems[1:], *warnings, fix="Reload the NIC driver or match rdma-core to it"
        )
    return passed(f"ibv_devinfo agrees with sysfs on {len(ports)} port(s)")


def _lib_dirs(opts: DoctorOptions) -> list[Path]:
    root = _root(opts)
    extra = [p for p in opts.environ().get("LD_LIBRARY_PATH", "").split(":") if p]
    return [root / d for d in LIB_DIRS] + [Path(p) for p in extra]


def net_libibverbs(snap: Snapshot, opts: DoctorOptions) -> Result:
    devs = rdma.devices(opts.sysfs_root)
    if not devs:
        return skipped("no RDMA device on this node")
    dirs = _lib_dirs(opts)
    libs = [d / "libibverbs.so.1" for d in dirs if (d / "libibverbs.so.1").exists()]
    fix = "Install rdma-core userspace in the image (libibverbs1 ibverbs-providers on Debian/Ubuntu)"
    if not libs:
        return failed(
            "libibverbs.so.1 is not installed: NCCL/RCCL cannot use the RDMA NICs and fall back to TCP sockets",
            fix=fix,
        )
    missing, found = [], []
    for prov in sorted({rdma.provider_for(d) or d for d in devs}):
        hits = [p for d in dirs for p in (d / "libibverbs").glob(f"lib{prov}-rdmav*.so")]
        if hits:
            found.append(f"{prov}: {hits[0]}")
        else:
            missing.append(prov)
    if missing:
        return failed(
            f"no libibverbs provider for {', '.join(missing)} (devices: {', '.join(devs)})",
            f"libibverbs: {libs[0]}",
            fix=fix + "; for Broadcom bnxt_re and AMD Pollara (ionic) use the vendor's rdma-core build",
        )
    return passed(f"libibverbs and provider(s) present: {', '.join(found)}", f"libibverbs: {libs[0]}")


def _prefix_list(value: str) -> tuple[bool, bool, list[str]]:
    """NCCL's list syntax: '^' excludes, '=' matches exactly, else prefixes; ':port' after a device."""
    exclude = value.startswith("^")
    value = value.lstrip("^")
    exact = value.startswith("=")
    value = value.lstrip("=")
    return exclude, exact, [v.split(":")[0] for v in value.split(",") if v]


def net_nccl_env(snap: Snapshot, opts: DoctorOptions) -> Result:
    env = opts.environ()
    problems, details = [], []
    hca = env.get("NCCL_IB_HCA")
    devs = rdma.devices(opts.sysfs_root)
    if hca:
        exclude, exact, names = _prefix_list(hca)
        if not exclude:
            for name in names:
                hits = [d for d in devs if (d == name if exact else d.startswith(name))]
                if not hits:
                    problems.append(
                        f"NCCL_IB_HCA={hca}: {name!r} matches no RDMA device ({', '.join(devs) or 'none'})"
                    )
        details.append(f"NCCL_IB_HCA={hca}")
    ifname = env.get("NCCL_SOCKET_IFNAME")
    if ifname:
        try:
            nets = sorted(p.name for p in (opts.sysfs_root / "class" / "net").iterdir())
        except OSError:
            nets = []
        exclude, exact, names = _prefix_list(ifname)
        if not exclude:
            for name in names:
                if not any((n == name if exact else n.startswith(name)) for n in nets):
                    problems.append(
                        f"NCCL_SOCKET_IFNAME={ifname}: {name!r} matches no interface ({', '.join(nets)})"
                    )
        details.append(f"NCCL_SOCKET_IFNAME={ifname}")
    gid = env.get("NCCL_IB_GID_INDEX")
    if gid:
        details.append(f"NCCL_IB_GID_INDEX={gid}")
        if not re.fullmatch(r"-?\d+", gid):
            problems.append(f"NCCL_IB_GID_INDEX={gid} is not a number")
        elif int(gid) >= 0:
            for p in rdma.ports(opts.sysfs_root):
                if p.link_layer != "Ethernet":
                    continue
                entry = next((g for g in p.gids if g.index == int(gid)), None)
                if entry is None:
                    problems.append(f"{p.device} port {p.number} has no GID at index {gid}")
                elif entry.type != "RoCE v2":
                    v2 = [g.index for g in p.roce_v2_ipv4()]
                    problems.append(
                        f"{p.device} port {p.number} GID {gid} is {entry.type}, not RoCE v2 (RoCE v2 IPv4: {v2})"
                    )
    if not details:
        return skipped("NCCL_IB_HCA, NCCL_SOCKET_IFNAME and NCCL_IB_GID_INDEX are not set")
    if problems:
        return failed(
            problems[0],
            *problems[1:],
            fix="Name devices that exist here (ls /sys/class/infiniband /sys/class/net)",
        )
    return passed("the NCCL network variables name devices that exist", *details)


def memlock(snap: Snapshot, opts: DoctorOptions) -> Result:
    devs = rdma.devices(opts.sysfs_root)
    if not devs:
        return skipped("no RDMA device: the locked-memory limit does not matter")
    try:
        text = (opts.proc_root / "self" / "limits").read_text()
    except OSError as exc:
        return skipped(f"cannot read {opts.proc_root}/self/limits: {exc.strerror}")
    line = next((ln for ln in text.splitlines() if ln.startswith("Max locked memory")), "")
    soft = line.split()[3] if len(line.split()) > 3 else "?"
    if soft != "unlimited":
        return failed(
            f"locked-memory limit is {soft} bytes with RDMA devices present: memory registration fails or "
            "NCCL/RCCL hang at init",
            line,
            fix="Run the container with --ulimit memlock=-1 (or LimitMEMLOCK=infinity)",
        )
    return passed("locked-memory limit unlimited")


def _shm_size(opts: DoctorOptions, st: os.statvfs_result | None) -> int | None:
    try:
        mounts = (opts.proc_root / "mounts").read_text()
    except OSError:
        mounts = ""
    for line in reversed(mounts.splitlines()):  # the last mount on /dev/shm is the one in use
        parts = line.split()
        if len(parts) > 3 and parts[1] == "/dev/shm":
            m = re.search(r"size=(\d+)([kmg]?)", parts[3])
            if m:
                return int(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2)]
            break
    return None if st is None else st.f_blocks * st.f_frsize


def _statvfs(path: Path) -> os.statvfs_result | None:
    try:
        return os.statvfs(path)
    except OSError:
        return None


def _creator_pid(name: str) -> int | None:
    for pattern, base in SHM_PID_NAMES:
        m = pattern.fullmatch(name)
        if m is not None:
            return int(m.group(1), base)
    return None


def _process_runs(opts: DoctorOptions, pid: int) -> bool:
    """/proc/<n> also answers for a thread id n of another process: a process is one that leads its group."""
    try:
        status = (opts.proc_root / str(pid) / "status").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        return True  # there, but unreadable: assume it runs
    m = re.search(r"^Tgid:\s*(\d+)", status, re.M)
    return m is None or int(m.group(1)) == pid


def _stale_shm_files(opts: DoctorOptions) -> tuple[int, int]:
    """Regular files in /dev/shm that name a process not running here, and the RAM they hold."""
    count = held = 0
    try:
        entries = list((opts.dev_root / "shm").iterdir())
    except OSError:
        return 0, 0
    for path in entries:
        pid = _creator_pid(path.name)
        if pid is None or _process_runs(opts, pid):
            continue
        try:
            st = path.lstat()  # never follow a link: it would size (and blame) a file elsewhere
        except OSError:  # removed meanwhile
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        held += st.st_blocks * 512
        count += 1
    return count, held


def dev_shm(snap: Snapshot, opts: DoctorOptions) -> Result:
    st = _statvfs(opts.dev_root / "shm")
    size = _shm_size(opts, st)
    if size is None:
        return failed("/dev/shm is missing", fix="Mount a tmpfs at /dev/shm (docker run --shm-size 16g)")
    text = f"/dev/shm is {size / (1 << 20):.0f} MiB"
    fix = "Run the container with --shm-size 16g (or --ipc host)"
    if size < SHM_FAIL:
        return failed(
            f"{text}: NCCL/RCCL's SHM transport and Ray's object store fail with bus errors", fix=fix
        )
    if size < SHM_WARN:
        return warned(f"{text}: below 1 GiB", fix=fix)
    free = None if st is None else st.f_bavail * st.f_frsize
    if free is not None:
        text += f", {free / (1 << 20):.0f} MiB free"
    stale, held = _stale_shm_files(opts)
    if stale:
        amount = f"{held / (1 << 20):.0f} MiB" if held >= 1 << 20 else f"{held >> 10} KiB"
        text += f"; {stale} file(s) of processes not running here hold {amount}"
    clean = (
        "Remove what dead processes left: /dev/shm/torch_<pid>_* and cuda.shm.*.<pid in hex>.* where no "
        "such process runs (with --ipc host, on the host too), or restart the container"
    )
    if free is not None and free < SHM_FAIL:
        return failed(
            f"{text}: it is RAM, and NCCL/RCCL and Ray's object store need room in it",
            fix=clean,
            problem="user" if stale else "node",  # files a finished job left are its own
        )
    if (free is not None and free < SHM_WARN) or held >= size * STALE_WARN:
        return warned(text, fix=clean if stale else "Free /dev/shm (it is RAM) before the job starts")
    return passed(text)


CHECKS = (
    Check(
        "net-rdma",
        "network",
        "RDMA ports active, RoCE v2 IPv4 GID",
        net_rdma,
        "https://github.com/NVIDIA/nccl/issues/769",
    ),
    Check(
        "net-uverbs",
        "network",
        "/dev/infiniband/uverbs* in the container",
        net_uverbs,
        "https://github.com/ROCm/MAD/issues/228",
    ),
    Check(
        "net-ibv-devinfo",
        "network",
        "ibv_devinfo agrees with sysfs",
        net_ibv_devinfo,
        "https://github.com/ROCm/MAD/pull/191",
    ),
    Check(
        "net-libibverbs",
        "network",
        "libibverbs and the NIC's provider installed",
        net_libibverbs,
        "https://github.com/PrimeIntellect-ai/prime-rl/issues/1599",
    ),
    Check(
        "net-nccl-env",
        "network",
        "NCCL_IB_HCA / NCCL_SOCKET_IFNAME / NCCL_IB_GID_INDEX exist",
        net_nccl_env,
        "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html",
    ),
    Check(
        "memlock",
        "network",
        "Locked-memory limit with RDMA",
        memlock,
        "https://github.com/ROCm/MAD/issues/228",
    ),
    Check(
        "dev-shm",
        "network",
        "/dev/shm size, free space, files of dead processes",
        dev_shm,
        "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#sharing-data",
    ),
)
