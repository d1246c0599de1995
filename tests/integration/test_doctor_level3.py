"""doctor --level 3 on a real local multi-raylet Ray cluster (CPU, gloo): one node is made slow for real (its
raylet and every worker under it run a fifth of the time: stopped 40 ms of every 50, as a node with a
throttled CPU would), the cross-node all_reduce misses its bar, and the culprit search must name that node,
first in the verdict. A duty cycle, unlike a competing busy loop, slows that node by the same factor
whatever else the machine is doing, so the verdict does not depend on the load of the test machine."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import jsonschema
import pytest
from test_doctor_cluster import RAY_ENV, Cluster, descendants, running_cluster

from rocmstack.doctor.report import render_cluster_table, render_junit, render_markdown

SCHEMA = Path(__file__).resolve().parents[2] / "rocmstack" / "doctor" / "schema.json"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


class StarvedCluster(Cluster):
    def add_labelled(self, name: str, alive_after: int) -> tuple[subprocess.Popen, str]:
        proc = self.add_node(name, alive_after)
        port = next(str(a).split("=")[1] for a in proc.args if str(a).startswith("--node-manager-port="))
        return proc, port


def _throttle(root: int, stop: threading.Event, run_s: float = 0.01, stopped_s: float = 0.04) -> None:
    """Run the node's processes (found afresh each cycle: workers start later) a fifth of the time; always
    leave them running."""
    while not stop.is_set():
        pids = [root, *descendants(root)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        time.sleep(stopped_s)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        time.sleep(run_s)


@pytest.fixture(scope="module")
def starved():
    root = Path(tempfile.mkdtemp(prefix="rd3", dir="/tmp"))
    c = StarvedCluster(root)
    hog = None
    try:
        c.start_head()
        c.add_node("w1", 2)
        proc, port = c.add_labelled("slow", 3)
        stop = threading.Event()
        hog = threading.Thread(target=_throttle, args=(proc.pid, stop), daemon=True)
        hog.start()
        yield c, port
    finally:
        if hog is not None:
            stop.set()
            hog.join(timeout=10)
        c.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_the_starved_node_is_named(starved, tmp_path):
    cluster, slow_port = starved
    bars = tmp_path / "bars.yaml"
    bars.write_text(
        "collectives:\n"
        "  - gpu: cpu\n    gpus: 3\n    nodes: 3\n    op: all_reduce\n    bytes: 32MiB\n    min_busbw: 1000\n"
        "    source: a bar no CPU reaches, so that the culprit search runs\n"
    )
    junit = tmp_path / "doctor.xml"
    t0 = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable, "-m", "rocmstack", "doctor", "--ray-address", cluster.address, "--level", "3",
            "--only", "cluster-collectives,cluster-consistency", "--collective", "all_reduce",
            "--sizes", "1M..1M", "--iters", "5", "--bars", str(bars), "--json", "--junit", str(junit),
            "--cluster-timeout", "400",
        ],
        capture_output=True, text=True, env=RAY_ENV, timeout=800,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    jsonschema.validate(report, json.loads(SCHEMA.read_text()))  # the published report schema
    assert "culprit" in (report["crossnode"] or {}), (report["crossnode"], report["cluster_checks"])
    checks = {c["id"]: c for c in report["cluster_checks"]}
    assert checks["cluster-consistency"]["status"] == "pass"
    coll = checks["cluster-collectives"]
    culprit = report["crossnode"]["culprit"]
    slow_label = culprit["node"]
    assert slow_label and slow_label.endswith(f":{slow_port}"), (culprit, slow_port, proc.stderr[-2000:])
    assert coll["status"] == "fail" and coll["summary"].startswith(f"culprit: node {slow_label}")
    assert report["verdict"].startswith(f"NOT READY: cluster-collectives: culprit: node {slow_label}")
    assert '<testsuite name="doctor.cluster"' in junit.read_text()
    assert "culprit: node" in render_markdown(report) and render_junit(report).count("<testsuite ") == 4
    from rich.console import Console

    console = Console(record=True, width=200)
    render_cluster_table(report, console)
    text = console.export_text()
    out = Path(__file__).resolve().parents[2] / "docs" / "evidence" / "doctor-level3-cpu-cluster"
    if os.environ.get("ROCMSTACK_RECORD_EVIDENCE") == "1":  # docs/doctor-levels.md quotes a recorded run
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.txt").write_text(text + f"\n({time.monotonic() - t0:.0f} s wall)\n")
        (out / "report.json").write_text(proc.stdout)


@pytest.fixture(scope="module")
def pair():
    with running_cluster("rd2", 1) as c:
        yield c


def _why(proc: subprocess.CompletedProcess) -> str:
    """Each node's state and error first: the full report is long and its tail never holds them."""
    try:
        nodes = json.loads(proc.stdout)["nodes"]
    except (ValueError, KeyError):
        return proc.stderr[-3000:] + proc.stdout[-3000:]
    states = [f"{n['label']}: {n['state']} {n['error'] or ''}" for n in nodes]
    return "\n".join([*states, proc.stderr[-3000:]])


def test_level3_runs_level2_on_every_node(pair):
    """Each node's collectives and weight-sync actors run on that node (pinned by its node id), then the
    collectives across nodes: one command, one report."""
    level2 = "collective-bandwidth,weight-sync-ipc,weight-sync-broadcast"
    proc = subprocess.run(
        [
            sys.executable, "-m", "rocmstack", "doctor", "--ray-address", pair.address, "--level", "3",
            "--only", f"{level2},cluster-collectives,cluster-consistency", "--collective", "all_reduce",
            "--sizes", "1M..1M", "--iters", "3", "--sync-repeats", "1", "--sync-bytes", "16M", "--json",
            "--cluster-timeout", "400",
        ],
        capture_output=True, text=True, env=RAY_ENV, timeout=800,
    )  # fmt: skip
    assert proc.returncode == 0, _why(proc)
    report = json.loads(proc.stdout)
    jsonschema.validate(report, json.loads(SCHEMA.read_text()))
    assert len(report["nodes"]) == 2
    for node in report["nodes"]:
        status = {c["id"]: c["status"] for c in node["report"]["checks"]}
        assert status == dict.fromkeys(level2.split(","), "pass"), (node["label"], node["report"]["checks"])
        active = node["report"]["active"]
        assert active["node_id"] == node["node_id"]
        assert {r["node_id"] for r in active["ranks_info"]} == {node["node_id"]}  # not packed elsewhere
        assert active["collectives"]["ranks"] == 2 and active["collectives"]["backend"] == "gloo"
        assert active["weight_sync"]["rounds"][0]["split"]["ok"]
    checks = {c["id"]: c["status"] for c in report["cluster_checks"]}
    assert checks == {"cluster-collectives": "pass", "cluster-consistency": "pass"}
    assert report["crossnode"]["ranks"] == 2 and report["crossnode"]["rows"]
    assert report["verdict"].startswith("READY: 2 node(s) pass")
