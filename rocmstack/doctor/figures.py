"""The measured figures of a doctor report as flat, labelled values in base units (bytes, seconds, FLOP/s):
what ``--prometheus`` exports and ``--history`` compares. Read from the level-2 probe data (``active``) and
from the ``data`` a check attaches (ECC counters); a report without them gives only its duration."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Figure:
    name: str  # Prometheus name after the rocmstack_doctor_ prefix, unit included
    help: str
    labels: tuple[tuple[str, str], ...]
    value: float
    kind: str = "gauge"  # "counter" for a count that only rises (its name ends in _total)
    better: str | None = "higher"  # "higher", "lower", or None: not judged run to run

    @property
    def key(self) -> str:
        """Stable across runs of one node: the name and its labels."""
        if not self.labels:
            return self.name
        return self.name + "{" + ",".join(f"{k}={v}" for k, v in self.labels) + "}"


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _collectives(active: Mapping[str, Any]) -> list[Figure]:
    data = active.get("collectives")
    if not isinstance(data, dict):
        return []
    out = []
    for row in data.get("rows") or []:
        busbw = _num(row.get("busbw"))
        if busbw is None:
            continue
        out.append(
            Figure(
                "collective_busbw_bytes_per_second",
                "Collective bus bandwidth (nccl-tests busbw) on this node's GPUs.",
                (
                    ("op", str(row.get("op"))),
                    ("size_bytes", str(row.get("nbytes"))),
                    ("ranks", str(row.get("ranks", data.get("ranks")))),
                ),
                busbw * 1e9,
            )
        )
    return out


def _health(active: Mapping[str, Any]) -> list[Figure]:
    rows = active.get("health")
    if not isinstance(rows, list):
        return []
    out = []
    for index, row in enumerate(rows):
        labels = (("gpu", str(index)), ("uuid", str(row.get("uuid") or row.get("device") or "")))
        if (hbm := _num(row.get("hbm_copy_gbs"))) is not None:
            out.append(
                Figure(
                    "gpu_hbm_copy_bytes_per_second",
                    "HBM copy bandwidth of one GPU (bytes read + written per second).",
                    labels,
                    hbm * 1e9,
                )
            )
        if (gemm := _num(row.get("gemm_bf16_tflops"))) is not None:
            out.append(
                Figure(
                    "gpu_gemm_bf16_flops_per_second",
                    "bf16 GEMM throughput of one GPU.",
                    labels,
                    gemm * 1e12,
                )
            )
    return out


def _weight_sync(active: Mapping[str, Any]) -> list[Figure]:
    data = active.get("weight_sync")
    if not isinstance(data, dict):
        return []
    seconds = [
        s
        for r in data.get("rounds") or []
        if isinstance(r.get("split"), dict) and r["split"].get("ok")
        for s in [_num((r["split"].get("trainer") or {}).get("seconds"))]
        if s is not None
    ]
    if not seconds:
        return []
    return [
        Figure(
            "weight_sync_broadcast_seconds",
            "Split trainer -> rollout weight broadcast, median over the start-ups.",
            (("size_bytes", str(data.get("sync_bytes"))),),
            statistics.median(seconds),
            better="lower",
        )
    ]


def _burn_in(active: Mapping[str, Any]) -> list[Figure]:
    data = active.get("burn_in")
    if not isinstance(data, dict):
        return []
    out = []
    for gpu in data.get("gpus") or []:
        windows = gpu.get("windows") or []
        if not windows:
            continue
        labels = (("gpu", str(gpu.get("index"))), ("uuid", str(gpu.get("uuid", ""))))
        for key, name, scale, what in (
            ("gemm_tflops", "burnin_gemm_bf16_flops_per_second", 1e12, "bf16 GEMM"),
            ("hbm_gbs", "burnin_hbm_copy_bytes_per_second", 1e9, "HBM copy"),
        ):
            rates = [v for w in windows if (v := _num(w.get(key))) is not None]
            if rates:
                out.append(
                    Figure(
                        name,
                        f"Burn-in {what} rate of one GPU, median over its windows.",
                        labels,
                        statistics.median(rates) * scale,
                    )
                )
    return out


def _ecc(checks: list[dict]) -> list[Figure]:
    out = []
    for check in checks:
        for row in (check.get("data") or {}).get("ecc") or []:
            for kind in ("correctable", "uncorrectable"):
                if (count := _num(row.get(kind))) is not None:
                    out.append(
                        Figure(
                            "gpu_ecc_errors_total",
                            "ECC/RAS errors the driver counted on a GPU.",
                            (("gpu", str(row.get("gpu"))), ("type", kind)),
                            count,
                            kind="counter",
                            better=None,
                        )
                    )
    return out


def from_active(active: Mapping[str, Any] | None) -> list[Figure]:
    active = active or {}
    return [*_collectives(active), *_health(active), *_weight_sync(active), *_burn_in(active)]


def from_report(report: Mapping[str, Any]) -> list[Figure]:
    duration = Figure(
        "duration_seconds", "Wall time of the doctor run.", (), float(report.get("seconds", 0.0)), better=None
    )
    return [duration, *from_active(report.get("active")), *_ecc(list(report.get("checks", [])))]
