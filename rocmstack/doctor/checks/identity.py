"""Identity as the engines see it: the GPU name they look tuned configs up by, the FP8 type they picked,
and whether the AITER fast paths the env turns on have kernels compiled for this arch.

The PCI id -> name table, the FP8 type per arch and the fast-path flags are data (identity.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rocmstack.doctor.model import (
    Check,
    DoctorOptions,
    Result,
    errored,
    failed,
    passed,
    probe_problem,
    skipped,
    warned,
)
from rocmstack.platform.snapshot import Snapshot
from rocmstack.resources import yaml_data

HERE = Path(__file__).resolve().parents[1]
PROBE_FIX = (
    "Run the probe by hand to see its traceback: python -c 'from vllm.platforms import current_platform'"
)


def data() -> dict:
    loaded: dict = yaml_data(HERE / "identity.yaml")
    return loaded


def product(device_id: int) -> dict[str, Any] | None:
    """The amdgpu.ids row of a PCI device id (name, revision, the first libdrm that lists it), or None."""
    rows = {int(str(k), 16) if isinstance(k, str) else int(k): v for k, v in data()["devices"].items()}
    return rows.get(device_id)


def is_generic(name: str | None) -> bool:
    return (name or "").strip() in data()["generic_names"]


def _torch_names(snap: Snapshot) -> list[str] | None:
    devices = (snap.probe("torch") or {}).get("devices")
    if not isinstance(devices, list):
        return None
    return [str(d.get("name") or "") for d in devices if isinstance(d, dict)]


def _vllm_platform(snap: Snapshot) -> dict:
    plat = (snap.probe("vllm") or {}).get("platform")
    return plat if isinstance(plat, dict) else {}


def _vllm_installed(snap: Snapshot) -> bool:
    return bool(snap.dists.get("vllm") or snap.module("vllm"))


# -- device-name ------------------------------------------------------------------------------------------


def device_name(snap: Snapshot, opts: DoctorOptions) -> Result:
    engines: list[tuple[str, list[str]]] = []
    torch_names = _torch_names(snap)
    if torch_names:
        engines.append(("torch.cuda.get_device_name (SGLang's config name)", torch_names))
    vllm_names = _vllm_platform(snap).get("device_names")
    if isinstance(vllm_names, list) and vllm_names:
        engines.append(("vLLM current_platform.get_device_name()", [str(n) for n in vllm_names]))
    vendor = snap.vendor()
    if vendor == "nvidia":
        return _nvidia_names(snap, torch_names)
    if vendor != "amd":
        return skipped("no AMD or NVIDIA GPU on this node")
    if not engines:
        return skipped(
            "no engine reported a device name: torch names its devices with --deep (it initialises the GPU "
            "runtime), vLLM where it is installed"
        )
    expected: dict[int, dict] = {}
    unknown: list[str] = []
    for node in snap.kfd or []:
        row = product(node.device_id)
        if row is None:
            unknown.append(hex(node.device_id))
        else:
            expected[node.device_id] = row
    instinct = {i: r for i, r in expected.items() if str(r["name"]).startswith("AMD Instinct")}
    lines = [
        f"PCI {hex(i)}: {r['name']} (amdgpu.ids rev {r['revision']})" for i, r in sorted(expected.items())
    ]
    lines += [f"{label}: {', '.join(repr(n) for n in names)}" for label, names in engines]
    if unknown:
        lines.append(f"PCI ids not in rocmstack's table: {', '.join(sorted(set(unknown)))}")
    if not instinct:
        return skipped(
            "no GPU on this node whose PCI id names an Instinct part"
            + (f" (device ids {', '.join(sorted(set(unknown)))})" if unknown else ""),
            *lines,
        )
    generic = [(label, n) for label, names in engines for n in names if is_generic(n)]
    if generic:
        label, got = generic[0]
        ids = ", ".join(f"{hex(i)} = {r['name']}" for i, r in sorted(instinct.items()))
        newest = max(
            (r for r in instinct.values()), key=lambda r: tuple(map(int, str(r["libdrm"]).split(".")))
        )
        return failed(
            f"{label} says {got!r} for PCI {ids}: every tuned config keyed by the GPU name "
            "(fused_moe device_name=AMD_Instinct_...json) is silently missed",
            *lines,
            fix=(
                f"Give the image an amdgpu.ids that lists the device (libdrm {newest['libdrm']} or newer; "
                f"Debian bookworm's libdrm-common 2.4.114 has no MI300, trixie's 2.4.124 no MI325X/MI350X/"
                "MI355X): install AMD's libdrm-amdgpu-common (/opt/amdgpu/share/libdrm/amdgpu.ids), or copy a "
                "current data/amdgpu.ids to the path the loaded libdrm opens (the one it names in "
                "'amdgpu.ids: No such file or directory'; torch wheels bundle their own libdrm); libdrm "
                "2.4.130+ also reads AMDGPU_ASIC_ID_TABLE_PATHS"
            ),
        )
    return passed(
        "the engines name the GPU by its product: "
        + "; ".join(f"{label.split(' ')[0]} {sorted(set(names))[0]!r}" for label, names in engines),
        *lines,
    )


def _nvidia_names(snap: Snapshot, torch_names: list[str] | None) -> Result:
    nvml = (snap.probe("nvml") or {}).get("names")
    if not torch_names:
        return skipped("torch named no device (its names need --deep)")
    if not isinstance(nvml, list) or not nvml:
        return skipped("NVML named no device to compare torch's names with")
    lines = [
        f"torch.cuda.get_device_name: {', '.join(map(repr, torch_names))}",
        f"NVML: {', '.join(map(repr, nvml))}",
    ]
    odd = [n for n in torch_names if n not in nvml or is_generic(n)]
    if odd:
        return failed(
            f"torch names a GPU {odd[0]!r}, NVML {', '.join(sorted(set(map(str, nvml))))}: configs keyed by "
            "the name are missed",
            *lines,
            fix="Use a CUDA toolkit / driver that knows this GPU (the CUDA runtime names it, NVML the driver)",
        )
    return passed(f"torch and NVML agree: {', '.join(sorted(set(torch_names)))}", *lines)


# -- fp8-type ---------------------------------------------------------------------------------------------


def fp8_type(snap: Snapshot, opts: DoctorOptions) -> Result:
    if not _vllm_installed(snap):
        return skipped("vLLM is not installed")
    if problem := probe_problem(snap, "vllm", "vLLM", fix=PROBE_FIX):
        return problem
    plat = _vllm_platform(snap)
    if "error" in plat:
        if "No module named 'vllm" in str(plat["error"]):
            return skipped("vLLM is not installed")
        return errored(f"vLLM's platform did not load: {plat['error']}", fix=PROBE_FIX)
    chosen = plat.get("fp8_dtype")
    if not chosen:
        return skipped(f"vLLM reported no FP8 type ({plat.get('fp8_error', 'an older probe')})")
    by_arch: dict[str, str] = data()["fp8"]
    detail = (
        f"vLLM {snap.dists.get('vllm', '?')} {plat.get('class', '?')}: fp8_dtype() = {chosen}"
        + (f", is_fp8_fnuz() = {plat['is_fp8_fnuz']}" if "is_fp8_fnuz" in plat else "")
        + (f", decided from {plat['gcn_arch']!r}" if plat.get("gcn_arch") else "")
    )
    vendor = snap.vendor()
    if vendor == "nvidia":
        want = by_arch["cuda"]
        if chosen != want:
            return failed(
                f"vLLM picks {chosen} on CUDA, which computes {want}",
                detail,
                fix="Reinstall vLLM's CUDA build",
            )
        return passed(f"vLLM picks {chosen}, CUDA's FP8 type", detail)
    if vendor != "amd":
        return skipped("no AMD GPU on this node", detail)
    archs = sorted({n.arch for n in snap.kfd or []})
    judged = {a: by_arch[a] for a in archs if a in by_arch}
    if not judged:
        return skipped(f"no GPU with an FP8 type on this node ({', '.join(archs) or 'no KFD GPU'})", detail)
    lines = [detail, *(f"{a} computes {t}" for a, t in judged.items())]
    wrong = [a for a, t in judged.items() if t != chosen]
    if wrong:
        mixed = len(judged) > 1
        return failed(
            f"vLLM picks {chosen}, but {', '.join(wrong)} on this node computes {judged[wrong[0]]}"
            + (" (a mixed-arch node: vLLM decides once, from the first device)" if mixed else ""),
            *lines,
            fix=(
                "Give each engine GPUs of one arch (HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES per arch): "
                "vLLM's is_fp8_fnuz() reads only the first device's arch"
                if mixed
                else "Install a vLLM whose ROCm platform knows this arch (vllm/platforms/rocm.py is_fp8_fnuz)"
            ),
        )
    return passed(f"vLLM picks {chosen}, what {', '.join(judged)} computes", *lines)


# -- fast-path-kernels ------------------------------------------------------------------------------------


def _flag_on(spec: dict, env: dict[str, str], specs: dict[str, dict]) -> bool:
    truthy = data()["truthy"]
    value = env.get(spec["env"])
    on = value.strip().lower() in truthy if value is not None else bool(spec.get("default"))
    parent = spec.get("parent")
    return on and (parent is None or _flag_on(specs[parent], env, specs))


def fast_path_kernels(snap: Snapshot, opts: DoctorOptions) -> Result:
    env = dict(snap.env)
    specs = {s["env"]: s for s in data()["fast_paths"]}
    enabled = [s for s in specs.values() if _flag_on(s, env, specs)]
    if not enabled:
        set_here = [f"{k}={env[k]}" for k in specs if k in env]
        return skipped(
            "the env turns on no AITER fast path" + (f" ({', '.join(set_here)})" if set_here else "")
        )
    if snap.vendor() != "amd":
        return skipped("no AMD GPU on this node (AITER is ROCm's)")
    archs = sorted({n.arch for n in snap.kfd or []})
    if not archs:
        return skipped("no KFD GPU to judge the kernels' arch against")
    if problem := probe_problem(snap, "vllm", "vLLM", fix=PROBE_FIX):
        return problem
    aiter = (snap.probe("vllm") or {}).get("aiter")
    if not isinstance(aiter, dict):
        return skipped("the probe listed no AITER kernels (an older probe)")
    if "error" in aiter:
        return errored(f"listing AITER's kernels failed: {aiter['error']}", fix=PROBE_FIX)
    names = ", ".join(s["env"] for s in enabled)
    if not aiter.get("found"):
        return warned(
            f"{names} on, but aiter is not installed: the fast path is off (vLLM) or fails (SGLang)",
            fix="Install aiter built for " + ", ".join(archs) + ", or unset the flags",
        )
    hsa = str(aiter.get("hsa_dir"))
    shipped: dict[str, dict] = aiter.get("archs") or {}
    lines = [
        f"aiter kernels under {hsa}: "
        + (", ".join(f"{g} ({v.get('co', 0)} .co)" for g, v in shipped.items()) or "none")
    ]
    missing: list[tuple[str, str, str]] = []
    for spec in enabled:
        for gfx in archs:
            have = shipped.get(gfx)
            if not have or not have.get("co"):
                missing.append((spec["env"], gfx, f"{hsa}/{gfx}/"))
                continue
            for family in spec.get("kernels") or []:
                if not (have.get("families") or {}).get(family):
                    missing.append((spec["env"], gfx, f"{hsa}/{gfx}/{family}/*.co"))
    if missing:
        items = [f"{flag} on {gfx}: no {path}" for flag, gfx, path in missing]
        flag, gfx, path = missing[0]
        return failed(
            f"{flag} is on, but aiter ships no {gfx} kernels for it ({path}): the engine fails at start or "
            "first call",
            *items,
            *lines,
            fix=f"Unset {flag} (or set it to 0), or install an aiter built for {gfx} (GPU_ARCHS={gfx})",
        )
    return passed(f"{names}: aiter ships kernels for {', '.join(archs)}", *lines)


CHECKS = (
    Check(
        "device-name",
        "engines",
        "the engines name the GPU as its PCI id does (tuned configs are keyed by the name)",
        device_name,
        "https://github.com/ROCm/TheRock/issues/4693",
        frozenset({"torch", "vllm", "nvml"}),
    ),
    Check(
        "fp8-type",
        "engines",
        "the FP8 type vLLM picked is the one every GPU's arch computes",
        fp8_type,
        "https://github.com/vllm-project/vllm/blob/main/vllm/platforms/rocm.py",
        frozenset({"vllm"}),
    ),
    Check(
        "fast-path-kernels",
        "engines",
        "the AITER fast paths the env turns on have kernels for this GPU's arch",
        fast_path_kernels,
        "https://github.com/ROCm/aiter/issues/5229",
        frozenset({"vllm"}),
    ),
)
