"""The reference: a plain torch.distributed loop (one process per GPU, NCCL, bf16), 5 warm-ups then 20 timed
iterations between two synchronisations, busbw by nccl-tests' factors. Run in the same command as the doctor."""

import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

CASES = [("all_reduce", 1 << 30), ("all_reduce", 4 << 30), ("broadcast", 1 << 30)]


def worker(rank, world, port, out):
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    res = []
    for op, nbytes in CASES:
        x = torch.ones(nbytes // 2, dtype=torch.bfloat16, device="cuda")
        fn = (lambda: dist.all_reduce(x)) if op == "all_reduce" else (lambda: dist.broadcast(x, 0))
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        t = (time.perf_counter() - t0) / 20
        algbw = nbytes / t / 1e9
        factor = 2 * (world - 1) / world if op == "all_reduce" else 1.0
        res.append({"op": op, "nbytes": nbytes, "seconds": t, "algbw": algbw, "busbw": algbw * factor})
        del x
    if rank == 0:
        with open(out, "w") as fh:
            json.dump(res, fh, indent=1)
        for r in res:
            print(f"plain loop {r['op']} {r['nbytes'] >> 20} MiB: busbw {r['busbw']:.1f} GB/s")
    dist.destroy_process_group()


if __name__ == "__main__":
    world = torch.cuda.device_count()
    mp.spawn(worker, args=(world, 29611, sys.argv[1]), nprocs=world)
