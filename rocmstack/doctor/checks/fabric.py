"""Level 2: the active probes' results (rocmstack.doctor.collect.active) judged against bars.yaml and a saved
baseline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rocmstack.doctor.bars import BASELINE_WARN, baseline_key
from rocmstack.doctor.model import (
    Check,
    DoctorOptions,
    Result,
    errored,
    failed,
    passed,
    skipped,
    warned,
)
from rocmstack.gpu.collectives import Transport, merge_transports
from rocmstack.gpu.custom_allreduce import FIX, judge
from rocmstack.gpu.health import slow_outliers
from rocmstack.platform.snapshot import Snapshot

PEER_TOLERANCE = 0.10


def human_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def active_data(snap: Snapshot, key: str) -> tuple[Any, Result | None]:
    active = snap.active
    if not active:
        return None, skipped("active probes not run (rocmstack doctor --level 2)")
    if "skipped" in active:  # none may run here (a Slurm hook on a node whose GPUs are all in use)
        return None, skipped(active["skipped"])
    if "error" in active:
        return None, errored(
            f"level-2 probes could not run: {active['error']}", fix=active.get("fix") or "see the details"
        )
    data = active.get(key)
    if data is None:
        return None, skipped(f"{key} probe not run")
    if isinstance(data, dict) and "error" in data:
        return None, errored(
            f"{key} probe failed: {data['error']}", fix="run with NCCL_DEBUG=INFO for the library's reason"
        )
    if isinstance(data, dict) and "skipped" in data:
        return None, skipped(data["skipped"])
    return data, None


def rdma_devices(sysfs_root: Path) -> list[str]:
    ib = sysfs_root / "class" / "infiniband"
    try:
        return sorted(p.name for p in ib.iterdir())
    except OSError:
        return []


def _rows_by_op(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in sorted(rows, key=lambda r: (r["op"], r["nbytes"])):
        out.setdefault(r["op"], []).append(r)
    return out


def collective_bandwidth(snap: Snapshot, opts: DoctorOptions) -> Result:
    data, problem = active_data(snap, "collectives")
    if problem:
        return problem
    rows = data["rows"]
    details = []
    for op, items in _rows_by_op(rows).items():
        top = items[-1]
        details.append(
            f"{op}: busbw {top['busbw']:.1f} GB/s (algbw {top['algbw']:.1f}) at {human_bytes(top['nbytes'])}; "
            + ", ".join(f"{human_bytes(r['nbytes'])} {r['busbw']:.1f}" for r in items)
        )
    misses = []
    for bar in data["bars"]:
        row = next((r for r in rows if r["op"] == bar["op"] and r["nbytes"] == bar["nbytes"]), None)
        if row is None:
            misses.append(f"{bar['op']} at {human_bytes(bar['nbytes'])}: not measured")
        elif row["busbw"] < bar["min_busbw"]:
            misses.append(
                f"{bar['op']} busbw {row['busbw']:.1f} GB/s at {human_bytes(bar['nbytes'])} < bar "
                f"{bar['min_busbw']:g} GB/s for {bar['gpus']}x {bar['gpu']} ({bar['source']})"
            )
    label = f"{data['ranks']}x {data['gpu']} over {data['backend']}"
    if misses:
        return failed(
            f"{label}: {misses[0]}",
            *misses[1:],
            *details,
            fix="See collective-transport: P2P/SHM/RDMA must carry the traffic; then check link speed and firmware",
        )
    slow = []
    for row in rows:
        key = baseline_key(row["op"], row["nbytes"], data["ranks"], data["gpu"])
        ref = data["baseline"].get(key)
        if ref and row["busbw"] < BASELINE_WARN * ref:
            slow.append(
                f"{row['op']} at {human_bytes(row['nbytes'])}: {row['busbw']:.1f} GB/s < 90 % of the saved "
                f"{ref:.1f} GB/s"
            )
    if slow:
        return warned(
            f"{label}: {len(slow)} measurement(s) below 90 % of the saved baseline",
            *slow,
            *details,
            fix=f"Compare with the baseline in {data['baseline_file']}; save a new one with --save-baseline FILE",
        )
    bars = [f"{b['op']} >= {b['min_busbw']:g} GB/s at {human_bytes(b['nbytes'])}" for b in data["bars"]]
    summary = f"{label}: " + (
        "meets " + "; ".join(bars) if bars else "no bar for this GPU and count (figures only)"
    )
    if data.get("baseline_saved"):
        details.append(f"baseline saved to {data.get('baseline_saved_to') or data['baseline_file']}")
    return passed(summary, *details)


def collective_transport(snap: Snapshot, opts: DoctorOptions) -> Result:

    data, problem = active_data(snap, "collectives")
    if problem:
        return problem
    if data["backend"] == "gloo":
        return skipped("gloo on CPU: no NCCL/RCCL transport to read")
    merged = merge_transports(
        Transport(t["network"], tuple(t["net_devices"]), t["ib_missing"], dict(t["channels"]), t["version"])
        for t in data["transports"]
    )
    env = opts.environ()
    forced = [
        f"{k}={env[k]}"
        for k in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE", "NCCL_NET")
        if k in env
    ]
    rdma = rdma_devices(opts.sysfs_root)
    details = [f"channels: {merged.summary()}", f"network: {merged.network or 'not reported'}"]
    if merged.version:
        details.append(f"library version {merged.version}")
    if forced:
        details.append("set in the environment: " + ", ".join(forced))
    if rdma:
        details.append(f"RDMA devices: {', '.join(rdma)}")
    net = [k for k in merged.channels if k.startswith("NET/")]
    if merged.uses_socket and rdma:
        return failed(
            f"NCCL/RCCL use the TCP socket transport (NET/Socket) although RDMA devices exist ({', '.join(rdma)})",
            *details,
            fix="Give the container /dev/infiniband and libibverbs with the NIC's provider (see net-uverbs, "
            "net-libibverbs); check NCCL_IB_HCA / NCCL_IB_DISABLE",
        )
    if net:
        return failed(
            f"GPUs of one node talk over the network transport ({', '.join(net)}) instead of P2P/SHM",
            *details,
            fix="Unset NCCL_P2P_DISABLE / NCCL_SHM_DISABLE; on AMD check xGMI links (rocm-smi --showtopo) and "
            "that /dev/shm is large enough",
        )
    if not merged.channels:
        return warned(
            "no channel lines in the NCCL/RCCL log: the transport is unknown",
            *details,
            fix="The library may not honour NCCL_DEBUG_FILE; run with NCCL_DEBUG=INFO by hand",
        )
    return passed(f"intra-node channels: {merged.summary()}", *details[1:])


def weight_sync_ipc(snap: Snapshot, opts: DoctorOptions) -> Result:
    data, problem = active_data(snap, "weight_sync")
    if problem:
        return problem
    failures, done, devices = [], 0, set()
    for n, rnd in enumerate(data["rounds"], 1):
        if "error" in rnd and not rnd["colocated"]:
            failures.append(f"start-up {n}: {rnd['error']}")
        for e in rnd["colocated"]:
            done += 1
            tr = e["trainer"]
            devices.add(tr.get("device"))
            if not e.get("ok"):
                ro = e.get("rollout") or {}
                failures.append(
                    f"start-up {n}, GPU bundle {e['bundle']}: {e.get('error')} (trainer {tr.get('device')} "
                    f"mask {tr.get('masks')}, rollout {ro.get('device')} mask {ro.get('masks')})"
                )
    if failures:
        return failed(
            f"{len(failures)} of {done} colocated IPC imports failed",
            *failures,
            fix="Trainer and rollout must see the same device at the same index: let Ray set the masks "
            "(do not override CUDA/HIP_VISIBLE_DEVICES per process) and pass device UUIDs, not indices",
        )
    return passed(
        f"{done} IPC handle(s) exported by a trainer and imported by its colocated rollout, checksums equal "
        f"({data['repeats']} start-ups)",
        f"devices: {', '.join(sorted(d for d in devices if d))}",
    )


def weight_sync_broadcast(snap: Snapshot, opts: DoctorOptions) -> Result:
    data, problem = active_data(snap, "weight_sync")
    if problem:
        return problem
    if data["ranks"] < 2:
        return skipped("one GPU: no split placement to test")
    failures, rates = [], []
    for n, rnd in enumerate(data["rounds"], 1):
        split = rnd.get("split")
        if split is None:
            failures.append(f"start-up {n}: {rnd.get('error', 'not run')}")
            continue
        for role in ("trainer", "rollout"):
            part = split[role]
            if not part.get("ok"):
                failures.append(
                    f"start-up {n}, {role} on {part.get('device')} (mask {part.get('masks')}): "
                    f"{part.get('error') or 'checksum differs after the broadcast'}"
                )
        if split["ok"]:
            rates.append(split["rollout"]["gbs"])
    if failures:
        return failed(
            f"{len(failures)} failure(s) in {len(data['rounds'])} split start-ups",
            *failures,
            fix="See collective-transport; the trainer and rollout need a working NCCL/RCCL group across GPUs",
        )
    best = max(rates)
    return passed(
        f"{human_bytes(data['sync_bytes'])} broadcast trainer -> rollout on disjoint GPUs, checksum equal, "
        f"{best:.1f} GB/s (best of {len(rates)} start-ups)",
        "per start-up GB/s: " + ", ".join(f"{r:.1f}" for r in rates),
    )


def _health(snap: Snapshot, field: str, unit: str, bar_field: str) -> Result:
    data, problem = active_data(snap, "health")
    if problem:
        return problem
    bar = snap.active.get("health_bar") or {}
    floor = bar.get(bar_field)
    values = {f"{h['device']} ({h['uuid']})": h[field] for h in data}
    details = [f"{k}: {v:.0f} {unit}" for k, v in values.items()]
    below = [
        f"{k}: {v:.0f} {unit} < bar {floor:g} ({bar['source']})"
        for k, v in values.items()
        if floor and v < floor
    ]
    slow = slow_outliers(values, PEER_TOLERANCE)
    slow_lines = [
        f"{k}: {values[k]:.0f} {unit}, {gap:.0%} below its peers' median" for k, gap in slow.items()
    ]
    if below or slow_lines:
        return failed(
            (below + slow_lines)[0],
            *(below + slow_lines)[1:],
            *details,
            fix="Check the GPU's clocks, power cap and temperature (rocm-smi / nvidia-smi -q); drain it if "
            "it stays slow",
        )
    lo = min(values.values())
    text = f"{len(values)} GPU(s), slowest {lo:.0f} {unit}"
    text += f" (bar {floor:g})" if floor else " (no bar for this GPU: peers compared only)"
    return passed(text, *details)


def gpu_hbm_bandwidth(snap: Snapshot, opts: DoctorOptions) -> Result:
    return _health(snap, "hbm_copy_gbs", "GB/s", "hbm_copy_gbs")


def gpu_gemm(snap: Snapshot, opts: DoctorOptions) -> Result:
    return _health(snap, "gemm_bf16_tflops", "TFLOPS", "gemm_bf16_tflops")


NCCL_TESTS = "https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md"


def custom_allreduce(snap: Snapshot, opts: DoctorOptions) -> Result:

    data, problem = active_data(snap, "custom_allreduce")
    if problem is not None:
        return problem
    results = data["results"]
    status, summary, details = judge(results)
    if status == "error":
        reasons = [str(r.get("error", "")) for r in results if r.get("error")]
        if all("No module named 'vllm'" in e for e in reasons):
            return skipped("vLLM is not installed: no engine custom all-reduce to compare")
        if all("no CPU shared-memory all-reduce" in e for e in reasons):
            return skipped("this vLLM build has no CPU shared-memory all-reduce")
        return errored(
            summary, *details, fix="see the rank's error; NCCL_DEBUG=INFO for the library's reason"
        )
    if status == "fail":
        return failed(summary, *details, fix=FIX)
    return passed(summary)


CHECKS = (
    Check(
        "collective-bandwidth",
        "fabric",
        "Collective busbw on this node's GPUs meets its bar",
        collective_bandwidth,
        NCCL_TESTS,  # how busbw is counted; each bar's own source is in bars.yaml
        frozenset({"collectives"}),
        level=2,
    ),
    Check(
        "collective-transport",
        "fabric",
        "NCCL/RCCL use P2P/SHM/RDMA, not sockets",
        collective_transport,
        "https://github.com/PrimeIntellect-ai/prime-rl/issues/1599",
        frozenset({"collectives"}),
        level=2,
    ),
    Check(
        "weight-sync-ipc",
        "fabric",
        "Colocated trainer -> rollout IPC handle on every GPU",
        weight_sync_ipc,
        "https://github.com/vllm-project/vime/issues/418",
        frozenset({"weight-sync"}),
        level=2,
    ),
    Check(
        "weight-sync-broadcast",
        "fabric",
        "Split trainer -> rollout broadcast with checksum",
        weight_sync_broadcast,
        "https://github.com/ROCm/rocm-systems/issues/5756",
        frozenset({"weight-sync"}),
        level=2,
    ),
    Check(
        "custom-allreduce",
        "fabric",
        "The engine's custom all-reduce matches NCCL/RCCL under load",
        custom_allreduce,
        "https://github.com/vllm-project/vllm/issues/57059",
        frozenset({"custom-allreduce"}),
        level=2,
    ),
    Check(
        "gpu-hbm-bandwidth",
        "fabric",
        "HBM copy bandwidth per GPU (bar and peers)",
        gpu_hbm_bandwidth,
        "https://github.com/ROCm/ROCmValidationSuite/blob/master/rvs/conf/MI300X/babel.conf",
        frozenset({"gpu-health"}),
        level=2,
    ),
    Check(
        "gpu-gemm",
        "fabric",
        "bf16 GEMM TFLOPS per GPU (bar and peers)",
        gpu_gemm,
        "https://github.com/ROCm/ROCmValidationSuite/blob/master/rvs/conf/MI300X/gst_single.conf",
        frozenset({"gpu-health"}),
        level=2,
    ),
)
