"""device-access and nofile-limit."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot

from rocmstack.doctor.checks.system import device_access, nofile_limit
from rocmstack.doctor.model import DoctorOptions
from rocmstack.status import Status

OPTS = DoctorOptions()


def amd_dev(tmp_path, kfd=True):
    (tmp_path / "dri").mkdir()
    (tmp_path / "dri/renderD128").write_text("")
    if kfd:
        (tmp_path / "kfd").write_text("")
    return make_snapshot(kfd_archs=(90402,), amd_render=1, dev_root=tmp_path)


def test_amd_nodes_usable(tmp_path):
    assert device_access(amd_dev(tmp_path), OPTS).status == Status.PASS


def test_kfd_not_passed(tmp_path):
    result = device_access(amd_dev(tmp_path, kfd=False), OPTS)
    assert result.status == Status.FAIL and "--device /dev/kfd" in result.fix


@pytest.mark.skipif(os.geteuid() == 0, reason="root opens any device node")
def test_no_permission_names_the_group(tmp_path):
    snap = amd_dev(tmp_path)
    (tmp_path / "kfd").chmod(0o000)
    result = device_access(snap, OPTS)
    assert result.status == Status.FAIL and "kfd" in result.summary


def test_nvidia_nodes(tmp_path):
    (tmp_path / "nvidiactl").write_text("")
    (tmp_path / "nvidia0").write_text("")
    assert device_access(make_snapshot(nvidia=1, dev_root=tmp_path), OPTS).status == Status.PASS
    (tmp_path / "nvidiactl").unlink()
    assert device_access(make_snapshot(nvidia=1, dev_root=tmp_path), OPTS).status == Status.FAIL


def test_no_gpu_skips():
    assert device_access(make_snapshot(), OPTS).status == Status.SKIP


@pytest.mark.parametrize(
    "limits,status",
    [
        ((1024, 1024), Status.FAIL),
        ((20000, 20000), Status.WARN),
        ((1024, 1048576), Status.PASS),
        ((1048576, 1048576), Status.PASS),
    ],
)
def test_nofile(limits, status):
    assert nofile_limit(make_snapshot(nofile=limits), OPTS).status == status
