"""Level 3: collectives across the nodes of a Ray cluster (one rank per node, a STRICT_SPREAD placement group),
and when one misses its bar, the culprit search: node pairs (or halves on large clusters) are measured alone
until the slowest node or link stands out, within a time budget."""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from itertools import combinations
from typing import Any

from rocmstack.doctor.bars import load_bars
from rocmstack.doctor.collect.active import RankWorker, group_sweep
from rocmstack.doctor.model import DoctorOptions
from rocmstack.gpu.actors import stop_actors
from rocmstack.gpu.outcome import error_line

PROVIDES = frozenset({"collectives"})  # the need of the cluster checks this collector answers
PAIRS_UP_TO = 8  # up to 8 nodes every pair (28); above, halves first
STANDS_OUT = 0.85  # a node whose pairs reach < 85 % of the pairs without it is the culprit


def find_culprit(
    nodes: list[str],
    measure: Callable[[list[str]], float],
    *,
    budget_s: float = 120.0,
    clock: Callable[[], float] = time.monotonic,
) -> dict:
    """Name the slowest node (or link). ``measure(subset)`` returns the subset's busbw (GB/s)."""
    t0 = clock()
    steps: list[dict] = []

    def run(subset: list[str]) -> float | None:
        if clock() - t0 > budget_s:
            return None
        value = measure(subset)
        steps.append({"nodes": subset, "busbw": value})
        return value

    candidates = list(nodes)
    while len(candidates) > PAIRS_UP_TO:
        half = len(candidates) // 2
        a, b = candidates[:half], candidates[half:]
        va, vb = run(a), run(b)
        if va is None or vb is None:
            break
        candidates = a if va < vb else b
    pair_bw: dict[tuple[str, str], float] = {}
    for x, y in combinations(candidates, 2):
        v = run([x, y])
        if v is None:
            break
        pair_bw[(x, y)] = v
    out: dict[str, Any] = {"steps": steps, "seconds": round(clock() - t0, 2), "complete": True, "node": None}
    if len(pair_bw) < len(list(combinations(candidates, 2))):
        out["complete"] = False
    if not pair_bw:
        return out
    link = min(pair_bw, key=lambda k: pair_bw[k])
    out["link"] = {"nodes": list(link), "busbw": pair_bw[link]}
    # A node's pairs against the pairs it is not in: a slow node drags every pair it joins, a slow link one.
    scores, without = {}, {}
    for n in candidates:
        mine = [v for k, v in pair_bw.items() if n in k]
        rest = [v for k, v in pair_bw.items() if n not in k]
        if mine:
            scores[n] = statistics.median(mine)
            without[n] = statistics.median(rest) if rest else None
    out["scores"] = scores
    out["without"] = without
    ratios = {n: scores[n] / w for n, w in without.items() if w}
    if ratios:
        worst = min(ratios, key=lambda n: ratios[n])
        if ratios[worst] < STANDS_OUT:
            out["node"] = worst
    return out


def run_crossnode(opts: DoctorOptions, labels: dict[str, str], progress: Callable[[str], None]) -> dict:
    """On a connected Ray driver: one rank per alive node. ``labels``: node id -> label."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    bars = load_bars(opts.active.bars_file)
    n = len(labels)
    if n < 2:
        return {"skipped": f"{n} node(s): nothing to measure across nodes"}
    gpu = int(ray.cluster_resources().get("GPU", 0)) >= n
    bundle = {"GPU": 1.0, "CPU": 0.01} if gpu else {"CPU": 0.01}
    pg = placement_group([dict(bundle) for _ in range(n)], strategy="STRICT_SPREAD")
    try:
        ray.get(pg.ready(), timeout=opts.active.timeout)
    except Exception as exc:
        remove_placement_group(pg)
        return {"error": f"no STRICT_SPREAD placement of {n} ranks: {error_line(exc)}"}
    rank_cls = ray.remote(RankWorker)
    log_dir = f"/tmp/rocmstack-nccl-{uuid.uuid4().hex[:12]}" if gpu else None
    actors = [
        rank_cls.options(
            num_gpus=1 if gpu else 0,
            num_cpus=0,
            max_restarts=0,
            scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i),
        ).remote(log_dir)
        for i in range(n)
    ]
    t0 = time.monotonic()
    try:
        infos = ray.get([a.info.remote() for a in actors], timeout=opts.active.timeout)
        for info in infos:
            info["label"] = labels.get(info["node_id"], info["node_id"][:12])
        name = infos[0]["name"]
        progress(f"level 3: {'NCCL/RCCL' if gpu else 'gloo'} group of {n} ranks, one per node")
        applicable = bars.for_collectives(name, n, nodes=n)
        swept = group_sweep(opts, actors, infos, gpu, applicable)
        rows, warmup, iters = swept.rows, swept.warmup, swept.iters
        misses = []
        for bar in applicable:
            row = next(r for r in rows if r["op"] == bar.op and r["nbytes"] == bar.nbytes)
            if row["busbw"] < bar.min_busbw:
                misses.append({"bar": vars(bar), "busbw": row["busbw"]})
        out: dict[str, Any] = {
            "ranks": n,
            "gpu": name,
            "backend": "nccl" if gpu else "gloo",
            "nodes": [{"label": i["label"], "node_id": i["node_id"], "device": i["device"]} for i in infos],
            "rows": rows,
            "bars": [vars(b) for b in applicable],
            "misses": misses,
        }
        if misses:
            bar = misses[0]["bar"]
            by_label = {i["label"]: idx for idx, i in enumerate(infos)}
            progress(f"level 3: {bar['op']} missed its bar; searching for the culprit")

            def measure(subset: list[str]) -> float:
                members = sorted(by_label[s] for s in subset)
                progress(f"level 3: measuring {', '.join(subset)}")
                res = ray.get(
                    [
                        actors[m].subset.remote(members, bar["op"], bar["nbytes"], warmup, iters)
                        for m in members
                    ],
                    timeout=opts.active.timeout,
                )
                return float(res[0]["busbw"])

            out["culprit"] = find_culprit(
                [i["label"] for i in infos], measure, budget_s=opts.cluster.culprit_budget
            )
        if gpu:
            out["transports"] = ray.get([a.transport.remote() for a in actors], timeout=opts.active.timeout)
        ray.get([a.close.remote() for a in actors], timeout=opts.active.timeout)
        out["seconds"] = round(time.monotonic() - t0, 2)
        return out
    except Exception as exc:
        return {"error": error_line(exc)}
    finally:
        stop_actors(actors)
        remove_placement_group(pg)
