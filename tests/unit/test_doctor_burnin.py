"""Judging a burn-in: rate over time against the GPU's own first window and its peers, time throttled,
power against the board limit, the pattern test, error counters. GPU-mode results written here."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot

from rocmstack.doctor.checks import burnin
from rocmstack.doctor.model import DoctorOptions
from rocmstack.status import Status

OPTS = DoctorOptions(env={})


def _windows(*gemm: float) -> list[dict]:
    return [{"t": 60.0 * i, "seconds": 60.0, "gemm_tflops": g, "hbm_gbs": 4000.0} for i, g in enumerate(gemm)]


def _burn(gpus: list[dict], samples: list[dict] | None = None, before=(), after=(), mode="gpu") -> dict:
    return {
        "mode": mode,
        "minutes": 10,
        "seconds": 600.0,
        "gpus": [
            {"index": i, "uuid": f"u{i}", "memory": {"bytes": 1 << 30, "patterns": []}, **g}
            for i, g in enumerate(gpus)
        ],
        "telemetry": {"source": "nvml", "why_none": None, "samples": samples or []},
        "counters": {"before": list(before), "after": list(after)},
    }


def _run(check, burn: dict):
    return check(dataclasses.replace(make_snapshot(), active={"burn_in": burn}), OPTS)


def test_a_rate_falling_more_than_10_percent_from_the_first_minute_fails():
    burn = _burn([{"windows": _windows(760, 750, 740)}, {"windows": _windows(760, 700, 650)}])
    result = _run(burnin.throughput, burn)
    assert result.status == Status.FAIL
    assert (
        result.summary
        == "GPU 1 (u1): gemm_tflops fell 14% from its first window (760 -> 650 TFLOPS at 120 s)"
    )


def test_a_gpu_below_its_peers_fails_and_cpu_stand_ins_only_warn():
    gpus = [{"windows": _windows(760, 760)}, {"windows": _windows(760, 761)}, {"windows": _windows(600, 600)}]
    result = _run(burnin.throughput, _burn(gpus))
    assert (
        result.status == Status.FAIL
        and "GPU 2 (u2): median gemm_tflops 21% below its peers" in result.summary
    )
    assert _run(burnin.throughput, _burn(gpus, mode="cpu")).status == Status.WARN
    steady = [{"windows": _windows(760, 755, 758)}] * 2
    assert _run(burnin.throughput, _burn(steady)).status == Status.PASS


def _sample(t: float, *readings: dict) -> dict:
    return {"t": t, "gpus": list(readings)}


def test_thermal_reasons_count_as_throttled_and_the_power_cap_does_not():
    hot = {"gfx_mhz": 1980, "power_w": 700, "power_limit_w": 700, "throttle": ["power-cap", "thermal"]}
    capped = {"gfx_mhz": 1980, "power_w": 700, "power_limit_w": 700, "throttle": ["power-cap"]}
    samples = [_sample(i, capped, hot if i >= 5 else capped) for i in range(10)]
    result = _run(burnin.throttle, _burn([{}, {}], samples))
    assert result.status == Status.FAIL
    assert result.summary.startswith(
        "GPU 1 (u1): throttled 50% of the burn-in (300 s of 600 s); reasons power-cap, thermal"
    )
    only_capped = [_sample(i, capped, capped) for i in range(10)]
    assert _run(burnin.throttle, _burn([{}, {}], only_capped)).status == Status.PASS


def test_power_above_the_board_limit_fails():
    over = {"gfx_mhz": 1980, "power_w": 760, "power_limit_w": 700}
    fine = {"gfx_mhz": 1980, "power_w": 690, "power_limit_w": 700}
    result = _run(burnin.power, _burn([{}, {}], [_sample(i, fine, over) for i in range(4)]))
    assert (
        result.status == Status.FAIL
        and result.summary == "GPU 1 (u1): median power 760 W above its 700 W board limit"
    )


def test_a_pattern_read_back_wrong_fails():
    bad = {"bytes": 1 << 30, "patterns": [{"pattern": "0xaa", "mismatches": 3, "first_bad_offset": 4096}]}
    result = _run(burnin.memory, _burn([{}, {"memory": bad}]))
    assert result.status == Status.FAIL
    assert result.summary == "GPU 1 (u1): 3 word(s) read back wrong with pattern 0xaa (first at byte 4096)"


def test_counters_new_uncorrectable_fails_new_correctable_warns():
    before = [{"ecc_correctable": 2, "ecc_uncorrectable": 0, "pcie_replay": 0}] * 2
    after = [
        {"ecc_correctable": 5, "ecc_uncorrectable": 0, "pcie_replay": 0},
        {"ecc_correctable": 2, "ecc_uncorrectable": 0, "pcie_replay": 0},
    ]
    assert _run(burnin.errors, _burn([{}, {}], before=before, after=after)).status == Status.WARN
    after[1] = {"ecc_correctable": 2, "ecc_uncorrectable": 1, "pcie_replay": 0}
    result = _run(burnin.errors, _burn([{}, {}], before=before, after=after))
    assert result.status == Status.FAIL
    assert result.summary == "GPU 1 (u1): 1 new uncorrectable ECC error(s) during the burn-in (0 -> 1)"


def test_without_a_burn_in_every_check_skips():
    for check in burnin.CHECKS:
        assert check.run(make_snapshot(), OPTS).status == Status.SKIP
        assert check.level == 4
