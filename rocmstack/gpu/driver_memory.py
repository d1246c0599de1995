"""Device memory as the driver counts it (NVML on NVIDIA, amdsmi on AMD), sampled while another process runs.

An engine such as vLLM holds its memory in processes of its own, and torch's allocator counters see only
the calling process; the driver's used-memory figure of the device sees them all. Nothing here creates a
GPU context, so the caller can watch a device that a child process is using.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping

UsedBytes = Callable[[], int]

# The first visible device is the engine's device 0; a mask reorders the driver's indices.
_MASKS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


def driver_index(env: Mapping[str, str]) -> int | None:
    """The driver's index of the first visible device; None when a mask names it otherwise (a UUID)."""
    for name in _MASKS:
        first = env.get(name, "").split(",")[0].strip()
        if first:
            return int(first) if first.isdigit() else None
    return 0


def _nvml(index: int) -> tuple[UsedBytes, Callable[[], None]]:
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    return (lambda: int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)), pynvml.nvmlShutdown


def _amdsmi(index: int) -> tuple[UsedBytes, Callable[[], None]]:
    import amdsmi

    amdsmi.amdsmi_init()
    handle = amdsmi.amdsmi_get_processor_handles()[index]
    vram = amdsmi.AmdSmiMemoryType.VRAM
    return (lambda: int(amdsmi.amdsmi_get_gpu_memory_usage(handle, vram))), amdsmi.amdsmi_shut_down


def open_counter(backend: str, env: Mapping[str, str]) -> tuple[UsedBytes, Callable[[], None]] | str:
    """(used-bytes reader, close) for the first visible device, or why there is none."""
    index = driver_index(env)
    if index is None:
        return "the device mask names the device by UUID; the driver's index is unknown"
    try:
        return _amdsmi(index) if backend == "hip" else _nvml(index)
    except BaseException as exc:  # amdsmi raises KeyError without its library; pynvml its own errors
        return f"{'amdsmi' if backend == 'hip' else 'NVML'}: {type(exc).__name__}: {exc}"


class PeakSampler:
    """Samples the device's used memory every `interval_s` in a thread; `peak_bytes` is above the baseline
    read at start (what this run added, others' use excluded as far as it stayed constant)."""

    def __init__(self, read: UsedBytes, interval_s: float = 0.05) -> None:
        self._read = read
        self._interval = interval_s
        self._stop = threading.Event()
        self.baseline = read()
        self._peak = self.baseline
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            with contextlib.suppress(Exception):  # one failed read must not end the sampling
                self._peak = max(self._peak, self._read())

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak_bytes(self) -> int:
        return self._peak - self.baseline
