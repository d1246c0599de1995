"""doctor --level 2 on a node without GPUs: real Ray (a private local instance), real gloo collectives, real
weight-sync actors in a placement group, through the CLI with --only/--json/--junit."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

SCHEMA = Path(__file__).resolve().parents[2] / "rocmstack" / "doctor" / "schema.json"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled"}
LEVEL2 = (
    "collective-bandwidth,collective-transport,weight-sync-ipc,weight-sync-broadcast,gpu-hbm-bandwidth,gpu-gemm,"
    "communicator-churn,ipc-many-handles,actor-masks"
)


def doctor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rocmstack", "doctor", *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=380,
    )


def test_level2_on_cpu(tmp_path):
    baseline = tmp_path / "baseline.json"
    junit = tmp_path / "doctor.xml"
    proc = doctor(
        "--level", "2", "--only", LEVEL2, "--sizes", "1M..2M", "--sync-repeats", "2", "--sync-bytes", "16M",
        "--comm-inits", "2", "--ipc-handles", "4",
        "--busbw-baseline", str(baseline), "--save-busbw-baseline", str(baseline), "--json", "--junit", str(junit),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    jsonschema.validate(report, json.loads(SCHEMA.read_text()))  # the published report schema
    status = {c["id"]: c["status"] for c in report["checks"]}
    assert status == {
        "collective-bandwidth": "pass",
        "collective-transport": "skip",
        "weight-sync-ipc": "pass",
        "weight-sync-broadcast": "pass",
        "gpu-hbm-bandwidth": "skip",
        "gpu-gemm": "skip",
        "communicator-churn": "pass",
        "ipc-many-handles": "pass",
        "actor-masks": "skip",  # no GPU: Ray sets no masks (tests/integration/test_doctor_layouts.py has them)
    }
    churn = report["active"]["communicator_churn"]
    assert len(churn["rounds"]) == 2 and churn["backend"] == ["gloo"] and churn["subset"] == 1
    many = report["active"]["ipc_many_handles"]
    assert [g["opened"] for g in many["gpus"]] == [4, 4] and many["rounds"] == 5
    exporters = [g["exporter_pid"] for g in many["gpus"]]
    assert not [p for pid in exporters for p in Path("/dev/shm").glob(f"torch_{pid}_*")]
    coll = report["active"]["collectives"]
    assert coll["backend"] == "gloo" and coll["ranks"] == 2
    assert {(r["op"], r["nbytes"]) for r in coll["rows"]} == {
        (op, n)
        for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")
        for n in (1 << 20, 2 << 20)
    }
    assert all(r["busbw"] > 0 for r in coll["rows"])
    sync = report["active"]["weight_sync"]["rounds"][0]
    assert [e["ok"] for e in sync["colocated"]] == [True, True] and sync["split"]["ok"]
    assert sync["split"]["rollout"]["nbytes"] == 16 << 20
    # The exports' shared-memory files (RAM) are gone with the probe's actors: they were left behind once.
    trainers = {e["trainer"]["pid"] for e in sync["colocated"]}
    assert not [p for pid in trainers for p in Path("/dev/shm").glob(f"torch_{pid}_*")]
    saved = json.loads(baseline.read_text())["busbw"]
    assert len(saved) == 10
    assert junit.read_text().count("<testcase ") == 9
    # Said before it starts: what level 2 will run; then each start-up, with the time left from the second on.
    said = [line for line in proc.stderr.splitlines() if line.startswith("doctor: level 2")]
    assert said[0] == (
        "doctor: level 2: a private Ray start, 5 collective(s) x 2 size(s), 2 weight-sync start-up(s), "
        "2 communicator init(s), 4 IPC handles per GPU; "
        "without GPUs, the whole of level 2 took 6 min on a loaded 2-core VM"
    )
    rounds = [line for line in said if "weight sync start-up" in line]
    assert rounds[0] == "doctor: level 2: weight sync start-up 1/2"
    assert re.fullmatch(r"doctor: level 2: weight sync start-up 2/2 \(about \d+ s left\)", rounds[1])
    assert len(report["active"]["weight_sync"]["rounds"]) == 2


def test_a_level2_check_needs_level2():
    proc = doctor("--only", "gpu-gemm")
    assert proc.returncode == 2 and "runs at --level 2" in proc.stderr and "Traceback" not in proc.stderr


def test_bad_sizes_is_one_line():
    proc = doctor("--level", "2", "--sizes", "1M-1G")
    assert proc.returncode == 2 and "--sizes" in proc.stderr and "Traceback" not in proc.stderr


def test_level3_needs_a_cluster_and_a_bad_bars_file_is_one_line(tmp_path):
    proc = doctor("--level", "3")
    assert proc.returncode == 2 and "--ray-address" in proc.stderr and "Traceback" not in proc.stderr
    bad = tmp_path / "bars.yaml"
    bad.write_text("collectives:\n  - {gpu: X, gpus: 2, op: allreduce, bytes: 1G, min_busbw: 1, source: s}\n")
    proc = doctor("--level", "2", "--bars", str(bad))
    assert (
        proc.returncode == 2
        and "op = 'allreduce' is unknown" in proc.stderr
        and "Traceback" not in proc.stderr
    )


@pytest.mark.engine
def test_custom_allreduce_on_two_cpu_ranks_of_the_vllm_build():
    """vLLM's CPU shared-memory all-reduce against gloo, from the level-2 driver (a private Ray instance)."""
    from rocmstack.doctor import ActiveOptions, DoctorOptions, run_doctor
    from tests.conftest import VLLM_PYTHON

    if not VLLM_PYTHON.exists():
        pytest.skip(f"no vLLM CPU build at {VLLM_PYTHON}")
    opts = DoctorOptions(
        level=2,
        only=("custom-allreduce",),
        python=str(VLLM_PYTHON),
        active=ActiveOptions(cpu_ranks=2, allreduce_repeats=2),
        env=ENV,
    )
    report = run_doctor(opts)
    check = next(c for c in report["checks"] if c["id"] == "custom-allreduce")
    assert check["status"] == "pass", check
    assert "shm_allreduce matches the reference on 2 ranks in 12 comparisons" in check["summary"]


def test_env_lint_counts_the_users_variables_not_the_ones_rays_start_sets():
    # Ray's start sets RAY_AUTH_MODE, RAY_CLIENT_MODE and RAY_USAGE_STATS_ENABLED in the doctor's process.
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "NCCL_", "HSA_", "HIP_", "VLLM_"))
    }

    def lint(level: str) -> str:
        r = subprocess.run(
            [sys.executable, "-m", "rocmstack", "doctor", "--level", level, "--expect-gpus", "0", "--json",
             "--only", "env-unknown-vars" + (",gpu-hbm-bandwidth" if level == "2" else "")],
            capture_output=True, text=True, env=env, timeout=380,
        )  # fmt: skip
        assert r.returncode in (0, 1), r.stderr
        return next(c["summary"] for c in json.loads(r.stdout)["checks"] if c["id"] == "env-unknown-vars")

    assert lint("2") == lint("1")
