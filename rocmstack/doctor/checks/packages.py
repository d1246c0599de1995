"""Python packages: vLLM wheel flavour and Python version, CUDA packages in a ROCm env, torch's arch list."""

from __future__ import annotations

import re

from rocmstack.doctor.checks.amdsmi import SDK_INSTALL
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

VLLM_ROCM_PYTHON = "3.12"  # the ROCm wheels and images of vLLM are built for CPython 3.12 only
HARMLESS_NVIDIA = frozenset({"nvidia-ml-py", "nvidia-ml-py3"})  # pure-Python NVML bindings
# What provides each ROCm library a ROCm torch links (by soname stem): a fix names the missing one.
ROCM_LIBS = {
    "libamdhip64": "ROCm's HIP runtime",
    "libhsa-runtime64": "ROCm's HSA runtime (ROCr)",
    "libroctx64": "ROCm's roctracer (roctx markers)",
    "libroctracer64": "ROCm's roctracer",
    "libMIOpen": "ROCm's MIOpen",
    "librocblas": "ROCm's rocBLAS",
    "libhipblas": "ROCm's hipBLAS",
    "libhipblaslt": "ROCm's hipBLASLt",
    "librccl": "ROCm's RCCL",
}
ROCM_LIB_PREFIXES = ("libhip", "libroc", "libhsa", "libamd", "libMIOpen", "librccl")
# glibc's dlopen error, and the KeyError amdsmi's bindings raise when libamd_smi.so is not found
MISSING_LIB = re.compile(r"(lib[\w+-]+\.so(?:\.\d+)*)\s*:\s*cannot open shared object file")
AMDSMI_KEYERROR = re.compile(r"KeyError: '(libamd_smi\.so[\d.]*)'")


def vllm_python(snap: Snapshot, opts: DoctorOptions) -> Result:
    version = snap.dists.get("vllm")
    if version is None:
        return skipped("vLLM is not installed")
    py = ".".join(snap.python_version.split(".")[:2])
    if not snap.rocm_env():
        return skipped(f"vLLM {version} in a non-ROCm environment")
    if py != VLLM_ROCM_PYTHON:
        return failed(
            f"Python {py} with vLLM {version} on ROCm: vLLM's ROCm wheels exist for Python "
            f"{VLLM_ROCM_PYTHON} only, so pip picked a CUDA wheel or an sdist",
            fix=f"Use Python {VLLM_ROCM_PYTHON} (the ROCm base image's), or build vLLM from source "
            "with VLLM_TARGET_DEVICE=rocm",
        )
    return passed(f"Python {py} matches vLLM's ROCm wheels")


def vllm_flavour(snap: Snapshot, opts: DoctorOptions) -> Result:
    version = snap.dists.get("vllm")
    if version is None:
        return skipped("vLLM is not installed")
    rocm = snap.rocm_env()
    probe = snap.probes.get("vllm")
    data = probe.data if probe is not None else None
    ext_error = (data or {}).get("ext_error", "")
    # The extensions the probe loaded (vllm._C, and vllm._C_stable_libtorch from the 0.2x CUDA builds on).
    loaded = " and ".join((data or {}).get("ext_modules") or ["vllm._C"])
    if rocm and ("libcudart" in ext_error or "libcuda.so" in ext_error):
        return failed(
            f"vLLM {version} is a CUDA build: import {loaded} fails ({ext_error})",
            fix="Install vLLM built for ROCm (VLLM_TARGET_DEVICE=rocm source build or the ROCm index)",
        )
    if not rocm and "+rocm" in version:
        return failed(
            f"vLLM {version} is a ROCm build on a non-ROCm node", fix="Install the CUDA wheel of vLLM"
        )
    if probe is not None and data is None:
        return errored(probe.reason(), fix="Run `python -c 'import vllm._C'` by hand to see the error")
    if data is not None and not data.get("ext_ok"):
        return failed(f"import {loaded} fails: {ext_error}", fix="Reinstall vLLM for this torch and ROCm")
    if rocm and "+rocm" not in version:
        note = (
            f"import {loaded} loads" if data else f"not loaded ({snap.not_run.get('vllm', 'probe not run')})"
        )
        return warned(
            f"vLLM {version} has no +rocm tag: a CUDA wheel unless built from source here ({note})",
            fix="Confirm with `python -c 'import vllm._C'` (a CUDA wheel asks for libcudart)",
        )
    return passed(f"vLLM {version}" + (f" (import {loaded} loads)" if data else ""))


def nvidia_packages(snap: Snapshot, opts: DoctorOptions) -> Result:
    if not snap.rocm_env():
        return skipped("not a ROCm environment")
    # CUDA runtime wheels (nvidia-cublas-cu12, nvidia-nccl-cu13, CUDA 13's unsuffixed nvidia-cublas, ...) and
    # cupy-cuda*; nvidia-ml-py is a pure-Python NVML binding and harmless.
    found = sorted(
        f"{name}=={v}"
        for name, v in snap.dists.items()
        if (name.startswith("nvidia-") and name not in HARMLESS_NVIDIA) or name.startswith("cupy-cuda")
    )
    if found:
        return failed(
            f"{len(found)} CUDA package(s) in a ROCm environment: {', '.join(found[:6])}"
            + (" ..." if len(found) > 6 else ""),
            *found,
            fix="Uninstall them and install with a constraints file pinning the ROCm torch "
            "(PIP_CONSTRAINT), so no dependency pulls a CUDA wheel again",
        )
    return passed("no nvidia-* / cupy-cuda* packages")


def _import_fix(snap: Snapshot, error: str) -> str:
    """The fix for a failed ``import torch``: the missing library and what provides it, when one is named."""
    m = MISSING_LIB.search(error) or AMDSMI_KEYERROR.search(error)
    if m is None:
        if "amdsmi" in error or "amd_smi" in error:
            return "amdsmi breaks import torch: see amdsmi-import / amdsmi-duplicate"
        return "Run `python -c 'import torch'` by hand to read the whole traceback"
    lib = m.group(1)
    if lib.startswith("libamd_smi"):
        return f"torch imports amdsmi, which cannot load {lib}: install amdsmi from the SDK ({SDK_INSTALL})"
    stem = lib.split(".so")[0]
    what = ROCM_LIBS.get(stem) or ("a ROCm library" if stem.startswith(ROCM_LIB_PREFIXES) else None)
    if what is None:
        return f"{lib} is not on the loader path: install what ships it, or add its folder to LD_LIBRARY_PATH"
    if snap.module("rocm_sdk") or snap.module("_rocm_sdk_core") or snap.dists.get("rocm-sdk-core"):
        return (
            f"{lib} ({what}) is not found: install the rocm-sdk wheels torch was built with (rocm[libraries]), "
            "or add site-packages/_rocm_sdk_core/lib and _rocm_sdk_libraries_<gfx>/lib to LD_LIBRARY_PATH"
        )
    return (
        f"{lib} ({what}) is not found: install that ROCm (or use the ROCm base image) and put its lib folder "
        "(/opt/rocm/lib) on LD_LIBRARY_PATH"
    )


def torch_arch(snap: Snapshot, opts: DoctorOptions) -> Result:
    fix = "Run `python -c 'import torch; print(torch.cuda.device_count())'`"
    if problem := probe_problem(snap, "torch", "torch", fix=fix):
        return problem
    data = snap.probe("torch") or {}
    if "import_error" in data:
        if data["import_error"].startswith("ModuleNotFoundError"):
            return skipped("torch is not installed")
        return failed(
            f"import torch fails: {data['import_error']}", fix=_import_fix(snap, data["import_error"])
        )
    arch_list = data.get("arch_list") or []
    if data.get("devices"):  # --deep: torch's own view of each device
        archs = sorted({d["arch"] for d in data["devices"] if d.get("arch")})
    elif data.get("hip") or snap.vendor() == "amd":
        archs = sorted({n.arch for n in snap.kfd or []})  # the driver's gfx target of each GPU
    else:
        archs = sorted(set((snap.probe("nvml") or {}).get("archs") or []))  # NVML compute capability
    if not archs:
        return skipped("no GPU arch known on this node")
    if not arch_list:
        return warned(f"torch reports no compiled arch list (devices: {', '.join(archs)})")
    missing = []
    for arch in archs:
        if arch in arch_list:
            continue
        if arch.startswith("sm_") and any(
            a.startswith("compute_") and int(a[8:]) <= int(arch[3:]) for a in arch_list if a[8:].isdigit()
        ):
            continue  # PTX for an older arch: the driver JIT-compiles it
        missing.append(arch)
    if missing:
        return failed(
            f"torch {data.get('version')} has no kernels for {', '.join(missing)} "
            f"(built for {', '.join(arch_list)})",
            fix="Install a torch built for this GPU (PYTORCH_ROCM_ARCH / TORCH_CUDA_ARCH_LIST includes it)",
        )
    return passed(
        f"device arch {', '.join(archs)} in torch's arch list", f"arch list: {', '.join(arch_list)}"
    )


CHECKS = (
    Check(
        "vllm-python",
        "packages",
        "Python version fits vLLM's ROCm wheels",
        vllm_python,
        "https://docs.vllm.ai/en/latest/getting_started/installation/gpu.html",
    ),
    Check(
        "vllm-flavour",
        "packages",
        "vLLM wheel built for this platform",
        vllm_flavour,
        "https://docs.vllm.ai/en/latest/getting_started/installation/gpu.html",
        frozenset({"vllm"}),
    ),
    Check(
        "nvidia-packages",
        "packages",
        "No CUDA packages in a ROCm env",
        nvidia_packages,
        "https://github.com/sgl-project/sglang/blob/main/docker/rocm.Dockerfile",
    ),
    Check(
        "torch-arch",
        "packages",
        "torch built for the device arch",
        torch_arch,
        "https://pytorch.org/docs/stable/generated/torch.cuda.get_arch_list.html",
        frozenset({"torch", "nvml"}),
    ),
)
