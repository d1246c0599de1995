"""The layout probes against real Ray on CPU. A Ray node that declares GPUs no runtime here can open: Ray
gives its actors device masks all the same, torch in them sees nothing, and actor-masks must fail naming
that, while weight-sync-masks must not claim a GPU IPC it never made (a CPU tensor would cross instead).
The gloo side (communicator churn, many IPC handles) runs in tests/integration/test_doctor_level2.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_doctor_cluster import RAY_ENV, running_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def gpu_node():
    with running_cluster("rdg", 0, gpus=2) as c:
        yield c


def test_ray_gpus_torch_cannot_see_fail_actor_masks(gpu_node):
    proc = subprocess.run(
        [
            sys.executable, "-m", "rocmstack", "doctor", "--level", "2", "--ray-address", gpu_node.address,
            "--only", "actor-masks,weight-sync-masks", "--json",
        ],
        capture_output=True, text=True, env=RAY_ENV, timeout=500,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    (node,) = json.loads(proc.stdout)["nodes"]
    checks = {c["id"]: c for c in node["report"]["checks"]}
    masks = checks["actor-masks"]
    assert masks["status"] == "fail", masks
    text = " ".join(masks["details"])
    # Ray's own masks, observed inside the actors it started: one GPU id each, CUDA_VISIBLE_DEVICES set to it
    assert "Ray gave it GPU 0 but torch sees 0 device(s) (CUDA_VISIBLE_DEVICES=0)" in text
    assert "Ray gave it GPU 1 but torch sees 0 device(s) (CUDA_VISIBLE_DEVICES=1)" in text
    # the unmasked actors (RAY_EXPERIMENTAL_NOSET_*) got no mask from Ray
    assert "unmasked actor (RAY_EXPERIMENTAL_NOSET_*) sees 0 of this node's 2 GPU(s) (no mask)" in text
    ipc = checks["weight-sync-masks"]
    assert ipc["status"] == "skip" and "see no GPU" in ipc["summary"], ipc
