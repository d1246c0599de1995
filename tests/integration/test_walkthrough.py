"""docs/walkthrough.md, run as written: its bash blocks, in order, in one shell, from the checkout.

Only the image store is the test's own (podman and buildah read it from CONTAINERS_STORAGE_CONF), so the
machine's images are never touched. Real debootstrap, podman, buildah, PyPI; nothing replayed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rocmstack.container import engine as engines
from tests.conftest import podman_store_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3000)]

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "walkthrough.md"


def blocks() -> list[str]:
    text = DOC.read_text()
    part = text.split("<!-- walkthrough:begin -->", 1)[1].split("<!-- walkthrough:end -->", 1)[0]
    return re.findall(r"^```bash\n(.*?)^```$", part, flags=re.S | re.M)


def test_the_walkthrough_has_its_steps():
    steps = blocks()
    assert len(steps) == 8
    assert "podman import" in steps[1] and "rocmstack build" in steps[2] and "--no-cache" in steps[3]
    assert "rocmstack validate" in steps[4] and "rocmstack publish" in steps[5]
    assert "--sign" in steps[6] and "cosign verify" in steps[6]


def store_driver(root: Path) -> str:
    """overlay where the kernel allows it (the walkthrough's build takes ~20 s there, ~110 s with vfs, which
    copies the whole tree for every layer); vfs otherwise, as inside an unprivileged container. The page names
    no driver: a user's podman uses its own. ROCMSTACK_TEST_STORAGE_DRIVER forces one, as for the build tests."""
    forced = os.environ.get("ROCMSTACK_TEST_STORAGE_DRIVER")
    if forced:
        return forced
    root.mkdir()
    # podman's driver set-up does a test mount: it refuses overlay where overlay cannot work (e.g. over overlayfs).
    probe = subprocess.run(
        ["podman", "--storage-driver", "overlay", "info"],
        env=podman_store_env(root, "overlay"),
        capture_output=True,
        timeout=120,
    )
    return "overlay" if probe.returncode == 0 else "vfs"


def test_the_walkthrough_runs_as_written(tmp_path):
    for tool in ("debootstrap", "podman", "buildah", "docker-registry", "cosign", "curl"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed (ci/install-system-deps.sh installs it)")
    if os.geteuid() != 0:
        pytest.skip("debootstrap needs root")
    driver = store_driver(tmp_path / "probe")
    store = tmp_path / "store"
    store.mkdir()
    env = {**podman_store_env(store, driver), engines.PODMAN_DRIVER_ENV: driver}
    env.pop("VIRTUAL_ENV", None)
    steps = blocks()
    walk_file = tmp_path / "walk"
    kept = tmp_path / "kept"
    kept.mkdir()
    # Blocks 1-7 as written; then the test keeps the plan and the report, before block 8 removes them.
    keep = f'printf %s "$WALK" >{walk_file}; cp "$WALK/plan.json" "$WALK/report/report.json" "$WALK/tags.txt" {kept}/'
    script = "\n".join([*steps[:7], keep, steps[7]])
    try:
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=2900,
        )
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-8000:]
        assert "PASS: doctor (smoke, bench skipped)" in proc.stdout, out[-6000:]
        assert "refusing to publish localhost/rocmstack-test/tiny:tiny-latest" in proc.stderr, out[-4000:]
        assert "publish refused (exit 1)" in proc.stdout
        # Step 4: a rebuild from nothing is the same image; step 7: the pushed digest is signed and verified.
        assert "rebuilt from nothing: the same image" in proc.stdout, out[-6000:]
        assert re.search(
            r"^signed 127\.0\.0\.1:5000/localhost/rocmstack-test/tiny@sha256:[0-9a-f]{64} \(cosign, key ",
            proc.stderr,
            re.M,
        )
        assert "signature verified" in proc.stdout, out[-6000:]
        walk = Path(walk_file.read_text())
        assert not walk.exists()  # block 8 cleaned up
        built = (kept / "tags.txt").read_text().split()
        assert len(built) == 6 and "localhost/rocmstack-test/tiny:tiny-latest" in built, built
        assert (
            len([ref for ref in built if ref.startswith("127.0.0.1:5000/localhost/rocmstack-test/tiny:")])
            == 3
        ), built
        left = subprocess.run(
            ["podman", "--storage-driver", driver, "images", "--format", "{{.Repository}}:{{.Tag}}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout.split()
        # Block 8 removed every tag the walkthrough made: the builds' six and the base.
        assert [ref for ref in left if "rocmstack-test" in ref] == [], left
        # Step 4's dry run printed what the run then executed: the same commands, the image by its id; only
        # the working container's random name differs.
        planned = json.loads((kept / "plan.json").read_text())
        report = json.loads((kept / "report.json").read_text())
        ran = report["engine"]["commands"]
        assert planned["image_id"] and planned["image_id"].removeprefix("sha256:") == report["image"][
            "id"
        ].removeprefix("sha256:")
        name = planned["container"]
        assert [
            [a.replace(name, report["engine"]["container"]) for a in c] for c in planned["commands"]
        ] == ran
        assert "--shm-size" in ran[0] and ran[0][ran[0].index("--shm-size") + 1] == "16g"
    finally:
        subprocess.run(
            ["podman", "--storage-driver", driver, "system", "reset", "--force"], env=env, timeout=600
        )
        if walk_file.is_file():
            subprocess.run(["rm", "-rf", walk_file.read_text()], check=False)
