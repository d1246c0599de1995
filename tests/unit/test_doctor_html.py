"""--html: one self-contained page; values from the report are escaped; a plot per burn-in GPU."""

from __future__ import annotations

import base64
import re

from rocmstack.doctor.html import render_html, write_html


def _report(**extra) -> dict:
    return {
        "host": "<node>",
        "verdict": "NOT READY: gpu-ecc",
        "passed": False,
        "options": {"level": 4},
        "checks": [{"id": "gpu-ecc", "status": "fail", "summary": "<script>x</script>", "fix": "RMA"}],
        **extra,
    }


def test_values_are_escaped_and_the_fix_shown():
    page = render_html(_report())
    assert "<script>x</script>" not in page and "&lt;script&gt;x&lt;/script&gt;" in page
    assert "&lt;node&gt;" in page and "fix: RMA" in page and "<img" not in page


def test_one_png_per_burn_in_gpu(tmp_path):
    windows = [
        {"t": 0.0, "gemm_tflops": 700.0, "hbm_gbs": 4000.0},
        {"t": 60.0, "gemm_tflops": 690.0, "hbm_gbs": 3990.0},
    ]
    reading = {"gfx_mhz": 1980, "power_w": 690, "power_limit_w": 700, "temp_c": 70}
    burn = {
        "mode": "gpu",
        "minutes": 2,
        "gpus": [{"index": i, "uuid": f"u{i}", "name": "H200", "windows": windows} for i in range(2)],
        "telemetry": {
            "source": "nvml",
            "samples": [{"t": t, "gpus": [reading, reading]} for t in (0, 60, 120)],
        },
    }
    out = tmp_path / "r.html"
    write_html(out, _report(active={"burn_in": burn}))
    uris = re.findall(r'src="data:image/png;base64,([^"]+)"', out.read_text())
    assert len(uris) == 2
    assert all(base64.b64decode(u).startswith(b"\x89PNG\r\n\x1a\n") for u in uris)
