"""`rocmstack doctor --level 4` end to end on this machine: two CPU stand-ins run the real load (bf16 GEMM and
copies, the memory pattern test) for a few seconds while a replay of real MI300 telemetry is sampled
(tests/fixtures/doctor/telemetry, sources in SOURCES.md). A GPU stuck at 58 MHz from a fifth of the run on,
and an uncorrectable ECC counter that rises half way, each fail the burn-in with that GPU named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor" / "telemetry"))
from replay import write_timeline

pytestmark = pytest.mark.slow
CHECKS = "burnin-throughput,burnin-throttle,burnin-power,burnin-memory,burnin-errors"


def _burn(tmp_path: Path, timeline: Path) -> tuple[int, dict, Path]:
    html = tmp_path / "doctor.html"
    argv = ["doctor", "--level", "4", "--burn-in", "4.8s", "--only", CHECKS, "--cpu-ranks", "2"]
    argv += ["--telemetry-replay", str(timeline), "--html", str(html), "--json"]
    run = subprocess.run(
        [sys.executable, "-m", "rocmstack", *argv],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode in (0, 1), run.stderr
    report = json.loads(run.stdout)
    return run.returncode, {c["id"]: c for c in report["checks"]}, html


def test_a_healthy_replay_passes_and_plots_every_gpu(tmp_path):
    code, checks, html = _burn(tmp_path, write_timeline(tmp_path / "healthy.json"))
    for cid in ("burnin-throttle", "burnin-power", "burnin-memory", "burnin-errors"):
        assert checks[cid]["status"] == "pass", checks[cid]
    assert checks["burnin-throughput"]["status"] in ("pass", "warn")  # CPU rates only warn
    assert code == 0
    assert "of a 750 W limit" in " ".join(checks["burnin-power"]["details"])
    page = html.read_text()
    assert page.count('<img src="data:image/png;base64,iVBOR') == 2  # one PNG per GPU
    assert 'alt="GPU 1 burn-in"' in page


def test_a_throttled_gpu_fails_with_its_name(tmp_path):
    code, checks, _ = _burn(tmp_path, write_timeline(tmp_path / "throttled.json", throttled=1))
    assert code == 1
    throttle = checks["burnin-throttle"]
    assert throttle["status"] == "fail"
    assert throttle["summary"].startswith("GPU 1 (guid-27175): throttled ")
    assert "GPU 0 (guid-65402): throttled 0%" in " ".join(throttle["details"])


def test_an_ecc_counter_rising_during_the_run_fails_with_the_gpu_named(tmp_path):
    code, checks, _ = _burn(tmp_path, write_timeline(tmp_path / "ecc.json", ecc_rises_on=0))
    assert code == 1
    errors = checks["burnin-errors"]
    assert errors["status"] == "fail"
    assert errors["summary"] == (
        "GPU 0 (guid-65402): 1 new uncorrectable ECC error(s) during the burn-in (0 -> 1)"
    )
    assert checks["burnin-throttle"]["status"] == "pass"
