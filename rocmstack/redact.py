"""Secrets never leave the doctor: the environment dump masks them by name, and every string in a report is
scrubbed of their values (a tool's error message can echo a token). A URL's user information
(``https://user:token@host``, in any value or message) is a secret wherever it appears."""

from __future__ import annotations

import re
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


# scheme://userinfo@ : the userinfo stops at the first '/', '?', '#' or space, as in RFC 3986's authority.
_URL_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)([^\s/?#@]+)@")


def redact_url(text: str) -> str:
    """``text`` with every URL's user information masked (``https://<redacted>@host/...``)."""
    return _URL_USERINFO.sub(rf"\1{REDACTED}@", text)


def secret_values(env: Mapping[str, str]) -> list[str]:
    """Values to scrub from every string: secret-named variables' values, and the user information of URLs
    in any variable (a tool can echo ``user:token`` or the token alone, without the URL)."""
    found = {v for k, v in env.items() if is_secret_name(k)}
    for value in env.values():
        for m in _URL_USERINFO.finditer(value):
            found |= {m.group(2), m.group(2).partition(":")[2]}
    # Longest first, so a token that contains another is replaced whole; short values would mask noise.
    return sorted({v for v in found if len(v) >= 6}, key=len, reverse=True)


def env_dump(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that matter to a GPU job, secrets masked (by name, and in URLs)."""
    return {
        k: (REDACTED if is_secret_name(k) else redact_url(v))
        for k, v in sorted(env.items())
        if k.startswith(DUMP_PREFIXES) or is_secret_name(k)
    }


def scrub(obj: Any, secrets: list[str]) -> Any:
    """``obj`` with every string scrubbed of ``secrets`` and of URL user information."""
    if isinstance(obj, str):
        for value in secrets:
            obj = obj.replace(value, REDACTED)
        return redact_url(obj)
    if isinstance(obj, dict):
        return {k: scrub(v, secrets) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [scrub(v, secrets) for v in obj]
    return obj
