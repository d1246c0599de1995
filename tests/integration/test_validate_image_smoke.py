"""The whole gate inside a podman-built image: doctor, GRPO smoke on a Ray cluster in the image, rollout bench.

Opt-in (ROCMSTACK_TEST_IMAGE_SMOKE=1): the image carries torch (the local CPU wheel, standing in for the ROCm
base's torch), Ray, transformers and matplotlib, so building it with vfs storage takes many minutes and GBs,
more than CI's share. It was run on the development machine; its output is committed under
docs/evidence/validate-image-smoke/. CI validates the small test image (test_validate_podman.py) instead.

The base is the build test's debootstrap'd Debian (reused through its fixture) plus the torch wheel; the
recipe is the build test's fixture with torch frozen and Ray / transformers / matplotlib as PyPI components.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from test_build_podman import BASE, RECIPE, podman_env, rocmstack  # noqa: F401  (fixture and helpers)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(5400),
    pytest.mark.skipif(os.environ.get("ROCMSTACK_TEST_IMAGE_SMOKE") != "1",
                       reason="opt-in: ROCMSTACK_TEST_IMAGE_SMOKE=1 (builds a multi-GB image with torch and Ray)"),
]

TORCH_WHEEL = Path(os.environ.get("ROCMSTACK_TEST_TORCH_WHEEL",
                                  "/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"))
TORCH_BASE = "localhost/rocmstack-test-base:bookworm-torch"
EVIDENCE = Path(__file__).resolve().parents[2] / "docs" / "evidence" / "validate-image-smoke"


def _buildah(env, *args, timeout=1800):
    proc = subprocess.run(["buildah", "--storage-driver", "vfs", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"buildah {args[0]}: {proc.stderr[-3000:]}"
    return proc.stdout.strip()


@pytest.fixture(scope="module")
def torch_base(podman_env):
    """The test base plus torch from the local wheel, as a ROCm base image brings its torch."""
    if not TORCH_WHEEL.is_file():
        pytest.skip(f"{TORCH_WHEEL} not found (set ROCMSTACK_TEST_TORCH_WHEEL)")
    work = _buildah(podman_env, "from", "--pull=never", BASE).splitlines()[-1]
    try:
        _buildah(podman_env, "copy", work, str(TORCH_WHEEL), f"/tmp/{TORCH_WHEEL.name}")
        _buildah(podman_env, "run", "--isolation", "chroot", work, "--", "python3", "-m", "pip", "install",
                 "--no-cache-dir", f"/tmp/{TORCH_WHEEL.name}")
        _buildah(podman_env, "run", "--isolation", "chroot", work, "--", "rm", f"/tmp/{TORCH_WHEEL.name}")
        _buildah(podman_env, "commit", "--format", "docker", work, TORCH_BASE)
    finally:
        subprocess.run(["buildah", "--storage-driver", "vfs", "rm", work], env=podman_env, capture_output=True,
                       timeout=300)
    return TORCH_BASE


@pytest.fixture(scope="module")
def smoke_image(podman_env, torch_base, tmp_path_factory):
    recipe = yaml.safe_load(RECIPE.read_text())
    recipe["name"] = "tiny-torch"
    recipe["base"]["tag"] = torch_base.rsplit(":", 1)[1]
    recipe["base"]["torch"] = "2.13.0"
    recipe["base"]["frozen"] = ["wheel", "torch"]
    recipe["components"] = {
        "ray": {"source": "pypi", "package": "ray", "layer": "ray", "version": "2.60.0", "extras": ["default"]},
        "transformers": {"source": "pypi", "layer": "verl", "version": "5.24.0"},
        "matplotlib": {"source": "pypi", "layer": "verl", "version": "3.11.2"},
    }
    recipe["sources"] = {name: f"https://pypi.org/project/{name}/" for name in recipe["components"]}
    recipe["patches"] = []
    recipe["publish"]["tag"] = "torch-{components.ray.version}_{arch}"
    recipe["publish"]["aliases"] = []
    folder = tmp_path_factory.mktemp("recipe")
    path = folder / "tiny-torch.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    out = tmp_path_factory.mktemp("images")
    proc = rocmstack(podman_env, "build", str(path), "--gpu-arch", "gfx942", "--engine", "podman", "--ignore-rule",
                     "ray-amdsmi", "--out-dir",
                     str(out), "--source-url", "https://example.org/rocmstack-e2e", "--json", timeout=5000)
    assert proc.returncode == 0, proc.stderr[-6000:]
    return json.loads(proc.stdout)


def test_full_gate_inside_the_image(podman_env, smoke_image, tmp_path):
    image = smoke_image["tags"]["refs"][0]
    report_dir = tmp_path / "report"
    proc = rocmstack(podman_env, "validate", image, "--engine", "buildah", "--expect-gpus", "0", "--device", "cpu",
                     "--report", str(report_dir), timeout=3600)
    if os.environ.get("ROCMSTACK_TEST_EVIDENCE") == "1":  # keep what this run showed, for docs/evidence
        EVIDENCE.mkdir(parents=True, exist_ok=True)
        for name in ("report.json", "report.md", "report.html"):
            if (report_dir / name).is_file():
                shutil.copyfile(report_dir / name, EVIDENCE / name)
        (EVIDENCE / "validate.log").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, proc.stderr[-6000:]
    report = json.loads((report_dir / "report.json").read_text())
    assert report["passed"] and report["verdict"] == "PASS: doctor, smoke, bench"
    assert report["mode"] == "container" and report["render_hash"] == smoke_image["render_hash"]
    smoke = report["smoke"]["summary"]
    assert smoke["device"] == "cpu" and smoke["passed"] and smoke["steps"] == 30
    assert (report_dir / "smoke" / "reward.png").is_file() and (report_dir / "bench" / "roofline.png").is_file()
    checks = {c["id"]: c["status"] for c in report["doctor"]["report"]["checks"]}
    assert checks["lock-drift"] == "pass" and checks["ray-gpus"] in ("pass", "skip")
