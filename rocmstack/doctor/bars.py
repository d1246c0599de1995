"""Bars (bars.yaml, or a file given with --bars) and saved baselines, and how a measurement is judged:
below its bar fails, below 90 % of the saved baseline warns."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rocmstack.errors import InputError, quoted
from rocmstack.gpu.collectives import OPS, parse_size

BASELINE_WARN = 0.90
DEFAULT_BARS = Path(__file__).with_name("bars.yaml")


@dataclass(frozen=True)
class CollectiveBar:
    gpu: str
    gpus: int
    op: str
    nbytes: int
    min_busbw: float
    source: str
    nodes: int = 1  # ranks spread over this many nodes (1: one node's GPUs; level 3: one rank per node)


@dataclass(frozen=True)
class HealthBar:
    gpu: str
    hbm_copy_gbs: float | None
    gemm_bf16_tflops: float | None
    source: str


@dataclass(frozen=True)
class BenchBar:
    arch: str  # gfx target or CUDA capability, as gpu_specs.yaml names it (gfx942, sm_90)
    min_mbu: float  # decode MBU against the node's measured copy bandwidth, at the bench's largest batch
    source: str


@dataclass(frozen=True)
class Bars:
    collectives: tuple[CollectiveBar, ...]
    health: tuple[HealthBar, ...]
    bench: tuple[BenchBar, ...] = ()

    def for_bench(self, arch: str | None) -> BenchBar | None:
        return next((b for b in self.bench if arch and b.arch.lower() == arch.lower()), None)

    def for_collectives(self, gpu_name: str, gpus: int, nodes: int = 1) -> list[CollectiveBar]:
        return [
            b
            for b in self.collectives
            if b.gpu.lower() in gpu_name.lower() and b.gpus == gpus and b.nodes == nodes
        ]

    def for_health(self, gpu_name: str) -> HealthBar | None:
        return next((b for b in self.health if b.gpu.lower() in gpu_name.lower()), None)


def _field(path: Path, where: str, row: dict, key: str, kind: type) -> Any:
    if key not in row:
        raise InputError(f"{path}: {where} has no {key!r}", fix=f"add {key}: to every entry")
    value = row[key]
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise InputError(
            f"{path}: {where}.{key} = {quoted(value)} is not a {kind.__name__}", fix="fix the value"
        ) from None


def load_bars(path: Path | None = None) -> Bars:
    path = path or DEFAULT_BARS
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise InputError(f"--bars {quoted(path)}: {exc.strerror}", fix="give a readable YAML file") from None
    except yaml.YAMLError as exc:
        raise InputError(
            f"--bars {quoted(path)}: not YAML ({str(exc).splitlines()[0]})", fix="fix the YAML"
        ) from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: top level must be a mapping", fix="collectives: [...], health: [...]")
    coll = []
    for i, row in enumerate(data.get("collectives") or []):
        where = f"collectives[{i}]"
        op = _field(path, where, row, "op", str)
        if op not in OPS:
            raise InputError(f"{path}: {where}.op = {quoted(op)} is unknown", fix=f"one of {', '.join(OPS)}")
        try:
            nbytes = parse_size(str(row.get("bytes", "")))
        except ValueError as exc:
            raise InputError(f"{path}: {where}.bytes: {exc}", fix="e.g. bytes: 8GiB") from None
        coll.append(
            CollectiveBar(
                _field(path, where, row, "gpu", str),
                _field(path, where, row, "gpus", int),
                op,
                nbytes,
                _field(path, where, row, "min_busbw", float),
                _field(path, where, row, "source", str),
                _field(path, where, row, "nodes", int) if "nodes" in row else 1,
            )
        )
    health = []
    for i, row in enumerate(data.get("health") or []):
        where = f"health[{i}]"
        hbm, gemm = row.get("hbm_copy_gbs"), row.get("gemm_bf16_tflops")
        health.append(
            HealthBar(
                _field(path, where, row, "gpu", str),
                None if hbm is None else _field(path, where, row, "hbm_copy_gbs", float),
                None if gemm is None else _field(path, where, row, "gemm_bf16_tflops", float),
                _field(path, where, row, "source", str),
            )
        )
    bench = []
    for i, row in enumerate(data.get("bench") or []):
        where = f"bench[{i}]"
        floor = _field(path, where, row, "min_mbu", float)
        if not 0 < floor < 1:
            raise InputError(
                f"{path}: {where}.min_mbu = {floor} is not a share of the roofline", fix="a number in (0, 1)"
            )
        bench.append(
            BenchBar(_field(path, where, row, "arch", str), floor, _field(path, where, row, "source", str))
        )
    return Bars(tuple(coll), tuple(health), tuple(bench))


def default_baseline_path(env: dict[str, str] | None = None) -> Path:
    env = env if env is not None else dict(os.environ)
    cache = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".cache")
    return Path(cache) / "rocmstack" / "doctor-baseline.json"


def baseline_key(op: str, nbytes: int, ranks: int, gpu: str) -> str:
    return f"{gpu}|{ranks}|{op}|{nbytes}"


def load_baseline(path: Path) -> dict[str, float]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(
            f"baseline {quoted(path)} is unreadable: {exc}",
            fix="delete it, or save it again with --save-busbw-baseline FILE",
        ) from None
    return {str(k): float(v) for k, v in (data.get("busbw") or {}).items()}


def save_baseline(path: Path, values: dict[str, float], meta: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"busbw": values, **meta}, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)  # never half-written
