"""The whole gate inside an image: doctor, the GRPO smoke job on a Ray cluster inside it, the rollout bench.

Opt-in (ROCMSTACK_TEST_IMAGE_SMOKE=1): it needs torch, Ray, transformers and matplotlib inside the image,
GBs (vfs storage, the fallback where overlay is not allowed, copies them for every container): more than
CI's share. Run on the development machine; its
output is committed under docs/evidence/validate-image-smoke/. CI validates the small image without them
(test_validate_podman.py).

The image is the build test's podman-built tiny-pip image (its fixture, reused) with one layer added on
top, as a ROCm base brings torch: the local CPU torch wheel plus Ray, transformers and matplotlib from
PyPI. The layer keeps the build's labels and lock, so the render-hash check still runs; the doctor's
lock-drift check is left out because that lock pins torch as the fixture's placeholder 0.0.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from test_build_podman import rocmstack

from rocmstack.container import engine as engines

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(5400),
    pytest.mark.skipif(
        os.environ.get("ROCMSTACK_TEST_IMAGE_SMOKE") != "1",
        reason="opt-in: ROCMSTACK_TEST_IMAGE_SMOKE=1 (adds GBs of torch and Ray to the test image)",
    ),
]

TORCH_WHEEL = Path(
    os.environ.get(
        "ROCMSTACK_TEST_TORCH_WHEEL", "/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    )
)
SMOKE_IMAGE = "localhost/rocmstack-test/tiny-torch:smoke"
PACKAGES = ["ray[default]==2.60.0", "transformers==5.24.0", "matplotlib==3.11.2"]
EVIDENCE = Path(__file__).resolve().parents[2] / "docs" / "evidence" / "validate-image-smoke"


def _buildah(env, *args, timeout=3600):
    proc = subprocess.run(
        ["buildah", "--storage-driver", env[engines.PODMAN_DRIVER_ENV], *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"buildah {args[0]}: {proc.stderr[-3000:]}"
    return proc.stdout.strip()


@pytest.fixture(scope="module")
def smoke_image(podman_env, first_build):
    if not TORCH_WHEEL.is_file():
        pytest.skip(f"{TORCH_WHEEL} not found (set ROCMSTACK_TEST_TORCH_WHEEL)")
    work = _buildah(
        podman_env, "from", "--pull=never", first_build["manifest"]["tags"]["refs"][0]
    ).splitlines()[-1]
    try:
        _buildah(podman_env, "copy", work, str(TORCH_WHEEL), f"/tmp/{TORCH_WHEEL.name}")
        _buildah(
            podman_env,
            "run",
            "--isolation",
            "chroot",
            "--user",
            "root",
            work,
            "--",
            "python3",
            "-m",
            "pip",
            "install",
            "--no-cache-dir",
            f"/tmp/{TORCH_WHEEL.name}",
            *PACKAGES,
        )
        _buildah(
            podman_env,
            "run",
            "--isolation",
            "chroot",
            "--user",
            "root",
            work,
            "--",
            "rm",
            f"/tmp/{TORCH_WHEEL.name}",
        )
        _buildah(podman_env, "commit", "--format", "docker", work, SMOKE_IMAGE)
    finally:
        subprocess.run(
            ["buildah", "--storage-driver", podman_env[engines.PODMAN_DRIVER_ENV], "rm", work],
            env=podman_env,
            capture_output=True,
            timeout=600,
        )
    return SMOKE_IMAGE


def test_full_gate_inside_the_image(podman_env, first_build, smoke_image, tmp_path):
    report_dir = tmp_path / "report"
    proc = rocmstack(
        podman_env,
        "validate",
        smoke_image,
        "--engine",
        "buildah",
        "--expect-gpus",
        "0",
        "--device",
        "cpu",
        "--skip",
        "lock-drift",
        "--output",
        str(report_dir),
        timeout=3600,
    )
    if os.environ.get("ROCMSTACK_TEST_EVIDENCE") == "1":  # keep what this run showed, for docs/evidence
        EVIDENCE.mkdir(parents=True, exist_ok=True)
        for name in ("report.json", "report.md", "report.html"):
            if (report_dir / name).is_file():
                shutil.copyfile(report_dir / name, EVIDENCE / name)
        (EVIDENCE / "validate.log").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, proc.stderr[-6000:]
    report = json.loads((report_dir / "report.json").read_text())
    assert report["passed"] and report["verdict"] == "PASS: doctor, smoke, bench (bench warned)"
    assert report["mode"] == "container"
    assert (
        report["render_hash"]
        == first_build["manifest"]["render_hash"]
        == report["image"]["lock"]["render_hash"]
    )
    smoke = report["smoke"]["summary"]
    assert smoke["device"] == "cpu" and smoke["passed"] and smoke["steps"] == 30
    assert (report_dir / "smoke" / "reward.png").is_file() and (
        report_dir / "bench" / "roofline.png"
    ).is_file()
    assert report["bench"]["report"]["device"]["type"] == "cpu"
