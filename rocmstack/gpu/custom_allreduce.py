"""The engine's own all-reduce against NCCL/RCCL (gloo on CPU) on the same random data, repeated while the
devices are kept busy: a custom all-reduce can read a peer's buffer before it is written and return torn
sums without an error (vllm-project/vllm#57059); verl's ROCm CI turns it off (disable_custom_all_reduce).

The engine's path: vLLM's CustomAllreduce (vllm/distributed/device_communicators/custom_all_reduce.py) on
GPUs; on CPU, vLLM's shared-memory all-reduce (torch.ops._C.shm_allreduce, which its CpuCommunicator uses for
TP groups, vllm/distributed/device_communicators/cpu_communicator.py). One process per rank:

    python -m rocmstack.gpu.custom_allreduce --rank R --world W --init-file F --out RESULT.json [--device cpu]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

DEFAULT_SIZES = (1 << 12, 1 << 16, 1 << 20)  # elements per tensor
FIX = (
    "Turn the engine's custom all-reduce off: vLLM --disable-custom-all-reduce (LLM(disable_custom_all_reduce="
    "True)), SGLang --disable-custom-all-reduce, verl actor_rollout_ref.rollout.disable_custom_all_reduce=True"
)


@dataclass(frozen=True)
class Mismatch:
    rank: int
    repeat: int
    numel: int
    count: int  # elements outside the tolerance
    max_abs_diff: float
    first_index: int


def tolerance(dtype_name: str) -> tuple[float, float]:
    """(rtol, atol) within which two correct all-reduces may differ: the summation order of two ranks in
    fp32 gives the same bits; bf16/fp16 round once per add."""
    return {"float32": (1e-6, 1e-6), "bfloat16": (1.6e-2, 1e-2), "float16": (2e-3, 1e-3)}[dtype_name]


def compare_once(custom_out: Any, reference_out: Any, rtol: float, atol: float) -> tuple[int, float, int]:
    """(elements outside the tolerance, the largest difference, the first such index)."""
    import torch

    a, b = custom_out.float().flatten(), reference_out.float().flatten()
    diff = (a - b).abs()
    bad = diff > atol + rtol * b.abs()
    bad |= torch.isnan(a) != torch.isnan(b)
    count = int(bad.sum().item())
    first = int(torch.nonzero(bad)[0].item()) if count else -1
    return count, float(diff.nan_to_num(float("inf")).max().item()) if a.numel() else 0.0, first


def run_comparison(
    custom: Callable[[Any], Any],
    reference: Callable[[Any], Any],
    *,
    rank: int,
    sizes: tuple[int, ...],
    repeats: int,
    dtype_name: str,
    device: Any,
    seed: int = 0,
    load: Callable[[threading.Event], None] | None = None,
) -> tuple[int, list[Mismatch]]:
    """Every (size, repeat): the same random tensor through both all-reduces; returns (comparisons, mismatches).
    ``load`` runs in a thread the whole time, so the reduction competes with other work as in a real step."""
    import torch

    dtype = getattr(torch, dtype_name)
    rtol, atol = tolerance(dtype_name)
    stop = threading.Event()
    worker = threading.Thread(target=load, args=(stop,), daemon=True) if load else None
    if worker:
        worker.start()
    found: list[Mismatch] = []
    done = 0
    try:
        for repeat in range(repeats):
            for numel in sizes:
                gen = torch.Generator().manual_seed(seed * 1_000_003 + repeat * 7919 + numel * 31 + rank)
                x = torch.randn(numel, generator=gen).to(dtype=dtype, device=device)
                got = custom(x.clone())
                want = reference(x.clone())
                count, worst, first = compare_once(got, want, rtol, atol)
                done += 1
                if count:
                    found.append(Mismatch(rank, repeat, numel, count, worst, first))
    finally:
        stop.set()
        if worker:
            worker.join(timeout=30)
    return done, found


def cpu_load(stop: threading.Event) -> None:
    import torch

    a = torch.randn(256, 256)
    while not stop.is_set():
        a = torch.tanh(a @ a)


def gpu_load(device: Any) -> Callable[[threading.Event], None]:
    def busy(stop: threading.Event) -> None:
        import torch

        stream = torch.cuda.Stream(device=device)
        a = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
        with torch.cuda.stream(stream):
            while not stop.is_set():
                a = torch.tanh(a @ a)
        stream.synchronize()

    return busy


def _gloo_reference(group: Any) -> Callable[[Any], Any]:
    """torch.distributed's all_reduce on ``group`` (gloo on CPU, NCCL/RCCL for the GPU world group)."""
    import torch.distributed as dist

    def reduce(t: Any) -> Any:
        dist.all_reduce(t, group=group)
        return t

    return reduce


def vllm_cpu_shm(rank: int, world: int, group: Any, name: str) -> Callable[[Any], Any]:
    """vLLM's shared-memory all-reduce for CPU ranks, set up the way its CpuCommunicator does."""
    import torch
    import torch.distributed as dist
    import vllm._C  # noqa: F401  (registers torch.ops._C)

    if not hasattr(torch.ops._C, "init_shm_manager"):
        raise RuntimeError(
            "this vLLM build has no CPU shared-memory all-reduce (torch.ops._C.init_shm_manager)"
        )
    threads = torch.tensor([torch.get_num_threads()], dtype=torch.int64)
    dist.all_reduce(threads, op=dist.ReduceOp.MIN, group=group)
    handle = torch.ops._C.init_shm_manager(name, world, rank, int(threads.item()))
    dist.barrier(group)
    torch.ops._C.join_shm_manager(handle, name)
    dist.barrier(group)

    def reduce(t: Any) -> Any:
        torch.ops._C.shm_allreduce(handle, t)
        return t

    return reduce


def vllm_custom_gpu(group: Any, device: Any) -> Callable[[Any], Any]:
    """vLLM's CustomAllreduce (the one `disable_custom_all_reduce` turns off), on a gloo group as vLLM gives it."""
    from vllm.distributed.device_communicators.custom_all_reduce import CustomAllreduce

    ca = CustomAllreduce(group=group, device=device)
    if ca.disabled:
        raise RuntimeError("vLLM's custom all-reduce disabled itself here (world size, P2P or platform)")

    def reduce(t: Any) -> Any:
        out = ca.custom_all_reduce(t)
        if out is None:
            raise RuntimeError(f"vLLM's custom all-reduce declined a tensor of {t.numel()} elements")
        return out

    return reduce


def worker(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    gpu = args.device == "gpu"
    if gpu:
        device = torch.device("cuda", args.rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    timeout = dt.timedelta(seconds=args.timeout)
    init = f"file://{args.init_file}"
    dist.init_process_group(
        "nccl" if gpu else "gloo", init_method=init, rank=args.rank, world_size=args.world, timeout=timeout
    )
    cpu_group = dist.new_group(backend="gloo", timeout=timeout) if gpu else dist.group.WORLD
    reference: Callable[[Any], Any]
    if gpu:
        custom = vllm_custom_gpu(cpu_group, device)
        reference = _gloo_reference(dist.group.WORLD)  # the NCCL/RCCL world group
        load = gpu_load(device)
        dtype_name = "bfloat16"
    else:
        custom = vllm_cpu_shm(args.rank, args.world, cpu_group, f"rocmstack-ar-{os.getppid()}-{args.tag}")
        reference = _gloo_reference(cpu_group)
        load = cpu_load
        dtype_name = "float32"
    t0 = time.monotonic()
    done, found = run_comparison(
        custom,
        reference,
        rank=args.rank,
        sizes=tuple(args.sizes),
        repeats=args.repeats,
        dtype_name=dtype_name,
        device=device,
        seed=args.seed,
        load=None if args.no_load else load,
    )
    dist.barrier()
    dist.destroy_process_group()
    return {
        "rank": args.rank,
        "world": args.world,
        "device": args.device,
        "dtype": dtype_name,
        "engine": "vllm",
        "path": "CustomAllreduce" if gpu else "shm_allreduce",
        "comparisons": done,
        "mismatches": [asdict(m) for m in found],
        "seconds": round(time.monotonic() - t0, 3),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m rocmstack.gpu.custom_allreduce")
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--init-file", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", choices=("cpu", "gpu"), default="gpu")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--tag", default="0")
    parser.add_argument("--no-load", action="store_true")
    args = parser.parse_args(argv)
    try:
        result = worker(args)
    except Exception as exc:  # one line for the driver, never a half-written result
        result = {"rank": args.rank, "error": f"{type(exc).__name__}: {exc}"}
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result), encoding="utf-8")
    tmp.replace(args.out)


def judge(results: list[dict[str, Any]]) -> tuple[str, str, list[str]]:
    """(status pass|fail|error, summary, details) over every rank's result."""
    errors = [f"rank {r.get('rank')}: {r['error']}" for r in results if r.get("error")]
    if errors:
        return "error", f"custom all-reduce probe failed: {errors[0]}", errors
    bad = [m for r in results for m in r.get("mismatches", [])]
    total = sum(int(r.get("comparisons", 0)) for r in results)
    path = results[0].get("path") if results else "?"
    if bad:
        lines = [
            f"rank {m['rank']} repeat {m['repeat']}: {m['count']} of {m['numel']} elements differ "
            f"(max |diff| {m['max_abs_diff']:.3g}, first at {m['first_index']})"
            for m in bad
        ]
        return (
            "fail",
            f"vLLM's {path} disagrees with the reference all-reduce in {len(bad)} of {total}: {lines[0]}",
            lines,
        )
    world = results[0].get("world") if results else 0
    return (
        "pass",
        f"vLLM's {path} matches the reference on {world} ranks in {total} comparisons under load",
        [],
    )


def run_ranks(
    world: int,
    *,
    device: str,
    python: str,
    work_dir: Path,
    sizes: tuple[int, ...] = DEFAULT_SIZES,
    repeats: int = 20,
    timeout: float = 300.0,
    env: dict[str, str] | None = None,
    load: bool = True,
) -> list[dict[str, Any]]:
    """One process per rank on this node; their results (a rank that hangs or dies reports an error)."""
    import subprocess

    src = str(Path(__file__).resolve().parents[2])
    base = dict(env if env is not None else os.environ)
    base["PYTHONPATH"] = os.pathsep.join([src, *(p for p in [base.get("PYTHONPATH")] if p)])
    init = work_dir / "init"
    init.unlink(missing_ok=True)
    procs = []
    for rank in range(world):
        argv = [
            python, "-m", "rocmstack.gpu.custom_allreduce", "--rank", str(rank), "--world", str(world),
            "--init-file", str(init), "--out", str(work_dir / f"rank{rank}.json"), "--device", device,
            "--repeats", str(repeats), "--timeout", str(timeout), "--tag", str(os.getpid()),
            "--sizes", *map(str, sizes),
        ]  # fmt: skip
        if not load:
            argv.append("--no-load")
        log = (work_dir / f"rank{rank}.log").open("w")
        procs.append((subprocess.Popen(argv, env=base, stdout=log, stderr=subprocess.STDOUT), log))
    deadline = time.monotonic() + timeout + 60
    results = []
    for rank, (proc, log) in enumerate(procs):
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        out = work_dir / f"rank{rank}.json"
        if out.is_file():
            results.append(json.loads(out.read_text(encoding="utf-8")))
        else:
            tail = (work_dir / f"rank{rank}.log").read_text(errors="replace").strip().splitlines()[-1:] or [
                "no output"
            ]
            results.append(
                {"rank": rank, "error": f"exited {proc.returncode} without a result: {tail[0][:300]}"}
            )
    return results


if __name__ == "__main__":
    main()
