"""Runtime settings that break a working image: allocator x custom all-reduce, SGLang's AITER switches,
and the version floors of vLLM sleep mode."""

from __future__ import annotations

import re

from rocmstack.doctor.checks.image import applied_patch_ids
from rocmstack.doctor.checks.visibility import TRUTHY
from rocmstack.doctor.model import Check, DoctorOptions, Result, failed, passed, skipped, warned
from rocmstack.platform.snapshot import Snapshot

ALLOC_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "PYTORCH_ALLOC_CONF")  # first set one wins


def _version(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    m = re.match(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?", text)
    return tuple(int(g) for g in m.groups() if g is not None) if m else None


def alloc_allreduce(snap: Snapshot, opts: DoctorOptions) -> Result:
    var = next((v for v in ALLOC_VARS if snap.env.get(v) is not None), None)
    if var is None:
        return passed("no PYTORCH_*ALLOC_CONF set")
    conf = snap.env[var]
    if not re.search(r"expandable_segments\s*:\s*true", conf, re.IGNORECASE):
        return passed(f"{var}={conf} (expandable_segments off)")
    if not snap.rocm_env():
        return passed(f"{var} enables expandable_segments (harmless outside ROCm)")
    tp = opts.tensor_parallel
    if tp is not None and tp <= 1:
        return passed(f"{var} enables expandable_segments; TP={tp}, no custom all-reduce")
    if "verl-rollout-defaults" in applied_patch_ids(opts):
        return passed(
            f"{var} enables expandable_segments; custom all-reduce disabled by the verl-rollout-defaults "
            "patch"
        )
    msg = (
        f"{var}={conf}: with expandable segments, custom all-reduce fails at TP>1 "
        "(hipIpcGetMemHandle ... invalid argument)"
    )
    fix = "Disable custom all-reduce (vLLM/SGLang disable_custom_all_reduce=True) or drop expandable_segments"
    if tp is not None:
        return failed(f"{msg}; TP={tp}", fix=fix)
    return warned(f"{msg}; pass --tensor-parallel N to judge", fix=fix)


def sglang_env(snap: Snapshot, opts: DoctorOptions) -> Result:
    env = snap.env
    installed = snap.dists.get("sglang")
    use_aiter = env.get("SGLANG_USE_AITER")
    backend = env.get("SGLANG_ATTENTION_BACKEND")
    if installed is None and use_aiter is None and backend is None:
        return skipped("SGLang is not installed and no SGLANG_* variable is set")
    aiter_on = use_aiter is not None and use_aiter.lower() in TRUTHY
    problems = []
    if aiter_on and not snap.dists.get("aiter") and not snap.module("aiter"):
        problems.append("SGLANG_USE_AITER=1 but aiter is not installed")
    if backend and backend.lower() == "aiter" and not aiter_on:
        problems.append(f"SGLANG_ATTENTION_BACKEND={backend} needs SGLANG_USE_AITER=1 (it is {use_aiter!r})")
    if problems:
        return failed(
            problems[0],
            *problems[1:],
            fix="verl's ROCm image runs SGLANG_USE_AITER=0 with SGLANG_ATTENTION_BACKEND=triton",
        )
    if installed and not aiter_on and snap.rocm_env():
        applied = applied_patch_ids(opts)  # empty outside a rocmstack image: nothing to judge there
        if applied and "sglang-rmsnorm" not in applied:
            return warned(
                "AITER is off but the sglang-rmsnorm patch is not applied: layernorm calls "
                "fused_add_rms_norm with 6 arguments and fails ('takes 4 positional arguments but 6 were "
                "given')",
                fix="Apply the sglang-rmsnorm patch (SGLang PR #32034)",
            )
    return passed(
        f"SGLang {installed or '(not installed)'}: SGLANG_USE_AITER={use_aiter}, "
        f"SGLANG_ATTENTION_BACKEND={backend}"
    )


def rocm_version(snap: Snapshot) -> str | None:
    torch = snap.probe("torch") or {}
    if torch.get("hip"):
        return str(torch["hip"])
    for name in ("rocm-sdk-core", "rocm"):
        if snap.dists.get(name):
            return snap.dists[name]
    m = re.search(r"\+rocm(\d+(?:\.\d+)*)", snap.dists.get("torch", ""))
    return m.group(1) if m else None


def version_floors(snap: Snapshot, opts: DoctorOptions) -> Result:
    vllm = snap.dists.get("vllm")
    if not snap.rocm_env():
        return skipped("not a ROCm environment")
    rocm = rocm_version(snap)
    problems, notes = [], [f"ROCm {rocm or 'unknown'}", f"vLLM {vllm or 'not installed'}"]
    rv = _version(rocm)
    if vllm:
        vv = _version(vllm)
        if vv is not None and vv[:2] <= (0, 11):
            problems.append(
                f"vLLM {vllm}: sleep mode (enable_sleep_mode, verl's colocated rollout) needs vLLM > 0.11"
            )
        if rv is not None and rv[:1] < (7,):
            problems.append(f"ROCm {rocm}: vLLM sleep mode on ROCm needs ROCm >= 7.0")
    if problems:
        return failed(
            problems[0],
            *problems[1:],
            *notes,
            fix="Use vLLM > 0.11 on ROCm >= 7.0, or turn sleep mode off (slower colocated rollout)",
        )
    if rv is not None and rv[:2] < (7, 1):
        # Before ROCm 7.1 a child forked after pinned host allocations segfaults on parts of them (fixed by
        # rocm-systems PR #356). Only a writer that copies to pinned memory with non_blocking=True and then
        # forks is exposed: Megatron-Core's async checkpoint save, unless slime swaps in its ROCm writer.
        # Many labs stay on 7.0 on purpose (7.2's memory regressions), so the version alone is no finding.
        megatron, slime = snap.dists.get("megatron-core"), snap.dists.get("slime")
        if megatron and not slime:
            return warned(
                f"ROCm {rocm} < 7.1 with Megatron-Core {megatron} and no slime: async checkpoint saving "
                "copies to pinned memory with non_blocking=True, then forks writers, which can segfault",
                *notes,
                fix="Turn async checkpoint saving off (no --async-save), or make the writer use "
                "non_blocking=False on HIP (as slime/utils/rocm_checkpoint_writer.py does), or use ROCm >= 7.1",
            )
        guard = (
            f"slime {slime} swaps in slime/utils/rocm_checkpoint_writer.py (non_blocking=False on HIP)"
            if megatron
            else "no Megatron-Core async checkpoint writer installed"
        )
        notes.append(
            f"ROCm < 7.1 caveat: pinned-memory copies with non_blocking=True then fork can segfault "
            f"(fixed in ROCm 7.1, rocm-systems PR #356); {guard}"
        )
    return passed("version floors met", *notes)


CHECKS = (
    Check(
        "alloc-allreduce",
        "runtime",
        "expandable_segments x custom all-reduce",
        alloc_allreduce,
        "https://github.com/vllm-project/vllm/issues/42609",
    ),
    Check(
        "sglang-env",
        "runtime",
        "SGLang AITER switches coherent",
        sglang_env,
        "https://github.com/sgl-project/sglang/pull/32034",
    ),
    Check(
        "version-floors",
        "runtime",
        "vLLM sleep mode / ROCm version floors",
        version_floors,
        "https://docs.vllm.ai/en/latest/features/sleep_mode.html",
        frozenset({"torch"}),
    ),
)
