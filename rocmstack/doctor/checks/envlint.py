"""Level 1 environment lint: variables with a stack prefix (NCCL_, HSA_, HIP_, RAY_, VLLM_, ...) that no scanned
package reads, with the nearest real name. The names are data (known_env.json, made by ci/gen_known_env.py from
the real packages and, for the ROCm projects outside PyPI, from their source trees); a prefix is judged only
where the data says its owner was scanned."""

from __future__ import annotations

import difflib
import json
import re
from functools import cache
from pathlib import Path

from rocmstack.doctor.model import Check, DoctorOptions, Result, passed, warned
from rocmstack.platform.snapshot import Snapshot

KNOWN = Path(__file__).resolve().parents[1] / "known_env.json"
PREFIXES = ("NCCL_", "RCCL_", "HSA_", "HIP_", "RAY_", "VLLM_", "SGLANG_", "AITER_", "TORCH_", "PYTORCH_")
# Ray reads every C++ config entry as RAY_<name> with the entry's lower-case name (ray_config_def.h); the
# compiled names are not greppable from the wheel's Python, so lower-case RAY_ names are not judged.
RAY_CPP_CONFIG = re.compile(r"^RAY_[a-z][a-z0-9_]*$")
# Set by base images as labels of what they contain (nvidia/cuda: NCCL_VERSION; pytorch images: PYTORCH_*).
IMAGE_METADATA = frozenset(
    {"NCCL_VERSION", "PYTORCH_VERSION", "PYTORCH_BUILD_VERSION", "PYTORCH_BUILD_NUMBER"}
)


@cache
def _data() -> dict:
    data: dict = json.loads(KNOWN.read_text(encoding="utf-8"))
    return data


@cache
def known() -> tuple[frozenset[str], tuple[str, ...], tuple[str, ...]]:
    data = _data()
    names = frozenset(data["names"]) | frozenset(data.get("cited", {}))
    return names, tuple(data["prefixes_judged"]), tuple(data["sources"])


@cache
def made_names() -> re.Pattern[str]:
    """Names built at run time (ROCr reads HSA_OVERRIDE_GFX_VERSION_<node>), as one expression."""
    patterns = _data().get("name_patterns", [])
    return re.compile("|".join(f"(?:{p})" for p in patterns) or "(?!)")


def unknown_vars(env: dict[str, str]) -> list[tuple[str, str | None]]:
    names, judged, _ = known()
    out = []
    for var in sorted(env):
        prefix = next((p for p in PREFIXES if var.startswith(p)), None)
        if (
            prefix is None
            or prefix not in judged
            or var in names
            or var in IMAGE_METADATA
            or RAY_CPP_CONFIG.match(var)
            or made_names().fullmatch(var)
        ):
            continue
        same = sorted(n for n in names if n.startswith(prefix))
        near = difflib.get_close_matches(var, same, n=1, cutoff=0.6)
        out.append((var, near[0] if near else None))
    return out


def env_unknown(snap: Snapshot, opts: DoctorOptions) -> Result:
    env = opts.environ()
    found = unknown_vars(env)
    _, judged, sources = known()
    if found:
        lines = [
            f"{var}: no known version reads it" + (f"; did you mean {near}?" if near else "")
            for var, near in found
        ]
        return warned(
            f"{len(found)} variable(s) that nothing reads: {', '.join(v for v, _ in found)}",
            *lines,
            f"names from: {'; '.join(sources)}",
            fix="Fix the name (the setting is silently ignored as it is) or remove it",
        )
    checked = sum(1 for v in env if any(v.startswith(p) for p in judged))
    return passed(f"{checked} variable(s) with {', '.join(judged)} prefixes, all read by a known package")


CHECKS = (
    Check(
        "env-unknown-vars",
        "environment",
        "NCCL_/RAY_/VLLM_/... variables that something reads",
        env_unknown,
        "https://github.com/vllm-project/vllm/issues/46895",
    ),
)
