"""The `gpu` extra must install beside the frameworks rocmstack drives (their own transformers pins)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def _gpu_extra() -> dict[str, Requirement]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    reqs = [Requirement(r) for r in data["project"]["optional-dependencies"]["gpu"]]
    return {r.name: r for r in reqs}


def test_gpu_extra_admits_verl_091_transformers_pin() -> None:
    # verl 0.9.1 (`verl[vllm]==0.9.1`) pins transformers==5.9.0; smoke framework runs in that interpreter.
    assert _gpu_extra()["transformers"].specifier.contains("5.9.0")
