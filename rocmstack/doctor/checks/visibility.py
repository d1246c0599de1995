"""Visibility masks (ROCR -> HIP -> CUDA) and the Ray variables that change who sets them."""

from __future__ import annotations

from rocmstack.doctor.model import Check, DoctorOptions, Result, failed, passed, warned
from rocmstack.platform.snapshot import Snapshot

TRUTHY = ("1", "true", "yes", "on")


def visibility_masks(snap: Snapshot, opts: DoctorOptions) -> Result:
    view = snap.masks()
    shown = ", ".join(f"{k}={snap.env[k]}" for k in view.set_vars) or "none set"
    if view.problems:
        return failed(
            view.problems[0],
            *view.problems[1:],
            f"masks: {shown}",
            fix="Set HIP_VISIBLE_DEVICES (AMD) or CUDA_VISIBLE_DEVICES (NVIDIA) to indices that exist, "
            "keep CUDA_VISIBLE_DEVICES equal to HIP_VISIBLE_DEVICES, and leave ROCR_VISIBLE_DEVICES "
            "unset",
        )
    if not view.set_vars:
        return passed(f"no visibility mask set: all {view.physical} device(s) visible")
    visible = (
        "unknown (UUIDs)"
        if view.visible is None
        else (f"{len(view.visible)} of {view.physical}: physical {list(view.visible)}")
    )
    return passed(f"masks consistent ({shown}); visible {visible}")


def ray_env(snap: Snapshot, opts: DoctorOptions) -> Result:
    env = snap.env
    on = {
        k
        for k in (
            "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES",
            "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES",
            "RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES",
        )
        if env.get(k, "").lower() in TRUTHY
    }
    override = env.get("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO")
    vendor = snap.vendor()
    notes = [f"{k}=1" for k in sorted(on)] + (
        [f"RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO={override}"] if override else []
    )
    if "RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES" in on:
        return warned(
            "RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES has no effect in current Ray",
            *notes,
            fix="Use RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES (and _CUDA_ to match)",
        )
    hip, cud = (
        "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES" in on,
        "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES" in on,
    )
    # On AMD Ray manages HIP_VISIBLE_DEVICES alone (ray/_private/accelerators/amd_gpu.py, 2.5x-2.60):
    # NOSET_HIP leaves every mask to the job; NOSET_CUDA changes nothing, so a CUDA mask the job sets stays
    # the same in every actor while Ray narrows HIP's, and the two disagree.
    if vendor == "amd" and cud and not hip:
        if "CUDA_VISIBLE_DEVICES" in env:
            return failed(
                "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES is set without _HIP_: on AMD Ray still sets "
                f"HIP_VISIBLE_DEVICES per actor, and CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']} stays "
                "as it is in every one, so HIP and CUDA masks disagree inside workers",
                *notes,
                fix="Set RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES=1 too, or unset CUDA_VISIBLE_DEVICES",
            )
        return warned(
            "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES has no effect on AMD: Ray manages HIP_VISIBLE_DEVICES",
            *notes,
            fix="Use RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES=1 to keep Ray's hands off the masks",
        )
    if override is not None and override.lower() in TRUTHY:
        return warned(
            "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=1: actors with num_gpus=0 get an empty device mask and "
            "see no GPU (verl's colocated workers need them visible)",
            *notes,
            fix="Unset it or set RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=0",
        )
    if not notes:
        return passed("Ray manages the visibility masks (no RAY_EXPERIMENTAL_NOSET_* / override set)")
    return passed("Ray visibility variables coherent", *notes)


CHECKS = (
    Check(
        "visibility-masks",
        "visibility",
        "HIP/CUDA/ROCR masks consistent",
        visibility_masks,
        "https://github.com/ray-project/ray/blob/master/python/ray/_private/accelerators/amd_gpu.py",
        frozenset({"tools", "amdsmi", "nvml"}),
    ),
    Check(
        "ray-env",
        "visibility",
        "RAY_EXPERIMENTAL_NOSET_* and override-on-zero",
        ray_env,
        "https://github.com/ray-project/ray/issues/54868",
    ),
)
