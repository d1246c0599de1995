"""The JIT cache checks on real files: a lock of a process that really exited, a /proc/mounts NFS line, a
Triton cache really compiled for gfx942 (Triton's HIP backend compiles on any machine) and an AITER-style
module whose clang offload bundle carries that gfx942 code object."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import HERE, make_snapshot

from rocmstack.doctor.checks.caches import (
    Folder,
    cache_arch,
    cache_folders,
    cache_location,
    cache_locks,
    cached_archs,
    module_archs,
    mount_of,
)
from rocmstack.doctor.model import DoctorOptions
from rocmstack.status import Status

MI300X, MI355X = 90402, 90500  # KFD gfx_target_version of gfx942 and gfx950
NFS_LINE = (HERE / "mounts" / "nfs4-linuxkit-2251.line").read_text().strip()
LOCAL_LINE = "overlay / overlay rw,relatime,lowerdir=/l,upperdir=/u,workdir=/w 0 0"


def opts(tmp_path: Path, env: dict, mounts: str = LOCAL_LINE + "\n") -> DoctorOptions:
    proc = tmp_path / "proc"
    proc.mkdir(exist_ok=True)
    (proc / "mounts").write_text(mounts)
    # /proc/<pid>/status of the real processes, so a pid is judged as on this machine
    (proc / str(os.getpid())).mkdir(exist_ok=True)
    (proc / str(os.getpid()) / "status").write_text(Path("/proc/self/status").read_text())
    return DoctorOptions(env={"HOME": str(tmp_path / "home"), **env}, proc_root=proc)


def exited_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# -- where the folders are ------------------------------------------------------------------------------


def test_folders_follow_the_variables_and_the_defaults(tmp_path):
    snap = make_snapshot(site={"modules": {"aiter": None, "triton": "/site/triton"}})
    got = cache_folders(snap, opts(tmp_path, {}))
    assert got == [Folder("triton", tmp_path / "home/.triton/cache", "Triton's default")]
    got = cache_folders(snap, opts(tmp_path, {"TRITON_HOME": str(tmp_path / "th")}))
    assert got[0].path == tmp_path / "th/.triton/cache"
    env = {"AITER_JIT_DIR": str(tmp_path / "a"), "TRITON_CACHE_DIR": str(tmp_path / "t")}
    got = cache_folders(make_snapshot(), opts(tmp_path, env))
    assert [(f.cache, f.path) for f in got] == [("aiter", tmp_path / "a"), ("triton", tmp_path / "t")]


def test_aiter_uses_its_package_folder_when_writable_else_home(tmp_path):
    pkg = tmp_path / "site/aiter"
    (pkg / "jit").mkdir(parents=True)
    snap = make_snapshot(site={"modules": {"aiter": str(pkg)}})
    assert cache_folders(snap, opts(tmp_path, {}))[0].path == pkg / "jit"
    # a package folder this process cannot write (here: one it cannot even find) sends aiter to ~/.aiter/jit
    snap = make_snapshot(site={"modules": {"aiter": str(tmp_path / "elsewhere/aiter")}})
    assert cache_folders(snap, opts(tmp_path, {}))[0].path == tmp_path / "home/.aiter/jit"


# -- writable and local -------------------------------------------------------------------------------


def test_cache_on_an_nfs_mount_fails(tmp_path):
    share = tmp_path / "shared"
    (share / "triton").mkdir(parents=True)
    source, _point, rest = NFS_LINE.split(" ", 2)
    mounts = f"{LOCAL_LINE}\n{source} {share} {rest}\n"
    result = cache_location(
        make_snapshot(), opts(tmp_path, {"TRITON_CACHE_DIR": str(share / "triton")}, mounts)
    )
    assert result.status == Status.FAIL
    assert "nfs4" in result.summary and str(share) in result.summary
    assert "TRITON_CACHE_DIR" in (result.fix or "")


def test_local_writable_cache_passes_and_a_folder_not_made_yet_is_judged_by_its_parent(tmp_path):
    env = {"AITER_JIT_DIR": str(tmp_path / "not/made/yet")}
    result = cache_location(make_snapshot(), opts(tmp_path, env))
    assert result.status == Status.PASS, result
    assert "overlay" in result.details[0]


def test_mount_of_takes_the_longest_mount_point_and_unescapes(tmp_path):
    text = "a / ext4 rw 0 0\nb /mnt/my\\040disk xfs rw 0 0\nc /mnt nfs rw 0 0\n"
    assert mount_of(Path("/mnt/my disk/x"), text) == ("/mnt/my disk", "xfs", "b")
    assert mount_of(Path("/mnt/other"), text) == ("/mnt", "nfs", "c")
    assert mount_of(Path("/usr"), text) == ("/", "ext4", "a")


def test_unwritable_cache_fails(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        # root passes file modes; procfs refuses it a new folder all the same
        target = ro if not os.access(ro, os.W_OK) else Path("/proc/1/rocmstack-jit")
        if os.access(target.parent, os.W_OK):
            pytest.skip("no folder here that this user cannot write")
        result = cache_location(make_snapshot(), opts(tmp_path, {"AITER_JIT_DIR": str(target)}))
        assert result.status == Status.FAIL and "not writable" in result.summary
    finally:
        ro.chmod(0o755)


# -- locks ---------------------------------------------------------------------------------------------


def _aiter_dir(tmp_path: Path) -> Path:
    jit = tmp_path / "jit"
    (jit / "build").mkdir(parents=True)
    return jit


def test_lock_of_a_dead_pid_fails(tmp_path):
    jit = _aiter_dir(tmp_path)
    pid = exited_pid()
    # aiter's FileBaton stamps "<pid>\n<host>\n" (aiter/jit/utils/file_baton.py try_acquire)
    (jit / "build/lock_module_moe_asm").write_text(f"{pid}\n{socket.gethostname()}\n")
    result = cache_locks(make_snapshot(), opts(tmp_path, {"AITER_JIT_DIR": str(jit)}))
    assert result.status == Status.FAIL
    assert f"pid {pid}" in result.summary and "lock_module_moe_asm" in result.summary
    assert "Remove" in (result.fix or "")


def test_lock_of_a_running_build_passes(tmp_path):
    jit = _aiter_dir(tmp_path)
    (jit / "build/lock_module_moe_asm").write_text(f"{os.getpid()}\n{socket.gethostname()}\n")
    result = cache_locks(make_snapshot(), opts(tmp_path, {"AITER_JIT_DIR": str(jit)}))
    assert result.status == Status.PASS and "1 held by a running build" in result.summary


def test_lock_from_another_host_or_an_old_empty_lock_warns(tmp_path):
    jit = _aiter_dir(tmp_path)
    (jit / "build/lock_module_aiter_enum").write_text("4242\nnode-07\n")
    result = cache_locks(make_snapshot(), opts(tmp_path, {"AITER_JIT_DIR": str(jit)}))
    assert result.status == Status.WARN and "node-07" in result.summary
    (jit / "build/lock_module_aiter_enum").unlink()
    old = jit / "build/lock_module_rmsnorm"  # torch's FileBaton: an empty file
    old.write_text("")
    os.utime(old, (1, 1))
    result = cache_locks(make_snapshot(), opts(tmp_path, {"AITER_JIT_DIR": str(jit)}))
    assert result.status == Status.WARN and "no owner recorded" in result.summary


# -- archs ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gfx942_triton_cache(tmp_path_factory):
    """A Triton cache filled by a real compile of one of the engine's kernels for gfx942."""
    pytest.importorskip("triton")
    from rocmstack.gpu import kernels
    from rocmstack.gpu.shapes import BUILTIN_SHAPES, shape_from_config

    folder = tmp_path_factory.mktemp("triton-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_CACHE_DIR", str(folder))
        mp.setenv("TRITON_DEFAULT_FP_FUSION", "1")
        shape = shape_from_config(BUILTIN_SHAPES["qwen3-0.6b"])
        launch = next(
            launch for launch in kernels.decode_launches(shape, 1, "bf16", 304) if "silu" in launch.name
        )
        compiled = kernels.compile_launch(launch, "hip", "gfx942", 64)
    return folder, compiled.asm["hsaco"]


def offload_bundle(entries: dict[str, bytes]) -> bytes:
    """A clang offload bundle (clang's OffloadBundler format: magic, count, then offset/size/id per entry)."""
    magic = b"__CLANG_OFFLOAD_BUNDLE__"
    ids = [i.encode() for i in entries]
    header = len(magic) + 8 + sum(24 + len(i) for i in ids)
    out, blobs, offset = bytearray(magic + struct.pack("<Q", len(ids))), b"", header
    for ident, blob in zip(ids, entries.values(), strict=True):
        out += struct.pack("<QQQ", offset, len(blob), len(ident)) + ident
        blobs += blob
        offset += len(blob)
    return bytes(out) + blobs


def test_triton_cache_compiled_for_gfx942_fails_on_gfx950(tmp_path, gfx942_triton_cache):
    folder, _ = gfx942_triton_cache
    assert cached_archs(Folder("triton", folder, "")) == {"gfx942": 1}
    o = opts(tmp_path, {"TRITON_CACHE_DIR": str(folder)})
    result = cache_arch(make_snapshot(kfd_archs=(MI355X,)), o)
    assert result.status == Status.FAIL
    assert "gfx942 only" in result.summary and "gfx950" in result.summary
    assert cache_arch(make_snapshot(kfd_archs=(MI300X,)), o).status == Status.PASS


def test_aiter_module_built_for_gfx942_fails_on_gfx950(tmp_path, gfx942_triton_cache):
    _, hsaco = gfx942_triton_cache
    jit = _aiter_dir(tmp_path)
    device = {"host-x86_64-unknown-linux-gnu-": b"", "hipv4-amdgcn-amd-amdhsa--gfx942": hsaco}
    # an ELF .so keeps the bundle in its .hip_fatbin section; the section's bytes are the bundle itself
    (jit / "module_moe_asm.so").write_bytes(b"\x7fELF" + b"\0" * 60 + offload_bundle(device))
    assert module_archs(jit / "module_moe_asm.so") == {"gfx942"}
    o = opts(tmp_path, {"AITER_JIT_DIR": str(jit)})
    assert cache_arch(make_snapshot(kfd_archs=(MI355X,)), o).status == Status.FAIL
    both = {**device, "hipv4-amdgcn-amd-amdhsa--gfx950": hsaco}
    (jit / "module_moe_asm.so").write_bytes(b"\x7fELF" + b"\0" * 60 + offload_bundle(both))
    assert cache_arch(make_snapshot(kfd_archs=(MI355X,)), o).status == Status.PASS


def test_empty_cache_or_no_amd_gpu(tmp_path):
    o = opts(tmp_path, {"AITER_JIT_DIR": str(_aiter_dir(tmp_path))})
    assert cache_arch(make_snapshot(kfd_archs=(MI355X,)), o).status == Status.PASS
    assert cache_arch(make_snapshot(), o).status == Status.SKIP
