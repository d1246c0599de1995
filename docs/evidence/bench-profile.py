"""Where one reference decode step's time goes, on a GPU (evidence for docs/evidence/bench-rollout.md).

- graph: the captured step's time (CUDA events over 50 replays) at the bench's mean context;
- kernels: the same step run eagerly under torch.profiler, kernel device time by category;
  graph time minus kernel time is what launches and gaps cost inside the graph;
- --ncu: run a few eager steps only, for `ncu` to read DRAM throughput of chosen kernels.

python3 docs/evidence/bench-profile.py --shape qwen3-8b --batch 1,64,256 [--no-fused] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

import torch

from rocmstack.bench.engine import ReferenceEngine
from rocmstack.bench.shapes import load_config, shape_from_config


def category(name: str) -> str:
    n = name.lower()
    for key in (
        "_decode_attention",
        "_combine",
        "_qk_norm_rope",
        "_add_rms_norm",
        "_rms_norm",
        "_silu_mul",
        "_gemv",
    ):
        if key in n:
            return f"triton {key.strip('_')}"
    if any(t in n for t in ("gemm", "gemv", "nvjet", "cutlass", "xmma", "cublas", "splitk")):
        return "matmul (cuBLAS)"
    if "softmax" in n or "argmax" in n or "exponential" in n or "log" in n:
        return "softmax / sampling"
    return "other elementwise / copy"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="qwen3-8b")
    ap.add_argument("--batch", default="1")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--no-fused", action="store_true")
    ap.add_argument("--ncu", action="store_true", help="only run eager steps (for ncu)")
    ap.add_argument("--out")
    args = ap.parse_args()
    reports = [profile_one(args, int(b)) for b in args.batch.split(",")]
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(json.dumps(reports, indent=2) + "\n")


def profile_one(args, b: int) -> dict | None:
    name, config = load_config(args.shape)
    shape = shape_from_config(config)
    p, n = args.prompt_len, args.new_tokens
    engine = ReferenceEngine(
        config, device="cuda", dtype=torch.bfloat16, max_batch=b, max_seq_len=p + n, use_graphs=not args.ncu,
        fused=False if args.no_fused else None,
    )  # fmt: skip
    ids = torch.randint(0, shape.vocab_size, (b, p), device="cuda")
    if args.ncu:  # prefill only: ncu counts launches from here (4 matmuls a layer + the LM head)
        engine._prefill(ids, all_logits=False)
    else:
        engine.generate(ids, n, temperature=1.0)  # fills the cache with real entries up to p + n - 1
    pos = p + n // 2  # the mean context of the bench's decode steps
    engine._tokens[:b].random_(0, shape.vocab_size)
    engine._pos.fill_(pos)
    if args.ncu:
        for _ in range(2):
            engine._step_logits(b, pos)
        torch.cuda.synchronize()
        return None

    engine._step_logits(b, pos)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    reps = 50
    start.record()
    for _ in range(reps):
        engine._step_logits(b, pos)
    end.record()
    end.synchronize()
    graph_ms = start.elapsed_time(end) / reps

    engine.use_graphs = False
    for _ in range(3):
        engine._step_logits(b, pos)
    torch.cuda.synchronize()
    steps = 5
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            engine._step_logits(b, pos)
        torch.cuda.synchronize()
    by_cat: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    kernels = []
    for evt in prof.key_averages():
        t = getattr(evt, "self_device_time_total", None)
        if t is None:
            t = evt.self_cuda_time_total
        if t <= 0:
            continue
        cat = category(evt.key)
        by_cat[cat][0] += t / steps / 1e3
        by_cat[cat][1] += evt.count / steps
        kernels.append(
            {"name": evt.key[:120], "ms_per_step": t / steps / 1e3, "calls_per_step": evt.count / steps}
        )
    kernels.sort(key=lambda k: -k["ms_per_step"])
    kernel_ms = sum(v[0] for v in by_cat.values())
    weight_bytes = shape.params_read_per_step() * 2
    kv_bytes = b * (pos + 1) * shape.kv_bytes_per_token(2)
    gemm_ms = by_cat.get("matmul (cuBLAS)", [0.0, 0])[0] + by_cat.get("triton gemv", [0.0, 0])[0]
    report = {
        "shape": name,
        "batch": b,
        "position": pos,
        "fused": engine.fused,
        "device": torch.cuda.get_device_name(),
        "graph_step_ms": graph_ms,
        "kernel_ms_per_step": kernel_ms,
        "launch_gap_ms_per_step": graph_ms - kernel_ms,
        "kernels_per_step": sum(v[1] for v in by_cat.values()),
        "bytes_per_step": weight_bytes + kv_bytes,
        "effective_gb_s": (weight_bytes + kv_bytes) / graph_ms / 1e6,
        "matmul_weight_gb_s": weight_bytes / gemm_ms / 1e6 if gemm_ms else None,
        "gemv": engine.gemv_report or None,
        "by_category": {
            k: {"ms_per_step": v[0], "launches_per_step": v[1]} for k, v in sorted(by_cat.items())
        },
        "top_kernels": kernels[:15],
    }
    print(
        f"{name} b={b} fused={engine.fused}: graph {graph_ms:.3f} ms/step, kernels {kernel_ms:.3f} ms "
        f"({report['kernels_per_step']:.0f} launches), gaps {graph_ms - kernel_ms:.3f} ms, "
        f"{report['effective_gb_s']:.0f} GB/s effective, matmuls {report['matmul_weight_gb_s'] or 0:.0f} GB/s of weights"
    )
    if engine.gemv_report:
        print("  batch-1 matmul choice:", json.dumps(engine.gemv_report))
    for cat, v in sorted(by_cat.items(), key=lambda kv: -kv[1][0]):
        print(f"  {cat:32s} {v[0]:7.3f} ms  {v[1]:6.0f} launches")
    del engine
    torch.cuda.empty_cache()
    return report


if __name__ == "__main__":
    main()
