"""Cluster mode against a real local Ray cluster: a head and worker raylets started with `ray start --block`
on one machine, CPU-only, each on its own ports and temp dir. Cleanup kills exactly the processes these
tests started (never `ray stop`).

One worker node gets a vendor tool that hangs; once that node's doctor task is inside it, the test kills the
node: the doctor must report it as died, finish the others, and not wait for the dead one."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocmstack.doctor.report import render_cluster_table, render_junit, render_markdown

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]
FAKE_TOOL = Path(__file__).resolve().parents[1] / "fixtures" / "doctor" / "bin" / "fake_tool.py"
RAY = str(Path(sys.executable).with_name("ray"))
# Ray 2.60 turns token auth on by default and reads ~/.ray/auth_token, which other Ray users of this machine
# share; this throw-away cluster opts out so it depends on no file outside its temp dirs. Ray's processes give
# up on a GCS that has not answered for 60 s ("Timed out while waiting for GCS to become available"): on a
# loaded 2-core CI runner (load 12-17) the test cluster's own GCS answers later than that, so its daemons and
# the doctors run against it wait as long as the tests do (what is under test is the doctor, not Ray's start).
GCS_PATIENCE_S = "600"
RAY_ENV = {
    **os.environ,
    "RAY_AUTH_MODE": "disabled",
    "RAY_gcs_rpc_server_connect_timeout_s": GCS_PATIENCE_S,
    "RAY_gcs_rpc_server_reconnect_timeout_s": GCS_PATIENCE_S,
}
SYSTEM_CONFIG = json.dumps(
    {"health_check_period_ms": 1000, "health_check_failure_threshold": 3, "health_check_initial_delay_ms": 0}
)


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def worker_port_range(width: int = 12) -> tuple[int, int]:
    for base in range(23000, 60000, 97):
        socks = []
        try:
            for p in range(base, base + width):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base, base + width - 1
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free worker port range")


def descendants(pid: int) -> list[int]:
    """Every descendant of `pid`, plus processes left in its session after their parent died (a failed
    `ray start` leaves its raylet reparented to init but still in the session it started)."""
    children: dict[int, list[int]] = {}
    same_session = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        children.setdefault(int(fields[1]), []).append(int(entry.name))
        if int(fields[3]) == pid and int(entry.name) != pid:
            same_session.append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out + [p for p in same_session if p not in out]


class Cluster:
    def __init__(self, root: Path, gpus: int = 0) -> None:
        self.root = root
        self.gpus = gpus  # GPUs each node declares to Ray (none exist here: Ray still masks its actors)
        self.procs: list[subprocess.Popen] = []
        self.taken: set[int] = set()
        self.gcs_port = self.ports(1)[0]
        self.used_ranges: list[tuple[int, int]] = []

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    def ports(self, n: int) -> list[int]:
        """N free ports, none handed out before to this cluster: the kernel hands a port just closed out
        again, and Ray refuses a node whose two components got the same one (seen in CI)."""
        while True:
            got = free_ports(n)
            if self.taken.isdisjoint(got):
                self.taken.update(got)
                return got

    def _node_args(self, name: str) -> list[str]:
        nm, om, al, ag, re_, me = self.ports(6)
        lo, hi = worker_port_range()
        while any(lo <= b and hi >= a for a, b in self.used_ranges):
            lo, hi = lo + 97, hi + 97
        self.used_ranges.append((lo, hi))
        temp = self.root / name
        temp.mkdir()
        return [
            "--block",
            "--node-ip-address=127.0.0.1",
            "--num-cpus=1",
            f"--num-gpus={self.gpus}",
            f"--temp-dir={temp}",
            f"--node-manager-port={nm}",
            f"--object-manager-port={om}",
            f"--min-worker-port={lo}",
            f"--max-worker-port={hi}",
            f"--dashboard-agent-listen-port={al}",
            f"--dashboard-agent-grpc-port={ag}",
            f"--runtime-env-agent-port={re_}",
            f"--metrics-export-port={me}",
            "--disable-usage-stats",
        ]

    def start(self, name: str, *, head: bool = False, env: dict | None = None) -> subprocess.Popen:
        args = [RAY, "start", *self._node_args(name)]
        if head:
            args += [
                "--head",
                f"--port={self.gcs_port}",
                "--include-dashboard=false",
                f"--ray-client-server-port={self.ports(1)[0]}",
                f"--system-config={SYSTEM_CONFIG}",
            ]
        else:
            args += [f"--address={self.address}"]
        log = open(self.root / f"{name}.log", "w")  # noqa: SIM115  closed with the process
        proc = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, env={**RAY_ENV, **(env or {})}, start_new_session=True
        )
        self.procs.append(proc)
        return proc

    def start_head(self, attempts: int = 3) -> subprocess.Popen:
        """Start the head and wait until it is alive. A `ray start --head` that exits first (its GCS did not
        answer in Ray's own start-up time, on a loaded runner) is started again on a fresh GCS port."""
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                self.gcs_port = self.ports(1)[0]
            proc = self.start("head" if attempt == 1 else f"head-retry{attempt}", head=True)
            if self.wait_alive(1, node=proc):
                return proc
            self.kill_tree(proc)
            self.procs.remove(proc)
        raise AssertionError(f"the head did not start after {attempts} attempts:\n{self.logs()}")

    def add_node(
        self, name: str, alive_after: int, *, env: dict | None = None, attempts: int = 3
    ) -> subprocess.Popen:
        """Start a worker node and wait until the cluster has `alive_after` alive nodes.

        `ray start` gives a joining raylet a hard-coded 30 s to register with the GCS; on a loaded 2-core CI
        runner that has expired (CI run of 2026-11-29: "Failed to get node info ... Deadline Exceeded"). A
        node whose `ray start` exits before it is alive is started again on fresh ports; what is under test
        is the doctor, not Ray's start-up under load."""
        for attempt in range(1, attempts + 1):
            proc = self.start(name if attempt == 1 else f"{name}-retry{attempt}", env=env)
            if self.wait_alive(alive_after, node=proc):
                return proc
            self.kill_tree(proc)
            self.procs.remove(proc)
        raise AssertionError(f"node {name} did not join after {attempts} attempts:\n{self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted(self.root.glob("*.log")))

    def wait_alive(self, n: int, timeout: float = 120, node: subprocess.Popen | None = None) -> bool:
        """True once `n` nodes are alive; False if `node` (a `ray start --block`) exits first."""
        code = (
            "import ray, sys, time\n"
            "ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False)\n"
            "t = time.time()\n"
            "while time.time() - t < float(sys.argv[3]):\n"
            "    if sum(x['Alive'] for x in ray.nodes()) >= int(sys.argv[2]): sys.exit(0)\n"
            "    time.sleep(0.5)\n"
            "sys.exit(1)\n"
        )
        waiter = subprocess.Popen(
            [sys.executable, "-c", code, self.address, str(n), str(timeout)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=RAY_ENV,
        )
        deadline = time.monotonic() + timeout + 60
        while waiter.poll() is None:
            if node is not None and node.poll() is not None:
                waiter.kill()
                waiter.communicate()
                return False
            if time.monotonic() > deadline:
                waiter.kill()
                break
            time.sleep(0.2)
        _, err = waiter.communicate()
        if waiter.returncode != 0:
            raise AssertionError(f"cluster did not reach {n} alive nodes: {err[-2000:]}\n{self.logs()}")
        return True

    @staticmethod
    def kill_tree(proc: subprocess.Popen) -> None:
        """SIGKILL `proc` and every descendant (raylet, agents, workers, tools started in new sessions)."""
        family = [proc.pid, *descendants(proc.pid)]
        for pid in family:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            self.kill_tree(proc)


@contextlib.contextmanager
def running_cluster(prefix: str, workers: int, gpus: int = 0) -> Iterator[Cluster]:
    """A head and ``workers`` worker nodes, alive; every process and file gone afterwards."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))  # short: Ray's unix socket paths must fit
    c = Cluster(root, gpus)
    try:
        c.start_head()
        for i in range(1, workers + 1):
            c.add_node(f"w{i}", i + 1)
        yield c
    finally:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster():
    with running_cluster("rdc", 2) as c:
        yield c


def doctor(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "rocmstack", "doctor", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=RAY_ENV,
        **kw,
    )


def test_every_node_reports(cluster):
    proc = doctor("--ray-address", cluster.address, "--fast", "--json", "--expect-gpus", "0")  # CPU nodes
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report["mode"] == "cluster" and report["passed"]
    assert len(report["nodes"]) == 3
    assert {n["state"] for n in report["nodes"]} == {"passed"}
    assert len({n["label"] for n in report["nodes"]}) == 3
    for node in report["nodes"]:
        ids = [c["id"] for c in node["report"]["checks"]]
        assert ids == report["check_ids"]
    from rich.console import Console

    console = Console(record=True, width=250)
    render_cluster_table(report, console)
    text = console.export_text()
    assert "READY: 3 node(s) pass" in text and "gpu-count" in text
    assert render_markdown(report).count("| passed |") == 3
    assert render_junit(report).count("<testsuite ") == 3


def test_a_node_dying_mid_run_is_reported(cluster, tmp_path):
    tools = tmp_path / "bin"
    tools.mkdir()
    shutil.copy(FAKE_TOOL, tools / "rocm-smi")
    (tools / "rocm-smi").chmod(0o755)
    started = tmp_path / "rocm-smi.started"
    doomed = cluster.add_node(
        "doomed",
        4,
        env={
            "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}",
            "FAKE_ROCM_SMI_SLEEP": "300",
            "FAKE_ROCM_SMI_STARTED": str(started),
        },
    )
    t0 = time.monotonic()
    proc = doctor(
        "--ray-address", cluster.address, "--fast", "--json", "--expect-gpus", "0", "--cluster-timeout", "150"
    )
    try:
        deadline = time.monotonic() + 150
        while not started.exists():  # the doomed node's checks are now inside the hanging tool
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the doomed node never reached its tool"
            time.sleep(0.2)
        cluster.kill_tree(doomed)
        out, err = proc.communicate(timeout=150)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    report = json.loads(out)
    states = sorted(n["state"] for n in report["nodes"])
    assert states == ["died", "passed", "passed", "passed"], report["nodes"]
    dead = next(n for n in report["nodes"] if n["state"] == "died")
    assert dead["report"] is None and dead["error"]
    assert "died" in report["verdict"]
    assert time.monotonic() - t0 < 150  # reported, not waited on until the cluster timeout
