"""--history: one JSON line per run, a figure 5 % worse than the node's previous run warns, the trend shows.
The figures are the two-H200 level-2 run in docs/evidence; the regressions are edited copies of it."""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import math
import os
import socket
import stat
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot

from rocmstack.doctor import DoctorOptions, run_doctor
from rocmstack.doctor.checks.history import history_trend
from rocmstack.doctor.history import (
    MAX_WARNINGS,
    SCHEMA,
    append_run,
    check_history_dir,
    load_runs,
    parse_line,
    read_history,
)
from rocmstack.doctor.report import render_markdown, render_table
from rocmstack.errors import InputError
from rocmstack.status import Status

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


def _line(**figures) -> str:
    return json.dumps({"schema": SCHEMA, "started_at": "t", "figures": figures})


DAMAGED = [
    b"not json",
    b"[" * 100_000,  # nested past Python's recursion limit
    b"1" * 5000,  # past Python's digit limit for int()
    _line(x=1).replace("1}", "1e400}").encode(),  # parses as inf
    _line(x=1).replace("1}", "1" * 400 + "}").encode(),  # an int no float holds
    _line(x=1).replace("1}", "NaN}").encode(),
    _line(x=True).encode(),
    b"[]",
    b'"a string"',
    b'{"schema": "something/else", "figures": {}}',
    b'{"schema": "rocmstack.doctor-history/1", "figures": []}',
    b"\xff\xfe not utf-8",
]


def test_a_line_an_earlier_release_wrote_reads_with_its_verdict_as_passed(tmp_path):
    # the history outlives an upgrade: schema 1 named the verdict "ok"
    earlier = {"schema": "rocmstack.doctor-history/1", "started_at": "t", "ok": False, "figures": {"x": 1.0}}
    assert parse_line(json.dumps(earlier).encode()) == {
        "schema": SCHEMA,
        "started_at": "t",
        "passed": False,
        "figures": {"x": 1.0},
    }
    host = socket.gethostname()
    (tmp_path / f"{host}.jsonl").write_text(json.dumps(earlier) + "\n")
    append_run(tmp_path, {**REPORT, "host": host, "passed": True})
    runs = read_history(tmp_path, host).runs
    assert [r["passed"] for r in runs] == [False, True] and not any("ok" in r for r in runs)


def test_each_damaged_line_is_one_warning_and_the_runs_around_it_still_count(tmp_path):
    host = socket.gethostname()
    _previous(tmp_path)
    (tmp_path / f"{host}.jsonl").open("ab").write(b"\n".join(DAMAGED) + b"\n")
    check_history_dir(tmp_path)  # a damaged line no longer stops the run before it starts
    _previous(tmp_path)
    history = read_history(tmp_path, host)
    assert len(history.runs) == 2 and history.skipped == len(DAMAGED)
    assert [w.split(" line ")[1].split()[0] for w in history.warnings] == [
        str(n) for n in range(2, 2 + len(DAMAGED))
    ]
    assert "nested too deep" in history.warnings[1] and "digit" in history.warnings[2]
    result = _judge(tmp_path, _slower_gemm(0.92))
    assert result.status == Status.WARN
    assert result.summary.startswith(f"{len(DAMAGED)} damaged line(s) skipped: ")
    assert "5 % or more worse" in result.summary  # still compared with the last good run
    assert result.data["skipped_lines"] == len(DAMAGED) and result.data["trend"]


def test_a_line_cut_short_by_a_crash_does_not_swallow_the_next_run(tmp_path):
    _previous(tmp_path)
    path = tmp_path / f"{socket.gethostname()}.jsonl"
    path.write_bytes(path.read_bytes()[:-200])  # no newline at the end: a write cut short
    _previous(tmp_path)
    history = read_history(tmp_path, socket.gethostname())
    assert len(history.runs) == 1 and history.skipped == 1


def test_a_damaged_file_alone_warns_rather_than_skips(tmp_path):
    (tmp_path / f"{socket.gethostname()}.jsonl").write_bytes(b"x\n" * (MAX_WARNINGS + 5))
    history = read_history(tmp_path, socket.gethostname())
    assert history.skipped == MAX_WARNINGS + 5 and len(history.warnings) == MAX_WARNINGS + 1
    assert history.warnings[-1].endswith(": 5 more damaged line(s) skipped")
    result = _judge(tmp_path, REPORT["active"])
    assert result.status == Status.WARN and result.summary.startswith(f"{MAX_WARNINGS + 5} damaged line(s)")


_JSON = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_RAW = st.one_of(
    st.binary(max_size=40),
    _JSON.map(lambda v: json.dumps(v).encode()),
    st.dictionaries(st.text(max_size=8), _JSON, max_size=4).map(
        lambda figures: json.dumps({"schema": SCHEMA, "figures": figures}).encode()
    ),
).map(lambda raw: raw.replace(b"\n", b" "))


@given(st.lists(_RAW, max_size=8))
def test_any_lines_are_runs_or_one_warning_each_never_an_exception(lines):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / f"{socket.gethostname()}.jsonl").write_bytes(b"\n".join(lines))
        history = read_history(folder, socket.gethostname())
        result = _judge(folder, REPORT["active"])  # the check itself: a verdict, never an error
    assert len(history.runs) + history.skipped == sum(1 for raw in lines if raw.strip())
    assert all(math.isfinite(float(v)) for run in history.runs for v in run["figures"].values())
    assert result.status in (Status.SKIP, Status.WARN)
    assert (result.status == Status.WARN) == (history.skipped > 0)


@pytest.mark.parametrize(
    ("mode", "owner"),
    [(0o777, 0), (0o1777, 0), (0o775, 0), (0o755, 65534)],
    ids=["world", "world-sticky", "group", "owner-nobody"],
)
def test_a_folder_others_can_write_is_refused_unless_allowed(tmp_path, mode, owner):
    folder = tmp_path / "history"
    folder.mkdir()
    os.chown(folder, owner, -1)
    folder.chmod(mode)
    with pytest.raises(InputError, match=rf"folder .*history \(mode {mode:04o}, owner uid {owner}\)"):
        check_history_dir(folder)
    check_history_dir(folder, allow_shared=True)


def test_a_new_folder_is_private_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        check_history_dir(tmp_path / "new")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o755


@pytest.mark.parametrize("kind", ["symlink", "dangling", "hardlink"])  # FIFOs: test_hostile_files
def test_a_history_file_that_is_not_a_plain_file_is_refused_before_any_work(tmp_path, kind):
    path = tmp_path / f"{socket.gethostname()}.jsonl"
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.write_text("keep\n")
    if kind == "symlink":
        path.symlink_to(outside)
    elif kind == "dangling":
        path.symlink_to(tmp_path.parent / f"{tmp_path.name}-created")
    else:
        os.link(outside, path)
    with pytest.raises(InputError, match="not a regular file"):
        check_history_dir(tmp_path)
    with pytest.raises(InputError, match="not a regular file: this run is not kept"):
        _previous(tmp_path)
    assert outside.read_text() == "keep\n"
    assert not (tmp_path.parent / f"{tmp_path.name}-created").exists()
    outside.unlink()


def test_a_history_path_that_is_a_file_is_named(tmp_path):
    (tmp_path / f"{socket.gethostname()}.jsonl").write_text("")
    with pytest.raises(InputError, match="is a file"):
        check_history_dir(tmp_path / f"{socket.gethostname()}.jsonl")
