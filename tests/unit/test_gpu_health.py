"""rocmstack.gpu.health: the peer comparison (the measurements need a GPU; they run in the H200 evidence)."""

from __future__ import annotations

import pytest
import torch

from rocmstack.gpu.health import measure_health, slow_outliers


def test_one_slow_gpu_is_flagged():
    values = {"0": 4300.0, "1": 4310.0, "2": 3700.0, "3": 4290.0}
    out = slow_outliers(values)
    assert list(out) == ["2"] and out["2"] == pytest.approx(1 - 3700 / 4300)


def test_within_tolerance_is_not_flagged():
    assert slow_outliers({"0": 100.0, "1": 91.0}) == {}
    assert slow_outliers({"0": 100.0, "1": 89.0}) == {"1": pytest.approx(0.11)}


def test_single_gpu_has_no_peers():
    assert slow_outliers({"0": 1.0}) == {}


def test_cpu_device_refused():
    with pytest.raises(ValueError, match="needs a GPU"):
        measure_health(torch.device("cpu"))
