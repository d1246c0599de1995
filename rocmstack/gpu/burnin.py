"""Burn-in load on one device: bf16 GEMM and HBM copies back to back until a deadline, timed per window, so a
GPU that slows down under sustained load shows as a falling rate; then a memory pattern test. Runs on a
CUDA/HIP device or, as a stand-in, on the CPU (small sizes)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

PATTERNS = ("zeros", "ones", "0xaa", "0x55", "address", "inverse-address")


@dataclass(frozen=True)
class Window:
    t: float  # seconds from the start of the load to the start of this window
    seconds: float
    gemm_tflops: float
    hbm_gbs: float  # bytes read + written per second, 1e9

    def as_dict(self) -> dict:
        return asdict(self)


def _sync(device: torch.device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _settle(events: list, spent: dict[str, float]) -> None:
    """Read the recorded events (once the last has completed) and let them go: memory stays bounded."""
    events[-1][2].synchronize()
    for kind, e0, e1 in events:
        spent[kind] += e0.elapsed_time(e1) / 1e3
    events.clear()


def sustain(
    device: torch.device,
    seconds: float,
    window_s: float,
    gemm_n: int,
    hbm_bytes: int,
    stop: Callable[[], bool] = lambda: False,
) -> list[Window]:
    """GEMM then copy, repeated; each window's GEMM and copy time measured apart (CUDA events on a GPU)."""
    import torch

    gpu = device.type == "cuda"
    a = torch.randn(gemm_n, gemm_n, dtype=torch.bfloat16, device=device)
    b = torch.randn(gemm_n, gemm_n, dtype=torch.bfloat16, device=device)
    src = torch.empty(hbm_bytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    _ = a @ b  # warm-up: kernel selection and allocation stay out of the first window
    dst.copy_(src)
    _sync(device)
    windows: list[Window] = []
    start = time.monotonic()
    deadline = start + seconds
    while time.monotonic() < deadline and not stop():
        w0 = time.monotonic()
        spent = {"gemm": 0.0, "copy": 0.0}
        gemms = 0
        events: list[tuple[str, torch.cuda.Event, torch.cuda.Event]] = []

        while time.monotonic() < min(w0 + window_s, deadline):
            for kind, fn in (("gemm", lambda: torch.mm(a, b)), ("copy", lambda: dst.copy_(src))):
                if gpu:
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                    fn()
                    e1.record()
                    events.append((kind, e0, e1))
                else:
                    c0 = time.perf_counter()
                    fn()
                    spent[kind] += time.perf_counter() - c0
            gemms += 1
            if gpu and len(events) >= 64:  # the host clock keeps track of the device
                _settle(events, spent)
        if events:
            _settle(events, spent)
        gemm_s, copy_s = spent["gemm"], spent["copy"]
        copies = gemms
        if gemm_s <= 0 or copy_s <= 0:
            break
        windows.append(
            Window(
                round(w0 - start, 3),
                round(time.monotonic() - w0, 3),
                2 * gemm_n**3 * gemms / gemm_s / 1e12,
                2 * hbm_bytes * copies / copy_s / 1e9,
            )
        )
    return windows


def pattern_test(device: torch.device, nbytes: int) -> dict:
    """Write each pattern over ``nbytes`` of device memory and read it back; counts the words that differ."""
    import torch

    words = max(1, nbytes // 4)
    buf = torch.empty(words, dtype=torch.int32, device=device)
    index = torch.arange(words, dtype=torch.int32, device=device)
    results = []
    for name in PATTERNS:
        if name == "address":
            want = index
        elif name == "inverse-address":
            want = torch.bitwise_not(index)
        else:
            byte = {"zeros": 0x00, "ones": 0xFF, "0xaa": 0xAA, "0x55": 0x55}[name]
            value = int.from_bytes(bytes([byte] * 4), "little", signed=True)
            want = torch.full((words,), value, dtype=torch.int32, device=device)
        buf.copy_(want)
        _sync(device)
        bad = buf != want
        count = int(bad.sum().item())
        first = int(torch.nonzero(bad)[0].item()) * 4 if count else None
        results.append({"pattern": name, "mismatches": count, "first_bad_offset": first})
    return {"bytes": words * 4, "patterns": results, "mismatches": sum(r["mismatches"] for r in results)}
