"""Device nodes the process can open (and the groups that grant them), and the open-file limit."""

from __future__ import annotations

import grp
import os
from pathlib import Path

from rocmstack.doctor.model import Check, DoctorOptions, Result, failed, passed, skipped, warned
from rocmstack.platform.snapshot import Snapshot

RAY_NOFILE = 65536  # ray.init raises the soft limit to min(hard, 65536); KubeRay uses 65536 too
RAY_NOFILE_WARN = 4096  # Ray warns below this


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def _denied(path: Path) -> str | None:
    """None when this process can read and write ``path``; else why not, naming the group that grants it."""
    if os.access(path, os.R_OK | os.W_OK):
        return None
    try:
        st = path.stat()
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    groups = set(os.getgroups()) | {os.getegid()}
    name = _group_name(st.st_gid)
    if st.st_gid not in groups:
        return f"{path} (group {name}, mode {oct(st.st_mode & 0o777)}): this user is not in group {name}"
    return f"{path} (group {name}, mode {oct(st.st_mode & 0o777)}): no read/write permission"


def device_access(snap: Snapshot, opts: DoctorOptions) -> Result:
    vendor = snap.vendor()
    dev = snap.dev_root
    problems: list[str] = []
    checked: list[str] = []
    if vendor == "amd":
        kfd = dev / "kfd"
        if not kfd.exists():
            problems.append(f"{kfd} is missing although the node has AMD GPUs")
        else:
            checked.append(str(kfd))
            if why := _denied(kfd):
                problems.append(why)
        if not snap.amd_render:
            problems.append(f"no AMD render node under {dev / 'dri'}")
        for node in snap.amd_render:
            checked.append(str(node.path))
            if why := _denied(node.path):
                problems.append(why)
        fix = (
            "Run the container with --device /dev/kfd --device /dev/dri --group-add video --group-add render"
        )
    elif vendor == "nvidia":
        for path in [dev / "nvidiactl", *snap.nvidia_dev]:
            if not path.exists():
                problems.append(f"{path} is missing")
                continue
            checked.append(str(path))
            if why := _denied(path):
                problems.append(why)
        fix = "Run the container with --gpus all (NVIDIA Container Toolkit)"
    else:
        return skipped("no GPU device nodes on this node")
    if problems:
        return failed(problems[0], *problems[1:], fix=fix)
    return passed(f"{len(checked)} device node(s) readable and writable", *checked)


def nofile_limit(snap: Snapshot, opts: DoctorOptions) -> Result:
    soft, hard = snap.nofile
    fix = "Raise it: docker/podman run --ulimit nofile=1048576:1048576 (or LimitNOFILE= for a systemd unit)"
    text = f"open-file limit soft={soft} hard={hard}"
    if hard < RAY_NOFILE_WARN:
        return failed(
            f"{text}: Ray cannot raise the soft limit to {RAY_NOFILE_WARN} and large jobs run out of "
            "file descriptors",
            fix=fix,
        )
    if hard < RAY_NOFILE:
        return warned(
            f"{text}: below the {RAY_NOFILE} Ray aims for; many actors or nodes will hit it", fix=fix
        )
    if soft < RAY_NOFILE:
        return passed(f"{text}: ray.init raises the soft limit to {RAY_NOFILE}")
    return passed(text)


CHECKS = (
    Check(
        "device-access",
        "system",
        "/dev/kfd, /dev/dri (or /dev/nvidia*) usable",
        device_access,
        "https://rocm.docs.amd.com/projects/install-on-linux/en/latest/how-to/docker.html",
        frozenset({"tools"}),
    ),
    Check(
        "nofile-limit",
        "system",
        "Open-file limit for Ray",
        nofile_limit,
        "https://docs.ray.io/en/latest/cluster/vms/user-guides/large-cluster-best-practices.html",
    ),
)
