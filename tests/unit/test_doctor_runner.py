"""run_doctor: the in-process API on this (GPU-less) machine, selection, and a crashing check."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocmstack.doctor import DoctorOptions, run_doctor, select_checks
from rocmstack.doctor.checks import ALL_CHECKS
from rocmstack.errors import InputError

ROOT = Path(__file__).resolve().parents[2]


def test_ids_are_unique_kebab_and_sourced():
    ids = [c.id for c in ALL_CHECKS]
    assert len(ids) == len(set(ids))
    for c in ALL_CHECKS:
        assert c.id == c.id.lower() and " " not in c.id and c.source.startswith("https://")


def test_select():
    assert [c.id for c in select_checks(("ray-env",))] == ["ray-env"]
    assert "ray-env" not in [c.id for c in select_checks((), ("ray-env",))]
    with pytest.raises(InputError, match="unknown check id 'nope'"):
        select_checks(("nope",))
    with pytest.raises(InputError, match="no check"):
        select_checks((), tuple(c.id for c in ALL_CHECKS))


def test_fast_skips_torch_and_ray_probes():
    report = run_doctor(DoctorOptions(fast=True, expect_gpus=0))
    assert report["not_run"]["torch"].startswith("skipped by --fast")
    assert report["not_run"]["ray"].startswith("skipped by --fast")
    assert "torch" not in report["timings"] and "ray" not in report["timings"]
    assert report["ok"]  # a CPU machine passes when it is expected to have no GPU


def test_platform_names_each_gpus_arch_from_the_kfd_topology(tmp_path):
    # The gfx_target_version line of an MI300X KFD node (ROCm/rocm-cli#343), twice, plus a CPU node.
    line = (ROOT / "tests/fixtures/doctor/tools/kfd-mi300x-gfx_target_version.line").read_text()
    nodes = tmp_path / "class/kfd/kfd/topology/nodes"
    for i, text in enumerate(("gfx_target_version 0\n", line, line)):
        (nodes / str(i)).mkdir(parents=True)
        (nodes / str(i) / "properties").write_text(text)
    report = run_doctor(DoctorOptions(fast=True, only=("ray-env",), sysfs_root=tmp_path))
    assert report["platform"]["gpu_archs"] == ["gfx942"]
    assert run_doctor(DoctorOptions(fast=True, only=("ray-env",)))["platform"]["gpu_archs"] == []


def test_full_run_uses_real_torch_and_ray():
    report = run_doctor(DoctorOptions(only=("gpu-count", "ray-gpus")))
    sources = {s["name"]: s for s in report["sources"]}
    assert sources["torch"]["count"] == 0 and "torch" in sources["torch"]["detail"]
    assert sources["ray"]["count"] == 0 and "Ray 2." in sources["ray"]["detail"]


def test_a_crashing_check_is_an_error_not_a_crash(monkeypatch):
    from rocmstack.doctor.model import Check

    def boom(snap, opts):
        raise ZeroDivisionError("bug")

    patched = [Check("nofile-limit", "system", "t", boom, "https://x")] + [
        c for c in ALL_CHECKS if c.id != "nofile-limit"
    ]
    monkeypatch.setattr("rocmstack.doctor.runner.ALL_CHECKS", tuple(patched))
    monkeypatch.setattr("rocmstack.doctor.runner.BY_ID", {c.id: c for c in patched})
    report = run_doctor(DoctorOptions(fast=True, only=("nofile-limit",)))
    assert report["checks"][0]["status"] == "error"
    assert "ZeroDivisionError: bug" in report["checks"][0]["summary"]
    assert not report["ok"]


def test_negative_expectation_is_input_error():
    with pytest.raises(InputError):
        run_doctor(DoctorOptions(expect_gpus=-1))
