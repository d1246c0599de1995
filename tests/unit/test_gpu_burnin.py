"""The burn-in load on the CPU: timed windows of real GEMM and copies, and a clean pattern test."""

from __future__ import annotations

import torch

from rocmstack.gpu.burnin import PATTERNS, pattern_test, sustain


def test_sustain_times_every_window():
    windows = sustain(torch.device("cpu"), seconds=0.6, window_s=0.2, gemm_n=64, hbm_bytes=1 << 16)
    assert 2 <= len(windows) <= 4
    assert all(w.gemm_tflops > 0 and w.hbm_gbs > 0 for w in windows)
    assert windows[0].t < windows[-1].t


def test_pattern_test_reads_back_every_pattern():
    result = pattern_test(torch.device("cpu"), 1 << 16)
    assert [p["pattern"] for p in result["patterns"]] == list(PATTERNS)
    assert result["mismatches"] == 0 and result["bytes"] == 1 << 16
