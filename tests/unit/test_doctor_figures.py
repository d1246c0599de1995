"""Measured figures in base units, from the two-H200 level-2 run in docs/evidence and check data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocmstack.doctor.figures import from_report

H200 = (
    Path(__file__).resolve().parents[2] / "docs/evidence/doctor-levels-h200x2-2026-11-30/level2-healthy.json"
)


def test_level2_figures_in_base_units_with_stable_keys():
    figs = {f.key: f for f in from_report(json.loads(H200.read_text()))}
    ar = figs["collective_busbw_bytes_per_second{op=all_reduce,size_bytes=1073741824,ranks=2}"]
    assert ar.value > 1e11 and ar.better == "higher"
    sync = figs["weight_sync_broadcast_seconds{size_bytes=1073741824}"]
    assert 0 < sync.value < 1 and sync.better == "lower"
    assert figs["duration_seconds"].better is None  # reported, never judged run to run
    hbm = figs["gpu_hbm_copy_bytes_per_second{gpu=0,uuid=e9d758e2-ec1d-89f3-c1bf-35fef897fa79}"]
    assert hbm.value == pytest.approx(4166.1823421819545e9)


def test_ecc_counters_are_counters_and_ecc_off_is_left_out():
    report = {
        "seconds": 1.0,
        "checks": [{"data": {"ecc": [{"gpu": "0", "correctable": 3, "uncorrectable": None}]}}],
    }
    ecc = [f for f in from_report(report) if f.name == "gpu_ecc_errors_total"]
    assert [(f.labels, f.value, f.kind) for f in ecc] == [
        ((("gpu", "0"), ("type", "correctable")), 3.0, "counter")
    ]
