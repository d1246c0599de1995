"""Level 3, once per cluster: node facts that must agree, and the collectives across nodes (with the culprit
when a bar is missed). Each check reads the cluster data run_cluster collects, not a node snapshot."""

from __future__ import annotations

from typing import Any

from rocmstack.doctor.checks.fabric import human_bytes
from rocmstack.doctor.model import Check, DoctorOptions, Result, errored, failed, passed, skipped, warned
from rocmstack.gpu.collectives import Transport, merge_transports

FACTS = (
    "rocm_version",
    "amdgpu_driver",
    "nvidia_driver",
    "gpu_vbios",
    "NCCL_IB_GID_INDEX",
    "roce_v2_gid_index",
)


def consistency(data: dict, opts: DoctorOptions) -> Result:
    reports: dict[str, dict] = {}
    for n in data["nodes"]:
        facts = (n.get("report") or {}).get("facts")
        if facts is not None:
            reports[n["label"]] = facts
    if len(reports) < 2:
        return skipped(f"{len(reports)} node report(s): nothing to compare")
    diffs = []
    for fact in FACTS:
        values: dict[str, list[str]] = {}
        for label, facts in reports.items():
            values.setdefault(str(facts.get(fact)), []).append(label)
        if len(values) > 1:
            diffs.append(
                f"{fact} differs: " + "; ".join(f"{v} on {', '.join(ls)}" for v, ls in sorted(values.items()))
            )
    if diffs:
        return failed(
            diffs[0],
            *diffs[1:],
            fix="Install the same ROCm/driver/firmware on every node and use one GID index (NCCL_IB_GID_INDEX)",
        )
    same = [f"{f}={next(iter(reports.values())).get(f)}" for f in FACTS]
    return passed(f"{len(reports)} nodes agree on ROCm, driver, firmware and GID index", *same)


def _crossnode(data: dict) -> tuple[Any, Result | None]:
    cn = data.get("crossnode")
    if cn is None:
        return None, skipped("cross-node probes not run")
    if "error" in cn:
        return None, errored(f"cross-node probes failed: {cn['error']}", fix="see the details of each node")
    if "skipped" in cn:
        return None, skipped(cn["skipped"])
    return cn, None


def culprit_line(cn: dict) -> str | None:
    c = cn.get("culprit")
    if not c:
        return None
    if c.get("node"):
        node = c["node"]
        return (
            f"culprit: node {node} (pairs with it reach {c['scores'][node]:.2f} GB/s busbw, pairs without it "
            f"{c['without'][node]:.2f})"
        )
    if c.get("link"):
        link = c["link"]
        return f"slowest link: {' <-> '.join(link['nodes'])} ({link['busbw']:.2f} GB/s); no single node stands out"
    return "culprit search ran out of its time budget before a pair was measured"


def collectives(data: dict, opts: DoctorOptions) -> Result:
    cn, problem = _crossnode(data)
    if problem:
        return problem
    rows = cn["rows"]
    details = [
        f"{r['op']} at {human_bytes(r['nbytes'])}: busbw {r['busbw']:.2f} GB/s"
        for r in rows
        if r["nbytes"] == max(x["nbytes"] for x in rows)
    ]
    label = f"{cn['ranks']} nodes, one {cn['gpu']} rank each over {cn['backend']}"
    if cn["misses"]:
        miss = cn["misses"][0]
        bar = miss["bar"]
        text = (
            f"{bar['op']} busbw {miss['busbw']:.2f} GB/s at {human_bytes(bar['nbytes'])} < bar "
            f"{bar['min_busbw']:g} ({bar['source']})"
        )
        first = culprit_line(cn)
        steps = [
            f"measured {', '.join(s['nodes'])}: {s['busbw']:.2f} GB/s"
            for s in (cn.get("culprit") or {}).get("steps", [])
        ]
        return failed(
            f"{first}; {text}" if first else f"{label}: {text}",
            *steps,
            *details,
            fix="Drain or repair the named node (its NIC, cables, CPU load), then rerun --level 3",
        )
    if not cn["bars"]:
        return passed(f"{label}: no bar for this topology (figures only)", *details)
    return passed(
        f"{label}: meets " + "; ".join(f"{b['op']} >= {b['min_busbw']:g} GB/s" for b in cn["bars"]), *details
    )


def transport(data: dict, opts: DoctorOptions) -> Result:

    cn, problem = _crossnode(data)
    if problem:
        return problem
    if cn["backend"] == "gloo":
        return skipped("gloo on CPU: no NCCL/RCCL transport to read")
    merged = merge_transports(
        Transport(t["network"], tuple(t["net_devices"]), t["ib_missing"], dict(t["channels"]), t["version"])
        for t in cn.get("transports", [])
    )
    rdma_nodes = [
        n["label"] for n in data["nodes"] if ((n.get("report") or {}).get("facts") or {}).get("rdma_devices")
    ]
    if merged.uses_socket and rdma_nodes:
        return failed(
            "NCCL/RCCL talk across nodes over TCP sockets (NET/Socket) although "
            f"{', '.join(rdma_nodes)} have RDMA devices",
            f"channels: {merged.summary()}",
            fix="See net-uverbs / net-libibverbs / net-nccl-env on each node",
        )
    if merged.uses_socket:
        return warned(
            "NCCL/RCCL talk across nodes over TCP sockets: no RDMA devices on these nodes",
            f"channels: {merged.summary()}",
            fix="RL weight sync and gradients across nodes need an RDMA fabric (InfiniBand or RoCE)",
        )
    return passed(f"across nodes: {merged.summary()}")


CHECKS = (
    Check(
        "cluster-consistency",
        "cluster",
        "Same ROCm/driver/firmware and GID index on every node",
        consistency,
        "https://github.com/ROCm/cvs",
        level=3,
        scope="cluster",
    ),
    Check(
        "cluster-collectives",
        "cluster",
        "Collectives across nodes meet their bar (culprit named)",
        collectives,
        "https://github.com/ROCm/cvs/blob/main/cvs/input/config_file/rccl/rccl_config.json",
        frozenset({"collectives"}),
        level=3,
        scope="cluster",
    ),
    Check(
        "cluster-transport",
        "cluster",
        "NCCL/RCCL use RDMA across nodes",
        transport,
        "https://github.com/vllm-project/vllm/issues/42075",
        frozenset({"collectives"}),
        level=3,
        scope="cluster",
    ),
)
