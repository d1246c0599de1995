"""False failures kept by the code: the healthy configurations of tests/fixtures/recall/healthy.yaml through
every level-1 check of the real doctor (a fake AMD node that is otherwise healthy, its probes run for real),
every advisory and every error signature. None may fail."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rocmstack.advisories.load import load_all
from rocmstack.advisories.match import Inventory, match
from rocmstack.doctor.runner import run_doctor
from tests.fixtures.doctor.doctor_fakes import FakeNode

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = yaml.safe_load((ROOT / "tests/fixtures/recall/healthy.yaml").read_text())["configurations"]
HOST_BOUND = {"nofile-limit"}  # this machine's own rlimit (tests/integration/test_doctor_faults.py)


@pytest.mark.parametrize("config", CONFIGS, ids=[c["name"][:40] for c in CONFIGS])
def test_a_healthy_configuration_fails_nothing(tmp_path, config):
    versions = {k: str(v) for k, v in (config.get("versions") or {}).items()}
    env = {k: str(v) for k, v in (config.get("env") or {}).items()}
    inv = Inventory(config["name"], versions, frozenset(config.get("archs") or ()), env)
    fails = [m.advisory.id for m in match(load_all(), inv) if m.advisory.versions_alone == "fail"]
    assert fails == [], fails

    node = FakeNode(tmp_path / "node", gpus=config.get("gpus", 1))
    node.env.update(env)
    for dist, version in (config.get("dists") or {}).items():
        node.add_dist(f"{dist}-{version}.dist-info")
    if config.get("vendor_tools") is False:  # neither the fake tools nor this machine's own
        for tool in ("rocm-smi", "amd-smi"):
            (node.bin / tool).unlink()
        node.env["PATH"] = str(node.bin)
    if config.get("partition"):
        card = node.sys / "class/drm/card0/device"
        card.mkdir(parents=True)
        (card / "current_compute_partition").write_text(config["partition"] + "\n")
    report = run_doctor(node.options(expect_gpus=config.get("expect_gpus", config.get("gpus", 1))))
    bad = {c["id"]: c["summary"] for c in report["checks"] if c["status"] in ("fail", "error")}
    assert not {k: v for k, v in bad.items() if k not in HOST_BOUND}, bad
