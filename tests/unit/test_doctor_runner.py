"""run_doctor: the in-process API on this (GPU-less) machine, selection, and a crashing check."""

from __future__ import annotations

import os
import socket
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
    assert report["passed"]  # a CPU machine passes when it is expected to have no GPU


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
    assert not report["passed"]


def test_negative_expectation_is_input_error():
    with pytest.raises(InputError):
        run_doctor(DoctorOptions(expect_gpus=-1))


def test_a_run_that_judged_nothing_says_so_and_exits_5(tmp_path):
    import json
    import xml.etree.ElementTree as ET

    from tests.conftest import run_cli

    junit = tmp_path / "doctor.xml"
    result = run_cli("doctor", "--expect-gpus", "0", "--budget", "0.1s", "--json", "--junit", str(junit))
    assert result.code == 5, result.err  # not 0: a hook must not take it for a pass
    report = json.loads(result.out)
    total = len(report["checks"])
    assert report["verdict"] == f"NOTHING JUDGED: 0 of {total} checks judged ({total} over the budget)"
    assert report["passed"] is False and report["judged"] == 0
    # every case skipped reads as green to a CI: the run itself is one failing case
    (failure,) = ET.parse(junit).getroot().iter("failure")
    assert failure.get("type") == "nothing-judged" and failure.get("message") == report["verdict"]
    table = run_cli("doctor", "--expect-gpus", "0", "--budget", "0.1s")
    assert table.code == 5 and "NOTHING JUDGED: 0 of" in table.out


def test_only_checks_that_all_skip_judge_nothing(tmp_path):
    from rocmstack.doctor.runner import exit_code
    from rocmstack.errors import ExitCode

    # no RDMA device under this sysfs: the check skips on any machine
    report = run_doctor(DoctorOptions(fast=True, only=("net-ibv-devinfo",), sysfs_root=tmp_path))
    assert report["checks"][0]["status"] == "skip"
    assert report["verdict"] == "NOTHING JUDGED: 0 of 1 checks judged (1 skip)"
    assert (report["passed"], report["judged"], exit_code(report)) == (False, 0, ExitCode.NOTHING_JUDGED)


def test_a_run_that_judged_some_checks_stays_ready_or_not_ready():
    from rocmstack.doctor.runner import exit_code, verdict_line
    from rocmstack.errors import ExitCode

    report = run_doctor(DoctorOptions(fast=True, expect_gpus=0))
    assert report["passed"] and report["judged"] > 0 and report["verdict"].startswith("READY (")
    assert exit_code(report) == ExitCode.OK
    counts = {"pass": 0, "warn": 0, "fail": 1, "error": 0, "skip": 3}
    assert verdict_line(counts, ["gpu-count"], over=3) == "NOT READY: gpu-count (1 fail, 3 skip)"
    assert exit_code({"passed": False, "judged": 1}) == ExitCode.FAILED
    # a cluster report has no "judged": it is judged by "passed" alone
    assert exit_code({"passed": False, "mode": "cluster"}) == ExitCode.FAILED
    mixed = {"pass": 0, "warn": 0, "fail": 0, "error": 0, "skip": 5}
    assert (
        verdict_line(mixed, [], over=2) == "NOTHING JUDGED: 0 of 5 checks judged (2 over the budget, 3 skip)"
    )


def test_the_table_prints_nothing_judged_in_its_own_colour(tmp_path):
    from rich.console import Console

    from rocmstack.doctor.report import render_table

    report = run_doctor(DoctorOptions(fast=True, only=("net-ibv-devinfo",), sysfs_root=tmp_path))
    console = Console(record=True, width=120, force_terminal=True, color_system="standard")
    render_table(report, console)
    styled = console.export_text(styles=True)
    assert "\x1b[1;33mNOTHING JUDGED" in styled  # bold yellow: neither READY's green nor a failure's red


def test_a_history_file_swapped_for_a_fifo_mid_run_loses_the_line_not_the_verdict(tmp_path, capsys):
    # check_history_dir passed before the run; someone then put a FIFO where this node's file goes.
    from rocmstack.doctor.history import history_file

    os.mkfifo(history_file(tmp_path, socket.gethostname()))
    report = run_doctor(DoctorOptions(fast=True, only=("nofile-limit",), history_dir=tmp_path))
    assert report["verdict"].startswith(("READY", "NOT READY"))  # judged, as without --history
    assert "not a regular file" in report["history"]["error"]
    assert "not a regular file" in capsys.readouterr().err
