"""`rocmstack validate --in-place` on this CPU machine, and its report.html in a real browser.

The doctor and the rollout bench run for real here; the GRPO smoke is left out (`--skip-smoke`): the smoke's
own integration tests run it on CPU already, and a full in-place run with it is committed as evidence
(docs/evidence/validate-cpu/). Headless Chromium (Debian's package) loads the report from disk, takes a
screenshot and dumps the DOM it built; the test checks both.
"""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess
import sys

import pytest

from rocmstack.validate.report import REPORT_HTML

pytestmark = [pytest.mark.slow]

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def in_place(tmp_path_factory):
    out = tmp_path_factory.mktemp("inplace") / "report"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rocmstack",
            "validate",
            "--in-place",
            "--expect-gpus",
            "0",
            "--device",
            "cpu",
            "--skip-smoke",
            "--output",
            str(out),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    return {"proc": proc, "dir": out}


@pytest.mark.timeout(960)
def test_in_place_passes_on_this_cpu_node(in_place):
    proc = in_place["proc"]
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout)
    assert report["passed"] and report["verdict"] == "PASS: doctor, bench (bench warned; smoke skipped)"
    assert report["doctor"]["report"]["platform"]["physical_gpus"] == 0
    bench = report["bench"]["report"]
    assert bench["device"]["type"] == "cpu" and all(r["status"] == "pass" for r in bench["results"])
    assert (in_place["dir"] / "bench" / "roofline.png").is_file()


def _chromium(tmp_path, *args):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        pytest.skip("chromium is not installed (ci/install-system-deps.sh installs it)")
    return subprocess.run(
        [exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
        capture_output=True,
        text=True,
        timeout=180,
    )


def _not_blank(png: bytes) -> float:
    """Standard deviation of the pixel values (a blank page or plot is ~0)."""
    import numpy as np
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=float)
    return float(pixels.std())


@pytest.mark.timeout(960)
def test_report_html_renders_in_chromium(in_place, tmp_path):
    page = in_place["dir"] / REPORT_HTML
    assert in_place["proc"].returncode == 0, in_place["proc"].stderr[-3000:]
    shot = tmp_path / "shot.png"
    proc = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,1600", page.as_uri())
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-2000:]
    png = shot.read_bytes()
    assert png.startswith(b"\x89PNG") and _not_blank(png) > 10
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'id="verdict">PASS: doctor, bench (bench warned; smoke skipped)</div>' in dom.stdout
    assert '<table id="doctor">' in dom.stdout and '<table id="bench">' in dom.stdout
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', dom.stdout)
    assert images, "the roofline plot is not in the rendered page"
    assert all(_not_blank(base64.b64decode(b)) > 5 for b in images)
