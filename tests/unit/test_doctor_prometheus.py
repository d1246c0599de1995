"""--prometheus: the textfile format, Prometheus names, escaping, atomic replacement, bad paths."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from rocmstack.doctor.prometheus import check_textfile_path, render, write_textfile
from rocmstack.errors import InputError
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "docs/evidence/doctor-levels-h200x2-2026-11-30/level2-healthy.json"


def _report(**extra) -> dict:
    return {
        "host": 'node"1\\',
        "started_at": "2026-11-30T10:00:00+00:00",
        "seconds": 4.5,
        "passed": False,
        "checks": [{"id": "gpu-ecc", "group": "host", "status": "fail"}],
        **extra,
    }


def test_one_series_per_status_with_escaped_labels():
    text = render(_report())
    assert (
        'rocmstack_doctor_check_status{node="node\\"1\\\\",check="gpu-ecc",group="host",status="fail"} 1'
        in text
    )
    assert 'status="pass"} 0' in text
    assert "# TYPE rocmstack_doctor_check_status gauge" in text
    assert 'rocmstack_doctor_ok{node="node\\"1\\\\"} 0' in text
    assert 'rocmstack_doctor_duration_seconds{node="node\\"1\\\\"} 4.5' in text
    assert 'rocmstack_doctor_last_run_timestamp_seconds{node="node\\"1\\\\"} 1796032800' in text


def test_a_run_that_judged_nothing_is_told_apart_from_a_failing_one():
    empty = render(_report(checks=[{"id": "gpu-ecc", "group": "host", "status": "skip"}], judged=0))
    failing = render(_report(judged=1))
    assert 'rocmstack_doctor_checks_judged{node="node\\"1\\\\"} 0' in empty
    assert 'rocmstack_doctor_checks_judged{node="node\\"1\\\\"} 1' in failing
    assert (
        'rocmstack_doctor_ok{node="node\\"1\\\\"} 0' in empty
        and 'rocmstack_doctor_ok{node="node\\"1\\\\"} 0' in failing
    )


def test_measured_figures_in_base_units_and_counters_end_in_total():
    report = json.loads(H200.read_text())
    report["checks"].append(
        {
            "id": "gpu-ecc",
            "group": "host",
            "status": "warn",
            "data": {"ecc": [{"gpu": "0", "correctable": 2}]},
        }
    )
    text = render(report)
    names = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
    assert {
        "rocmstack_doctor_collective_busbw_bytes_per_second",
        "rocmstack_doctor_gpu_hbm_copy_bytes_per_second",
        "rocmstack_doctor_gpu_gemm_bf16_flops_per_second",
        "rocmstack_doctor_weight_sync_broadcast_seconds",
        "rocmstack_doctor_gpu_ecc_errors_total",
    } <= names
    assert "# TYPE rocmstack_doctor_gpu_ecc_errors_total counter" in text
    assert 'gpu="1",uuid="6c9d152b-e8b8-7d50-d47a-6b92d006684f"} 3980831817108.09' in text
    series = [line.rsplit(" ", 1)[0] for line in text.splitlines() if not line.startswith("#")]
    assert len(series) == len(set(series))  # node-exporter drops a file that repeats a series


def test_the_file_is_replaced_whole(tmp_path):
    out = tmp_path / "doctor.prom"
    out.write_text("old\n")
    write_textfile(out, _report())
    assert out.read_text().startswith("# HELP rocmstack_doctor_check_status")
    assert [p.name for p in tmp_path.iterdir()] == ["doctor.prom"]  # no temporary left


@pytest.mark.parametrize(
    ("name", "message"), [("doctor.txt", r"only \*\.prom"), ("no/such/d.prom", "does not exist")]
)
def test_bad_paths_are_named_before_any_work(tmp_path, name, message):
    with pytest.raises(InputError, match=message):
        check_textfile_path(tmp_path / name)


def test_burn_in_rates_are_exported_per_gpu():
    windows = [
        {"t": 0, "gemm_tflops": 700.0, "hbm_gbs": 4000.0},
        {"t": 60, "gemm_tflops": 720.0, "hbm_gbs": 4100.0},
    ]
    report = _report(active={"burn_in": {"gpus": [{"index": 0, "uuid": "u0", "windows": windows}]}})
    text = render(report)
    assert (
        'rocmstack_doctor_burnin_gemm_bf16_flops_per_second{node="node\\"1\\\\",gpu="0",uuid="u0"} 710000000000000'
        in text
    )
    assert "rocmstack_doctor_burnin_hbm_copy_bytes_per_second" in text


@pytest.mark.parametrize(
    ("mode", "owner"),
    [(0o777, 0), (0o1777, 0), (0o775, 0), (0o755, 65534)],
    ids=["world", "world-sticky", "group", "owner-nobody"],
)
def test_a_folder_others_can_write_is_refused_unless_allowed(tmp_path, mode, owner):
    folder = tmp_path / "textfiles"
    folder.mkdir()
    os.chown(folder, owner, -1)
    folder.chmod(mode)
    out = folder / "doctor.prom"
    message = rf"--prometheus: folder .*textfiles \(mode {mode:04o}, owner uid {owner}\) can be written by"
    with pytest.raises(InputError, match=message):
        check_textfile_path(out)
    with pytest.raises(InputError, match=message):  # checked again when written: a run may take minutes
        write_textfile(out, _report())
    assert not out.exists()
    check_textfile_path(out, allow_shared=True)
    write_textfile(out, _report(), allow_shared=True)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


def test_a_shared_folder_is_refused_on_the_command_line_in_one_line(tmp_path):
    tmp_path.chmod(0o777)
    result = run_cli("doctor", "--only", "nofile-limit", "--prometheus", str(tmp_path / "d.prom"))
    assert result.code == 2 and "Traceback" not in result.err
    assert f"folder {tmp_path} (mode 0777, owner uid 0)" in result.err
    assert "--allow-shared-dir" in result.err
    alone = run_cli("doctor", "--only", "nofile-limit", "--allow-shared-dir")
    assert alone.code == 2 and "--allow-shared-dir is about the folder" in alone.err
