"""Per-GPU health figures: HBM copy bandwidth and bf16 GEMM throughput on one device, each the median of
timed repetitions after a warm-up (a throttled, mis-clocked or failing GPU shows up as a slow one)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where a GPU is measured; the peer comparison needs no torch
    import torch


@dataclass(frozen=True)
class Health:
    device: str
    name: str
    hbm_copy_gbs: float  # bytes read + written per second, 1e9
    gemm_bf16_tflops: float

    def as_dict(self) -> dict:
        return asdict(self)


def _timed(fn: Callable[[], object], device: torch.device, warmup: int, reps: int) -> float:
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize(device)
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return float(statistics.median(times))


def hbm_copy_gbs(device: torch.device, nbytes: int = 1 << 30, warmup: int = 3, reps: int = 10) -> float:
    """Device-to-device copy of ``nbytes``; counts the bytes read and the bytes written, as STREAM's copy."""
    import torch

    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    seconds = _timed(lambda: dst.copy_(src), device, warmup, reps)
    return 2 * nbytes / seconds / 1e9


def gemm_bf16_tflops(device: torch.device, n: int = 8192, warmup: int = 3, reps: int = 10) -> float:
    import torch

    a = torch.randn(n, n, dtype=torch.bfloat16, device=device)
    b = torch.randn(n, n, dtype=torch.bfloat16, device=device)
    seconds = _timed(lambda: a @ b, device, warmup, reps)
    return 2 * n**3 / seconds / 1e12


def measure_health(device: torch.device, hbm_bytes: int = 1 << 30, gemm_n: int = 8192) -> Health:
    import torch

    if device.type != "cuda":
        raise ValueError(f"GPU health needs a GPU device, got {device}")
    return Health(
        str(device),
        torch.cuda.get_device_name(device),
        hbm_copy_gbs(device, hbm_bytes),
        gemm_bf16_tflops(device, gemm_n),
    )


def slow_outliers(values: dict[str, float], tolerance: float = 0.10) -> dict[str, float]:
    """Members more than ``tolerance`` below the median of the others, with their shortfall (0.15 = 15 %)."""
    out = {}
    for key, value in values.items():
        peers = [v for k, v in values.items() if k != key]
        if not peers:
            continue
        ref = statistics.median(peers)
        if ref > 0 and value < ref * (1 - tolerance):
            out[key] = 1 - value / ref
    return out
