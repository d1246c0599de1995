"""Cluster mode: the same checks on every alive node of a Ray cluster, one task pinned per node.

Each task asks for no CPU and no GPU (so it runs even on a full cluster and never changes what the node's
GPUs look like), is never retried, and is waited for with one deadline. While waiting, node liveness is
polled: a node that dies mid-run is reported as died at once instead of being waited on. At --level 2 and 3
the task runs the node's level-2 probes too: their actors ask for the node's GPUs and are placed on that node
(rocmstack.doctor.collect.active pins them by node id), all nodes at once."""

from __future__ import annotations

import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rocmstack.doctor.checks import BY_ID
from rocmstack.doctor.collect.collectors import needs_of
from rocmstack.doctor.collect.crossnode import PROVIDES as CROSSNODE_PROVIDES
from rocmstack.doctor.collect.crossnode import run_crossnode
from rocmstack.doctor.model import SCHEMA, DoctorOptions
from rocmstack.doctor.report import ClusterReport, upgrade
from rocmstack.doctor.runner import node_facts, run_check, run_doctor, select_checks
from rocmstack.errors import EngineError

DEATH_GRACE_S = 15.0
PORTABLE = (
    "fast", "deep", "expect_gpus", "only", "skip", "tensor_parallel", "probe_timeout", "tool_timeout",
    # level 2 on every node (--level 2 and 3)
    "level", "collectives", "min_bytes", "max_bytes", "warmup", "iters", "sync_repeats", "sync_bytes",
    "ipc_bytes", "cpu_ranks", "hbm_bytes", "gemm_n", "active_timeout", "comm_inits", "ipc_handles",
    "ipc_handle_bytes", "ipc_rounds", "memory_share",
)  # fmt: skip


def _node_doctor(payload: dict) -> dict:
    """Runs on the node (a Ray task): the node's own environment, sysfs and tools."""

    payload = dict(payload)
    facts_only = payload.pop("facts_only", False)
    bars_text = payload.pop("bars_text", None)
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in payload.items()}
    if facts_only:  # --only named cluster checks alone: the node contributes its facts
        opts = DoctorOptions.from_flat(**fields)
        return {
            "passed": True,
            "checks": [],
            "facts": node_facts(opts),
            "node_hostname": socket.gethostname(),
        }
    if bars_text is None:
        report = run_doctor(DoctorOptions.from_flat(**fields))
    else:  # the driver's --bars file, which this node may not have
        with tempfile.TemporaryDirectory(prefix="rocmstack-doctor-") as tmp:
            fields["bars_file"] = Path(tmp) / "bars.yaml"
            fields["bars_file"].write_text(bars_text, encoding="utf-8")
            report = run_doctor(DoctorOptions.from_flat(**fields))
    report["node_hostname"] = socket.gethostname()
    return report


def _label(node: dict) -> str:
    return f"{node.get('NodeManagerAddress', '?')}:{node.get('NodeManagerPort', '?')}"


# The limit a cluster run gets by default: what its nodes' checks cost by costs.yaml (GPU figures, or the far
# larger CPU ones on a cluster without GPUs), twice over (several nodes may share a machine, a loaded node is
# slower than the measurements), plus the cross-node part; never less than MIN_CLUSTER_S.
MIN_CLUSTER_S = 180.0
CLUSTER_MARGIN = 2.0
CROSS_NODE_S = 60.0


def default_limit(opts: DoctorOptions, gpus: bool) -> float:
    """Seconds a cluster run of these options may take: it follows the probes the nodes will run."""
    from rocmstack.doctor.budget import Node, plan

    level = min(opts.level, 2)
    checks = [c for c in select_checks(opts.only, opts.skip, level) if c.scope == "node"]
    estimate = plan(checks, float("inf"), fast=opts.fast, node=Node(amd_hw=gpus, nvidia_hw=gpus)).estimate_s
    return max(MIN_CLUSTER_S, round(CLUSTER_MARGIN * estimate + CROSS_NODE_S))


def run_cluster(
    opts: DoctorOptions,
    address: str,
    *,
    timeout: float | None = None,
    progress: Callable[[str], None] = lambda _msg: None,
) -> dict:
    """``timeout``: the run's limit; None follows the probes chosen (``default_limit``)."""
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    except ImportError as exc:
        raise EngineError(
            f"--ray-address needs Ray in this environment ({exc})", fix="pip install 'ray[default]'"
        ) from None

    t0 = time.monotonic()
    _reachable(address)
    cluster_checks = [c for c in select_checks(opts.only, opts.skip, opts.level) if c.scope == "cluster"]
    payload = {k: (list(v) if isinstance(v, tuple) else v) for k, v in opts.flat().items() if k in PORTABLE}
    # Every node runs its own checks up to level 2 (level 3 is level 2 on every node plus what runs across
    # them); the cluster checks run once, here.
    payload["level"] = node_level = min(opts.level, 2)
    for key in ("only", "skip"):
        payload[key] = [i for i in payload[key] if BY_ID[i].scope == "node" and BY_ID[i].level <= node_level]
    if opts.only and not payload["only"]:
        payload["facts_only"] = True
    sent = dict(payload)
    if opts.active.bars_file is not None and node_level > 1:
        sent["bars_text"] = opts.active.bars_file.read_text(encoding="utf-8")  # checked readable by the CLI
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    except Exception as exc:  # ConnectionError, ValueError on a bad address, ...
        raise EngineError(
            f"cannot connect to the Ray cluster at {address!r}: {exc}",
            fix="give the head's GCS address (host:port) or 'auto' on a cluster node",
        ) from None
    try:
        alive = [n for n in ray.nodes() if n.get("Alive")]
        task = ray.remote(num_cpus=0, num_gpus=0, max_retries=0)(_node_doctor)
        pending: dict = {}
        nodes: dict[str, dict] = {}
        for n in alive:
            node_id = n["NodeID"]
            nodes[node_id] = {
                "node_id": node_id,
                "label": _label(n),
                "address": n.get("NodeManagerAddress"),
                "state": "running",
                "error": None,
                "report": None,
            }
            ref = task.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
            ).remote(sent)
            pending[ref] = node_id
        if timeout is None:
            timeout = default_limit(opts, float(ray.cluster_resources().get("GPU", 0)) > 0)
        progress(
            f"dispatched to {len(alive)} node(s)"
            + (": level 2 on each" if node_level > 1 else "")
            + f"; the run's limit is {timeout:.0f} s"
        )
        deadline = t0 + timeout
        last_poll = 0.0
        while pending and time.monotonic() < deadline:
            ready, _ = ray.wait(
                list(pending), num_returns=1, timeout=min(1.0, max(0.05, deadline - time.monotonic()))
            )
            for ref in ready:
                node = nodes[pending.pop(ref)]
                try:
                    # a node may run an earlier rocmstack: its report read in this schema
                    node["report"] = upgrade(ray.get(ref))
                    node["state"] = "passed" if node["report"].get("passed") else "failed"
                except Exception as exc:  # the task failed: its node died, its worker crashed, ...
                    # The owner can hear of the lost worker before the GCS marks the node dead: give the
                    # health check a few seconds to tell the two apart.
                    died = _dead_within(
                        ray, node["node_id"], min(DEATH_GRACE_S, max(0.0, deadline - time.monotonic()))
                    )
                    node["state"] = "died" if died else "error"
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                    node["error"] = f"{type(exc).__name__}: {first}"[:500]
                progress(f"{node['label']}: {node['state']}")
            if pending and time.monotonic() - last_poll > 1.0:
                last_poll = time.monotonic()
                alive_ids = _alive_ids(ray)
                dead = set() if alive_ids is None else set(pending.values()) - alive_ids
                for ref, nid in list(pending.items()):
                    if nid in dead:
                        del pending[ref]
                        ray.cancel(ref, force=False)
                        nodes[nid]["state"] = "died"
                        nodes[nid]["error"] = "the node left the cluster while its checks were running"
                        progress(f"{nodes[nid]['label']}: died")
        for nid in pending.values():
            nodes[nid]["state"] = "timeout"
            nodes[nid]["error"] = f"no answer within {timeout:.0f} s"
        crossnode = None
        if needs_of(cluster_checks) & CROSSNODE_PROVIDES:
            labels = {nid: n["label"] for nid, n in nodes.items() if n["state"] in ("passed", "failed")}
            crossnode = run_crossnode(opts, labels, progress)
    finally:
        ray.shutdown()
    ordered = sorted(nodes.values(), key=lambda n: n["label"])
    data = {"nodes": ordered, "crossnode": crossnode}
    cluster_results = [run_check(c, data, opts) for c in cluster_checks]
    ids = []
    for n in ordered:
        for c in (n["report"] or {}).get("checks", []):
            if c["id"] not in ids:
                ids.append(c["id"])
    bad = [n for n in ordered if n["state"] != "passed"]
    bad_checks = [r for r in cluster_results if r["status"] in ("fail", "error")]
    ok = bool(ordered) and not bad and not bad_checks
    problems = [f"{r['id']}: {r['summary']}" for r in bad_checks] + [
        f"{n['label']} {n['state']}" for n in bad
    ]
    verdict = (
        f"READY: {len(ordered)} node(s) pass"
        if ok
        else "NOT READY: " + "; ".join(problems)  # the cluster checks first: they name the culprit
        if problems
        else "NOT READY: no alive node"
    )
    report = {
        "schema": SCHEMA,
        "mode": "cluster",
        "address": address,
        "seconds": round(time.monotonic() - t0, 3),
        "check_ids": ids,
        "nodes": ordered,
        "cluster_checks": cluster_results,
        "crossnode": crossnode,
        "passed": ok,
        "verdict": verdict,
        "options": payload,
    }
    return ClusterReport.produce(report).wire()


def _reachable(address: str) -> None:
    """Fail in seconds on an address nothing listens on (ray.init would retry for minutes)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # "auto" or another form Ray resolves itself
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise EngineError(
            f"cannot connect to the Ray cluster at {address!r}: {exc.strerror or exc}",
            fix="give the head's GCS address (host:port, as printed by `ray start --head`)",
        ) from None


def _dead_within(ray: Any, node_id: str, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while True:
        alive_ids = _alive_ids(ray)
        if alive_ids is not None and node_id not in alive_ids:
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.5)


def _alive_ids(ray: Any) -> set[str] | None:
    """Ids of alive nodes, or None when the GCS cannot say (then nobody is declared dead)."""
    try:
        return {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
    except Exception:
        return None


__all__ = ["run_cluster"]
