"""Secrets never leave the doctor: the environment dump masks them by name, and every string in a report is
scrubbed of their values (a tool's error message can echo a token)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rocmstack.secrets import is_secret_name

REDACTED = "<redacted>"
DUMP_PREFIXES = (
    "HIP_",
    "ROCR_",
    "CUDA_",
    "HSA_",
    "ROCM",
    "RAY_",
    "PYTORCH_",
    "TORCH_",
    "VLLM_",
    "SGLANG_",
    "NCCL_",
    "RCCL_",
    "AMD_",
    "HF_",
    "WANDB_",
    "ROCMSTACK_",
)


def secret_values(env: Mapping[str, str]) -> list[str]:
    # Longest first, so a token that contains another is replaced whole; short values would mask noise.
    return sorted({v for k, v in env.items() if is_secret_name(k) and len(v) >= 6}, key=len, reverse=True)


def env_dump(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that matter to a GPU job, secrets masked."""
    return {
        k: (REDACTED if is_secret_name(k) else v)
        for k, v in sorted(env.items())
        if k.startswith(DUMP_PREFIXES) or is_secret_name(k)
    }


def scrub(obj: Any, secrets: list[str]) -> Any:
    if not secrets:
        return obj
    if isinstance(obj, str):
        for value in secrets:
            obj = obj.replace(value, REDACTED)
        return obj
    if isinstance(obj, dict):
        return {k: scrub(v, secrets) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [scrub(v, secrets) for v in obj]
    return obj
