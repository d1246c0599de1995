"""--history: one JSON line per run, a figure 5 % worse than the node's previous run warns, the trend shows.
The figures are the two-H200 level-2 run in docs/evidence; the regressions are edited copies of it."""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import socket
import sys
from pathlib import Path

import pytest
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot

from rocmstack.doctor import DoctorOptions, run_doctor
from rocmstack.doctor.checks.history import history_trend
from rocmstack.doctor.history import append_run, check_history_dir, load_runs
from rocmstack.doctor.model import Status
from rocmstack.doctor.report import render_markdown, render_table
from rocmstack.errors import InputError

EVIDENCE = Path(__file__).resolve().parents[2] / "docs/evidence/doctor-levels-h200x2-2026-11-30"
REPORT = json.loads((EVIDENCE / "level2-healthy.json").read_text())


def _previous(tmp_path: Path) -> None:
    append_run(tmp_path, {**REPORT, "host": socket.gethostname()})


def _slower_gemm(factor: float) -> dict:
    active = copy.deepcopy(REPORT["active"])
    active["health"][1]["gemm_bf16_tflops"] *= factor
    return active


def _judge(tmp_path: Path, active: dict):
    opts = DoctorOptions(history_dir=tmp_path, env={})
    return history_trend(dataclasses.replace(make_snapshot(), active=active), opts)


def test_a_figure_5_percent_below_the_previous_run_warns_and_names_the_gpu(tmp_path):
    _previous(tmp_path)
    result = _judge(tmp_path, _slower_gemm(0.92))
    assert result.status == Status.WARN
    assert (
        "gpu_gemm_bf16_flops_per_second{gpu=1,uuid=6c9d152b-e8b8-7d50-d47a-6b92d006684f} -8.0%"
        in result.summary
    )
    worse = [t for t in result.data["trend"] if t["worse"]]
    assert len(worse) == 1


def test_within_5_percent_passes(tmp_path):
    _previous(tmp_path)
    result = _judge(tmp_path, _slower_gemm(0.97))
    assert result.status == Status.PASS, result.summary
    assert len(result.data["trend"]) > 10  # every collective x size, HBM and GEMM per GPU, the sync time


def test_first_run_and_no_figures_skip(tmp_path):
    assert _judge(tmp_path, REPORT["active"]).status == Status.SKIP
    assert _judge(tmp_path, {}).status == Status.SKIP


def test_runs_are_kept_as_json_lines_and_the_trend_is_shown(tmp_path):
    for _ in range(2):
        report = run_doctor(
            DoctorOptions(fast=True, only=("nofile-limit", "history-trend"), history_dir=tmp_path)
        )
    runs = load_runs(tmp_path, socket.gethostname())
    assert len(runs) == 2 and runs[1]["figures"]["duration_seconds"] > 0
    assert report["history"]["file"].endswith(".jsonl")
    _previous(tmp_path)
    row = next(c for c in report["checks"] if c["id"] == "history-trend")
    row.update(status="warn", data=_judge(tmp_path, _slower_gemm(0.9)).data)
    out = io.StringIO()
    render_table(report, Console(file=out, width=200))
    assert "Trend against the previous run" in out.getvalue() and "-10.0%" in out.getvalue()
    assert "-10.0% ⚠️" in render_markdown(report)


def test_a_damaged_history_file_is_named(tmp_path):
    (tmp_path / f"{socket.gethostname()}.jsonl").write_text(
        '{"schema": "rocmstack.doctor-history/1"}\nnot json\n'
    )
    with pytest.raises(InputError, match=r"line 1 is not a rocmstack.doctor-history/1 record"):
        check_history_dir(tmp_path)
    with pytest.raises(InputError, match="is a file"):
        check_history_dir(tmp_path / f"{socket.gethostname()}.jsonl")
