"""GPU visibility masks: which physical devices a process will see, and which mask combinations break Ray,
torch or vLLM.

AMD: ROCR_VISIBLE_DEVICES filters first (ROCm runtime); HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES, which
HIP also honours) then indexes what ROCR left. NVIDIA: CUDA_VISIBLE_DEVICES alone; the runtime stops at the
first entry that names no device, dropping every entry after it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

RAY_ROCR_ERROR = "RuntimeError: Please use HIP_VISIBLE_DEVICES instead of ROCR_VISIBLE_DEVICES"
MASK_VARS = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")


@dataclass(frozen=True)
class MaskView:
    vendor: str
    physical: int
    after_rocr: tuple[int, ...] | None  # None: a mask names UUIDs, the indices cannot be worked out here
    visible: tuple[int, ...] | None
    problems: tuple[str, ...]
    set_vars: tuple[str, ...]

    @property
    def visible_count(self) -> int | None:
        return None if self.visible is None else len(self.visible)


def tokens(value: str | None) -> list[str] | None:
    if value is None:
        return None
    if value.strip() in ("", "NoDevFiles"):
        return []
    return [t.strip() for t in value.split(",")]


def _select(pool: list[int], toks: list[str], var: str, problems: list[str]) -> list[int] | None:
    chosen: list[int] = []
    for tok in toks:
        if not tok.lstrip("-").isdigit():
            return None  # a UUID: resolvable only by the runtime
        i = int(tok)
        if i < 0 or i >= len(pool):
            problems.append(
                f"{var}={','.join(toks)} names device {i}, but only {len(pool)} "
                f"device(s) are there to choose from; the runtime ignores it and every entry after it"
            )
            break
        if pool[i] in chosen:
            problems.append(f"{var} lists device {i} twice")
            continue
        chosen.append(pool[i])
    return chosen


def mask_view(vendor: str, physical: int, env: Mapping[str, str]) -> MaskView:
    rocr, hip, cuda = (
        env.get(k) for k in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
    )
    set_vars = tuple(k for k in MASK_VARS if env.get(k) is not None)
    problems: list[str] = []
    # No device found: index checks would be noise; only the structural rules apply.
    pool: list[int] | None = list(range(physical)) if physical > 0 else None
    if vendor == "amd":
        if rocr is not None and hip is None:
            problems.append(
                f"ROCR_VISIBLE_DEVICES is set without HIP_VISIBLE_DEVICES: Ray raises {RAY_ROCR_ERROR}"
            )
        if hip is not None and cuda is not None and tokens(hip) != tokens(cuda):
            problems.append(
                f"HIP_VISIBLE_DEVICES={hip} and CUDA_VISIBLE_DEVICES={cuda} disagree: Ray releases with the "
                "consistency guard raise ValueError ('Inconsistant values found'), vLLM's ROCm platform "
                "asserts "
                "they match, torch silently prefers HIP"
            )
        rocr_toks = tokens(rocr)
        if rocr_toks is not None and pool is not None:
            pool = _select(pool, rocr_toks, "ROCR_VISIBLE_DEVICES", problems)
        after_rocr = None if pool is None else tuple(pool)
        hip_toks = tokens(hip if hip is not None else cuda)
        if hip_toks is not None and pool is not None:
            if rocr_toks is not None and len(hip_toks) > len(pool):
                problems.append(
                    f"HIP_VISIBLE_DEVICES lists {len(hip_toks)} devices but ROCR_VISIBLE_DEVICES leaves "
                    f"{len(pool)}: "
                    "torch raises 'HIP_VISIBLE_DEVICES contains more devices than ROCR_VISIBLE_DEVICES'"
                )
            pool = _select(
                pool, hip_toks, "HIP_VISIBLE_DEVICES" if hip is not None else "CUDA_VISIBLE_DEVICES", problems
            )
        visible = None if pool is None else tuple(pool)
    else:
        after_rocr = None if pool is None else tuple(pool)
        cuda_toks = tokens(cuda)
        if cuda_toks is not None and pool is not None:
            pool = _select(pool, cuda_toks, "CUDA_VISIBLE_DEVICES", problems)
        visible = None if pool is None else tuple(pool)
    return MaskView(vendor, physical, after_rocr, visible, tuple(problems), set_vars)


def process_visibility(env: Mapping[str, str], seen: int | None) -> str:
    """The GPUs a process's runtime counted and the masks in its environment, e.g. ``0 GPU(s) visible,
    CUDA_VISIBLE_DEVICES='1'``: said when an engine or a worker finds no GPU, since a mask set for that
    process alone (a launcher, Ray's per-actor mask) is invisible to checks that run in other processes."""
    masks = ", ".join(f"{k}={env[k]!r}" for k in MASK_VARS if env.get(k) is not None)
    count = "?" if seen is None else str(seen)
    return f"{count} GPU(s) visible, " + (masks or "no visibility mask set")
