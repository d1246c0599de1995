"""GPU telemetry while a workload runs: clocks, power against the board limit, temperature, throttle
(violation) reasons, and the error counters a burn-in diffs (ECC correctable/uncorrectable, PCIe replays).

Sources: amdsmi on AMD (``amdsmi_get_clock_info``, ``amdsmi_get_power_info``, ``amdsmi_get_temp_metric``,
``amdsmi_get_violation_status``, ``amdsmi_get_gpu_total_ecc_count``, ``amdsmi_get_gpu_pci_replay_counter``),
NVML on NVIDIA (pynvml: ``nvmlDeviceGetClockInfo``, ``nvmlDeviceGetPowerUsage``,
``nvmlDeviceGetEnforcedPowerLimit``, ``nvmlDeviceGetTemperature``,
``nvmlDeviceGetCurrentClocksEventReasons``, ``nvmlDeviceGetTotalEccErrors``,
``nvmlDeviceGetPcieReplayCounter``), and a replay of recorded samples (a JSON timeline, for machines
without the GPUs). A reading a device does not support is None, never an error: every source returns
what it can. amdsmi's ``throttle_status`` bit field is not used: some firmware keeps its hotspot bit set
at idle (ROCm/rocm-systems#11781); the violation status says which limit is active.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

# Throttle reasons that mean the GPU is protecting itself (heat, a hardware signal), not running at the
# power cap it was given: only these count as time throttled.
PROTECTIVE = frozenset({"thermal", "hw-slowdown", "hw-power-brake", "prochot", "hbm-thermal", "vr-thermal"})

_NVML_REASONS = (  # nvmlClocksEventReason* bits (nvml.h); "power-cap" is the board running at its limit
    (0x4, "power-cap"),
    (0x8, "hw-slowdown"),
    (0x20, "thermal"),
    (0x40, "thermal"),
    (0x80, "hw-power-brake"),
)
_AMD_VIOLATIONS = (  # amdsmi_get_violation_status "active_*" flags
    ("active_prochot_thrm", "prochot"),
    ("active_ppt_pwr", "power-cap"),
    ("active_socket_thrm", "thermal"),
    ("active_vr_thrm", "vr-thermal"),
    ("active_hbm_thrm", "hbm-thermal"),
)


@dataclass(frozen=True)
class GpuSample:
    gfx_mhz: float | None = None
    mem_mhz: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temp_c: float | None = None
    throttle: tuple[str, ...] = ()


@dataclass(frozen=True)
class Counters:
    ecc_correctable: int | None = None
    ecc_uncorrectable: int | None = None
    pcie_replay: int | None = None


@dataclass(frozen=True)
class Device:
    index: int
    uuid: str
    name: str


class Source(Protocol):
    name: str

    def devices(self) -> list[Device]: ...
    def sample(self) -> list[GpuSample]: ...
    def counters(self) -> list[Counters]: ...
    def close(self) -> None: ...


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _try(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:  # an unsupported reading on this device or driver: None
        return None


class NvmlSource:
    name = "nvml"

    def __init__(self) -> None:
        try:
            import pynvml
        except ImportError:  # Ray carries its own copy of the same bindings
            from ray._private.thirdparty import pynvml

        pynvml.nvmlInit()
        self._nv = pynvml
        self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]

    def devices(self) -> list[Device]:
        nv = self._nv
        return [
            Device(i, str(_try(nv.nvmlDeviceGetUUID, h) or ""), str(nv.nvmlDeviceGetName(h)))
            for i, h in enumerate(self._handles)
        ]

    def _reasons(self, handle: Any) -> tuple[str, ...]:
        nv = self._nv
        # the Event name since NVML 12.2; the Throttle name before (and still, deprecated)
        getter = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
        mask = _try(getter or nv.nvmlDeviceGetCurrentClocksThrottleReasons, handle)
        if not isinstance(mask, int):
            return ()
        return tuple(sorted({name for bit, name in _NVML_REASONS if mask & bit}))

    def sample(self) -> list[GpuSample]:
        nv = self._nv
        out = []
        for h in self._handles:
            power = _num(_try(nv.nvmlDeviceGetPowerUsage, h))  # mW
            limit = _num(_try(nv.nvmlDeviceGetEnforcedPowerLimit, h))  # mW
            out.append(
                GpuSample(
                    gfx_mhz=_num(_try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)),
                    mem_mhz=_num(_try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM)),
                    power_w=None if power is None else power / 1000,
                    power_limit_w=None if limit is None else limit / 1000,
                    temp_c=_num(_try(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)),
                    throttle=self._reasons(h),
                )
            )
        return out

    def counters(self) -> list[Counters]:
        nv = self._nv

        def ecc(h: Any, kind: int) -> int | None:
            return _int(_try(nv.nvmlDeviceGetTotalEccErrors, h, kind, nv.NVML_VOLATILE_ECC))

        return [
            Counters(
                ecc(h, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED),
                ecc(h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED),
                _int(_try(nv.nvmlDeviceGetPcieReplayCounter, h)),
            )
            for h in self._handles
        ]

    def close(self) -> None:
        _try(self._nv.nvmlShutdown)


class AmdSmiSource:
    name = "amdsmi"

    def __init__(self) -> None:
        import amdsmi

        amdsmi.amdsmi_init()
        self._a = amdsmi
        self._handles = list(amdsmi.amdsmi_get_processor_handles())

    def devices(self) -> list[Device]:
        a = self._a
        return [
            Device(
                i,
                str(_try(a.amdsmi_get_gpu_device_uuid, h) or ""),
                str((_try(a.amdsmi_get_gpu_asic_info, h) or {}).get("market_name", "AMD GPU")),
            )
            for i, h in enumerate(self._handles)
        ]

    def sample(self) -> list[GpuSample]:
        a = self._a
        out = []
        for h in self._handles:
            gfx = _try(a.amdsmi_get_clock_info, h, a.AmdSmiClkType.GFX) or {}
            mem = _try(a.amdsmi_get_clock_info, h, a.AmdSmiClkType.MEM) or {}
            power = _try(a.amdsmi_get_power_info, h) or {}
            temp = _try(
                a.amdsmi_get_temp_metric,
                h,
                a.AmdSmiTemperatureType.HOTSPOT,
                a.AmdSmiTemperatureMetric.CURRENT,
            )
            violations = _try(a.amdsmi_get_violation_status, h) or {}
            watts = _num(power.get("socket_power"))
            if watts is None:
                watts = _num(power.get("current_socket_power")) or _num(power.get("average_socket_power"))
            out.append(
                GpuSample(
                    gfx_mhz=_num(gfx.get("clk")),
                    mem_mhz=_num(mem.get("clk")),
                    power_w=watts,
                    power_limit_w=_num(power.get("power_limit")),
                    temp_c=_num(temp),
                    throttle=tuple(
                        sorted({name for key, name in _AMD_VIOLATIONS if violations.get(key) is True})
                    ),
                )
            )
        return out

    def counters(self) -> list[Counters]:
        a = self._a
        out = []
        for h in self._handles:
            ecc = _try(a.amdsmi_get_gpu_total_ecc_count, h) or {}
            out.append(
                Counters(
                    _int(ecc.get("correctable_count")),
                    _int(ecc.get("uncorrectable_count")),
                    _int(_try(a.amdsmi_get_gpu_pci_replay_counter, h)),
                )
            )
        return out

    def close(self) -> None:
        _try(self._a.amdsmi_shut_down)


class ReplaySource:
    """Recorded samples played back against the run's progress: a JSON file with ``devices`` and a
    ``timeline`` of ``{"at": fraction of the run, "gpus": [sample + counters, ...]}`` entries; each reading
    is the last entry at or before the run's progress (0 at the start, 1 at the end)."""

    def __init__(self, path: Path, progress: Callable[[], float]) -> None:
        data = json.loads(path.read_text(encoding="utf-8"))
        self.name = f"replay of {path.name}"
        self.source = str(data.get("source", ""))
        self._devices = [Device(int(d["index"]), str(d["uuid"]), str(d["name"])) for d in data["devices"]]
        self._timeline = sorted(data["timeline"], key=lambda e: float(e["at"]))
        self._progress = progress

    def _now(self) -> list[dict]:
        at = self._progress()
        entry = self._timeline[0]
        for e in self._timeline:
            if float(e["at"]) <= at:
                entry = e
        return list(entry["gpus"])

    def devices(self) -> list[Device]:
        return list(self._devices)

    def sample(self) -> list[GpuSample]:
        return [
            GpuSample(
                _num(g.get("gfx_mhz")),
                _num(g.get("mem_mhz")),
                _num(g.get("power_w")),
                _num(g.get("power_limit_w")),
                _num(g.get("temp_c")),
                tuple(g.get("throttle") or ()),
            )
            for g in self._now()
        ]

    def counters(self) -> list[Counters]:
        return [
            Counters(
                _int(g.get("ecc_correctable")), _int(g.get("ecc_uncorrectable")), _int(g.get("pcie_replay"))
            )
            for g in self._now()
        ]

    def close(self) -> None:
        pass


def _norm(uuid: str) -> str:
    u = uuid.strip().lower()
    return (u[4:] if u.startswith("gpu-") else u).replace("-", "")


class Matched:
    """A source's readings in the workload's device order: NVML and amdsmi list every GPU of the node in
    their own order, torch only the visible ones in its order; matched by UUID."""

    def __init__(self, source: Source, order: list[int]) -> None:
        self.name = source.name
        self._source = source
        self._order = order

    def devices(self) -> list[Device]:
        listed = self._source.devices()
        return [Device(i, listed[j].uuid, listed[j].name) for i, j in enumerate(self._order)]

    def sample(self) -> list[GpuSample]:
        got = self._source.sample()
        return [got[j] for j in self._order]

    def counters(self) -> list[Counters]:
        got = self._source.counters()
        return [got[j] for j in self._order]

    def close(self) -> None:
        self._source.close()


def match(source: Source, uuids: list[str]) -> tuple[Source, str]:
    """``source`` reordered to the devices with these UUIDs; as it is (by position) when one is not found."""
    listed = {_norm(d.uuid): i for i, d in enumerate(source.devices()) if d.uuid}
    order = [listed.get(_norm(u)) for u in uuids]
    if all(j is not None for j in order):
        return Matched(source, [j for j in order if j is not None]), "matched by UUID"
    return source, "matched by position (a UUID was not found in the telemetry library's list)"


def open_source(vendor: str | None) -> tuple[Source | None, str]:
    """The library source for this node's GPUs, or None with why."""
    attempts: list[tuple[str, Callable[[], Source]]] = []
    if vendor == "amd":
        attempts.append(("amdsmi", AmdSmiSource))
    if vendor == "nvidia":
        attempts.append(("NVML (pynvml)", NvmlSource))
    if not attempts:
        return None, "no AMD or NVIDIA GPU: no telemetry library to read"
    why = []
    for label, make in attempts:
        try:
            return make(), ""
        except Exception as exc:  # the library missing or failing to initialise: say which and go on
            why.append(f"{label}: {type(exc).__name__}: {exc}"[:200])
    return None, "; ".join(why)


@dataclass
class Sampler:
    """Reads ``source`` every ``interval_s`` on a thread until stopped; bounded by ``max_samples``."""

    source: Source
    interval_s: float = 1.0
    max_samples: int = 100_000
    samples: list[dict] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        t0 = time.monotonic()
        while not self._stop.is_set() and len(self.samples) < self.max_samples:
            at = time.monotonic() - t0
            readings = _try(self.source.sample)
            if readings is not None:
                self.samples.append({"t": round(at, 3), "gpus": [asdict(s) for s in readings]})
            self._stop.wait(self.interval_s)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="rocmstack-telemetry", daemon=True)
        self._thread.start()

    def stop(self) -> list[dict]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 2 * self.interval_s))
        return self.samples
