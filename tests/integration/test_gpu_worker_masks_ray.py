"""Visibility records of real Ray actors on a private local Ray instance (CPU torch, Ray told of two GPUs
it cannot open): the hook reaches actors through PYTHONPATH in their runtime_env, or through the job's
worker_process_setup_hook without it (Ray honours that hook only in the job's runtime_env, ray.init's or a
job submission's: ray/_private/worker.py calls upload_worker_process_setup_hook_if_needed on the job config
alone), and the judge names the actor whose masks are wrong."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from rocmstack.gpu.actors import stop_actors
from rocmstack.gpu.ray_local import private_ray
from rocmstack.gpu.worker_masks import MASKS_DIR_ENV, hook_dir, judge, ray_runtime_env, read_records

ray = pytest.importorskip("ray")
pytest.importorskip("torch")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _peer_class() -> type:
    """Made here so Ray ships it by value: its workers cannot import a test module."""

    class Peer:
        def __init__(self) -> None:
            import torch  # a GPU worker's first step: its framework imports torch and counts devices

            self.count = torch.cuda.device_count()

        def facts(self) -> dict:
            import sys

            hook = sys.modules.get("sitecustomize")
            return {
                "pid": os.getpid(),
                "count": self.count,
                "sitecustomize": getattr(hook, "__file__", None),
                "masks": {k: v for k, v in os.environ.items() if k.endswith("_VISIBLE_DEVICES")},
            }

    return Peer


def _folder(prefix: str):
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def job_masks_dir():
    yield from _folder("rwm-job-")


@pytest.fixture(scope="module")
def cluster(job_masks_dir):
    """The job's runtime_env carries the setup hook and a masks folder of its own, as a launcher that
    cannot change the workers' PYTHONPATH would give it."""
    with private_ray(
        "rwm-", num_cpus=2, num_gpus=2, log_to_driver=False, runtime_env=ray_runtime_env(job_masks_dir)
    ):
        yield


@pytest.fixture
def masks_dir():
    yield from _folder("rwm-masks-")


def _start(name: str, runtime_env: dict | None = None, **options):
    """An actor named ``name``; without ``runtime_env`` it runs in the job's."""
    if runtime_env is not None:
        options["runtime_env"] = runtime_env
    return ray.remote(_peer_class()).options(name=name, num_cpus=0, max_restarts=0, **options).remote()


def test_the_judge_names_the_actor_with_only_cuda_visible_devices(cluster, masks_dir):
    site = {"PYTHONPATH": str(hook_dir()), MASKS_DIR_ENV: str(masks_dir)}
    masks = {
        "good-0": {"HIP_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "0"},
        "good-1": {"HIP_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "1"},
        "bad": {"CUDA_VISIBLE_DEVICES": "1"},
    }
    actors = {name: _start(name, {"env_vars": {**site, **m}}) for name, m in masks.items()}
    try:
        facts = dict(
            zip(actors, ray.get([a.facts.remote() for a in actors.values()], timeout=300), strict=True)
        )
    finally:
        stop_actors(list(actors.values()))
    for name, f in facts.items():
        assert f["sitecustomize"] == str(hook_dir() / "sitecustomize.py")
        assert f["masks"] == masks[name]

    records = read_records(masks_dir).records
    by_pid = {r.pid: r for r in records}
    for name, f in facts.items():
        rec = by_pid[f["pid"]]
        assert rec.ray is not None and rec.ray["actor_name"] == name and rec.ray["class"] == "Peer"
        assert rec.count == 0 == f["count"]  # CPU torch: recorded as it is
    verdict = judge(records, vendor="amd", allocation=0)
    assert verdict.judged == 3
    (m,) = verdict.mismatches
    assert m.pid == facts["bad"]["pid"]
    assert m.line.startswith("Ray actor bad (Peer, pid ")
    assert "CUDA_VISIBLE_DEVICES=1 is set without HIP_VISIBLE_DEVICES" in m.line


def test_the_setup_hook_records_an_actor_without_pythonpath_and_its_missing_gpu_is_named(
    cluster, job_masks_dir
):
    """Ray gives the actor one of its two GPUs and masks it; CPU torch counts none: the count rule fires,
    in the doctor's words. No sitecustomize here: the job's setup hook installed the recorder."""
    actor = _start("trainer-0", num_gpus=1)
    try:
        facts = ray.get(actor.facts.remote(), timeout=300)
    finally:
        stop_actors([actor])
    assert facts["sitecustomize"] != str(hook_dir() / "sitecustomize.py")

    rec = next(r for r in read_records(job_masks_dir).records if r.pid == facts["pid"])
    assert rec.ray is not None and rec.ray["actor_name"] == "trainer-0"
    (gpu_id,) = rec.ray["gpu_ids"]
    # Ray on a machine without GPUs takes them for NVIDIA's and sets CUDA_VISIBLE_DEVICES to its id
    assert rec.runtime_masks == {"CUDA_VISIBLE_DEVICES": gpu_id} == facts["masks"]
    (m,) = judge([rec], vendor="nvidia", allocation=2).mismatches
    assert m.rule == "count"
    assert m.line.startswith("Ray actor trainer-0 (Peer, pid ")
    assert f"Ray gave it GPU {gpu_id} but torch sees 0 device(s)" in m.line
