"""Level 4, the burn-in: sustained bf16 GEMM and HBM copies on every GPU at once for ``burnin_minutes``
while telemetry is sampled, error counters read before and after, then a memory pattern test on each GPU.
One thread per device (the kernels run on the devices; the threads only launch and time them). Without a
GPU, ``cpu_ranks`` CPU stand-ins run the same load at small sizes. The result is a plain dict
(``snapshot.active["burn_in"]``); rocmstack.doctor.checks.burnin judges it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from rocmstack.doctor.model import DoctorOptions
from rocmstack.gpu.burnin import pattern_test, sustain
from rocmstack.gpu.weight_sync import device_uuid
from rocmstack.platform.telemetry import Device, ReplaySource, Sampler, Source, match, open_source

CPU_SIZES = {"gemm_n": 256, "hbm_bytes": 8 << 20, "mem_bytes": 16 << 20}
GPU_SIZES = {"gemm_n": 8192, "hbm_bytes": 1 << 30, "mem_bytes": 4 << 30}


def window_seconds(seconds: float) -> float:
    """A minute per window (a rate is judged against the GPU's own first minute); at least 5 windows in a
    run shorter than 5 minutes."""
    return min(60.0, seconds / 5)


def run_burnin(opts: DoctorOptions, progress: Callable[[str], None]) -> dict[str, Any]:
    import torch

    seconds = opts.burnin.minutes * 60
    gpu = torch.cuda.is_available() and torch.cuda.device_count() > 0
    count = torch.cuda.device_count() if gpu else opts.active.cpu_ranks
    devices = [torch.device("cuda", i) if gpu else torch.device("cpu") for i in range(count)]
    sizes = dict(GPU_SIZES if gpu else CPU_SIZES)
    sizes.update(
        {k: v for k, v in (("gemm_n", opts.burnin.gemm_n), ("mem_bytes", opts.burnin.mem_bytes)) if v}
    )
    if not gpu:
        torch.set_num_threads(1)  # one core per stand-in GPU, as a GPU has its own compute
    t0 = [time.monotonic()]

    def run_progress() -> float:
        return min(1.0, max(0.0, (time.monotonic() - t0[0]) / seconds))

    source: Source | None
    if opts.burnin.telemetry_replay is not None:
        source, why = ReplaySource(opts.burnin.telemetry_replay, run_progress), ""
    else:
        vendor = ("amd" if torch.version.hip else "nvidia") if gpu else None
        source, why = open_source(vendor)
    matching = None
    if source is not None and gpu and opts.burnin.telemetry_replay is None:
        source, matching = match(source, [_uuid(d) for d in devices])
    listed: list[Device] = source.devices() if source else []
    infos = []
    for i, dev in enumerate(devices):
        known = listed[i] if i < len(listed) else None
        infos.append(
            {
                "index": i,
                "uuid": known.uuid if known else (_uuid(dev) if gpu else f"cpu-{i}"),
                "name": known.name if known else (torch.cuda.get_device_name(dev) if gpu else "cpu"),
            }
        )
    before = [asdict(c) for c in source.counters()] if source else []
    sampler = Sampler(source, interval_s=min(1.0, max(0.05, seconds / 40))) if source else None
    results: list[dict[str, Any]] = [{} for _ in devices]
    window = window_seconds(seconds)

    def load(i: int) -> None:
        try:
            if gpu:
                torch.cuda.set_device(devices[i])
            windows = sustain(devices[i], seconds, window, sizes["gemm_n"], sizes["hbm_bytes"])
            results[i]["windows"] = [w.as_dict() for w in windows]
        except Exception as exc:  # one GPU failing under load is a finding, not a crash of the run
            results[i]["error"] = f"{type(exc).__name__}: {exc}"[:300]

    progress(
        f"level 4: burn-in on {count} {'GPU' if gpu else 'CPU stand-in'}(s) for {opts.burnin.minutes:g} min"
        f" (telemetry: {source.name if source else 'none'})"
    )
    threads = [threading.Thread(target=load, args=(i,), name=f"rocmstack-burnin-{i}") for i in range(count)]
    t0[0] = time.monotonic()
    if sampler:
        sampler.start()
    for t in threads:
        t.start()
    next_note = t0[0] + max(10.0, seconds / 10)
    while any(t.is_alive() for t in threads):
        for t in threads:
            t.join(timeout=1.0)
        if time.monotonic() >= next_note:
            progress(f"level 4: burn-in {(time.monotonic() - t0[0]) / 60:.1f}/{opts.burnin.minutes:g} min")
            next_note += max(10.0, seconds / 10)
    samples = sampler.stop() if sampler else []
    after = [asdict(c) for c in source.counters()] if source else []
    progress(f"level 4: memory pattern test, {sizes['mem_bytes'] >> 20} MiB per device")
    for i, dev in enumerate(devices):
        try:
            results[i]["memory"] = pattern_test(dev, sizes["mem_bytes"])
        except Exception as exc:
            results[i]["memory"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    if source:
        source.close()
    return {
        "mode": "gpu" if gpu else "cpu",
        "minutes": opts.burnin.minutes,
        "seconds": round(time.monotonic() - t0[0], 3),
        "window_s": window,
        "sizes": sizes,
        "gpus": [{**info, **res} for info, res in zip(infos, results, strict=True)],
        "telemetry": {
            "source": source.name if source else None,
            "why_none": why or None,
            "devices": matching,
            "samples": samples,
        },
        "counters": {"before": before, "after": after},
    }


def _uuid(device: Any) -> str:

    return device_uuid(device)
