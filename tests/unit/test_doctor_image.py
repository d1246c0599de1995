"""lock-drift and patches-applied read the image contract; both skip outside an image."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot

from rocmstack.doctor.checks.image import applied_patch_ids, lock_drift, patches_applied
from rocmstack.doctor.model import DoctorOptions
from rocmstack.status import Status

LOCK = {
    "schema": 1,
    "recipe": "verl-0.9.0-rocm10",
    "render_hash": "ab" * 32,
    "gpu_archs": ["gfx942", "gfx950"],
    "base": {"image": "rocm/primus:v26.7", "rocm": "7.14", "python": "3.12", "torch": "2.12.0"},
    "components": {
        "ray": {"source": "pypi", "package": "ray", "version": "2.58.0", "url": None, "ref": None},
        "vllm": {
            "source": "git",
            "package": "vllm",
            "version": None,
            "url": "https://github.com/vllm-project/vllm",
            "ref": "v0.27.0",
        },
        "aiter": {"source": "base", "package": None, "version": None, "url": None, "ref": None},
    },
    "patches": ["rtld-local", "amdsmi-install"],
    "env": {},
    "rocmstack": {"version": "0.1.0", "revision": "x"},
}
DISTS = {"ray": "2.58.0", "vllm": "0.27.0+rocm714", "torch": "2.12.0+rocm7.14"}


def image(tmp_path, lock=LOCK, markers=("rtld-local", "amdsmi-install")):
    (tmp_path / "lock.json").write_text(json.dumps(lock))
    (tmp_path / "patches/applied").mkdir(parents=True)
    for m in markers:
        (tmp_path / f"patches/applied/{m}.json").write_text(
            json.dumps({"id": m, "component": "c", "target": "t"})
        )
    return DoctorOptions(image_root=tmp_path)


def test_outside_an_image_both_skip(tmp_path):
    opts = DoctorOptions(image_root=tmp_path)
    assert lock_drift(make_snapshot(), opts).status == Status.SKIP
    assert patches_applied(make_snapshot(), opts).status == Status.SKIP
    assert applied_patch_ids(opts) == set()


def test_root_from_env(tmp_path):
    image(tmp_path)
    opts = DoctorOptions(env={"ROCMSTACK_ROOT": str(tmp_path)})
    assert lock_drift(make_snapshot(dists=DISTS), opts).status == Status.PASS


def test_matching_image(tmp_path):
    opts = image(tmp_path)
    assert lock_drift(make_snapshot(dists=DISTS), opts).status == Status.PASS
    assert patches_applied(make_snapshot(), opts).status == Status.PASS


def test_drift_missing_and_python(tmp_path):
    opts = image(tmp_path)
    snap = make_snapshot(dists={"ray": "2.60.0", "torch": "2.13.0"}, site={"python": "3.11.7"})
    result = lock_drift(snap, opts)
    assert result.status == Status.FAIL
    text = "\n".join(result.details)
    assert "ray 2.60.0 installed, lock says 2.58.0" in text
    assert "vllm not installed" in text
    assert "torch 2.13.0 installed, lock says 2.12.0" in text
    assert "python 3.11.7, lock says 3.12" in text


def test_markers(tmp_path):
    opts = image(tmp_path, markers=("rtld-local",))
    result = patches_applied(make_snapshot(), opts)
    assert result.status == Status.FAIL and "amdsmi-install" in result.summary
    (tmp_path / "patches/applied/hand-made.json").write_text(
        json.dumps({"id": "hand-made", "component": "c", "target": "t"})
    )
    (tmp_path / "patches/applied/amdsmi-install.json").write_text(
        json.dumps({"id": "amdsmi-install", "component": "c", "target": "t"})
    )
    assert patches_applied(make_snapshot(), opts).status == Status.WARN
    (tmp_path / "patches/applied/broken.json").write_text("{not json")
    assert patches_applied(make_snapshot(), opts).status == Status.FAIL


def test_unreadable_lock(tmp_path):
    (tmp_path / "lock.json").write_text('{"schema": 2}')
    opts = DoctorOptions(image_root=tmp_path)
    assert lock_drift(make_snapshot(), opts).status == Status.FAIL
    assert "schema" in lock_drift(make_snapshot(), opts).summary
