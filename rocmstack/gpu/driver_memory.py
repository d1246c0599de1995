"""Device memory as the driver counts it (NVML on NVIDIA, amdsmi on AMD), sampled while another process runs.

An engine such as vLLM holds its memory in processes of its own, and torch's allocator counters see only
the calling process; the driver's used-memory figure of the device sees them all. Nothing here creates a
GPU context, so the caller can watch a device that a child process is using. ``process_device_memory``
is the per-process view: what a set of processes holds, as an engine's sleep must give it back.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

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


@dataclass(frozen=True)
class DeviceMemory:
    """Bytes some processes hold on their devices as the driver counts them; ``None`` when not measurable."""

    nbytes: int | None
    source: str  # "nvml", "amdsmi", or why it could not be measured


def process_device_memory(
    device_type: str, *, hip: bool = False, pids: Collection[int] | None = None
) -> DeviceMemory:
    """What ``pids`` (default: this process) hold on GPUs per the driver: NVML for NVIDIA, amdsmi for AMD.

    An engine that runs its model in child processes (SGLang's scheduler) is measured over its whole
    process set; torch's allocator counters would see only the caller.
    """
    if device_type != "cuda":
        return DeviceMemory(None, "not measurable on CPU (no device memory)")
    wanted = frozenset(pids) if pids is not None else frozenset({os.getpid()})
    return _amdsmi_process_memory(wanted) if hip else _nvml_process_memory(wanted)


def _nvml_process_memory(pids: frozenset[int]) -> DeviceMemory:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # no driver library: say so, do not pass
        return DeviceMemory(None, f"NVML unavailable: {exc}")
    try:
        total, seen = 0, False
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if proc.pid in pids and proc.usedGpuMemory is not None:
                    total += int(proc.usedGpuMemory)
                    seen = True
        if not seen:
            return DeviceMemory(None, f"NVML lists none of processes {sorted(pids)} (another PID namespace?)")
        return DeviceMemory(total, "nvml")
    finally:
        pynvml.nvmlShutdown()


def _amdsmi_process_memory(pids: frozenset[int]) -> DeviceMemory:
    try:
        import amdsmi

        amdsmi.amdsmi_init()
    except Exception as exc:
        return DeviceMemory(None, f"amdsmi unavailable: {exc}")
    try:
        total, seen = 0, False
        for handle in amdsmi.amdsmi_get_processor_handles():
            for proc in amdsmi.amdsmi_get_gpu_process_list(handle):
                # amdsmi >= 6.4 returns dicts; older releases return handles without memory figures.
                if isinstance(proc, dict) and proc.get("pid") in pids:
                    total += int(proc.get("memory_usage", {}).get("vram_mem", 0))
                    seen = True
        if not seen:
            return DeviceMemory(None, f"amdsmi lists none of processes {sorted(pids)} with memory figures")
        return DeviceMemory(total, "amdsmi")
    finally:
        amdsmi.amdsmi_shut_down()
