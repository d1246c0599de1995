"""Load what the job loads: every compiled file of the engines and kernel libraries, the ROCm libraries and
their kernel files for this GPU's arch, the SMI libraries' init, and the fast-path defaults the installed
engines compute. All four read the ``loads`` probe (rocmstack/platform/probes/loads_probe.py)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from rocmstack.doctor.model import (
    Check,
    DoctorOptions,
    Result,
    failed,
    passed,
    probe_problem,
    skipped,
    warned,
)
from rocmstack.platform.probes._emit import LOADER_MISSING_LIB, LOADER_UNDEFINED, LOADER_VERSION_MISS
from rocmstack.platform.snapshot import Snapshot

PROBE = "loads"
PROBE_FIX = "Run the probe by hand: python rocmstack/platform/probes/loads_probe.py"
# the sweep is a level-1 probe: said in the check's data and details when it takes longer than this
SLOW_S = 10.0
ENGINES = "vllm, aiter, sgl_kernel, flash_attn, mori"
ROCM_LIBS = {
    "rccl": "RCCL (librccl)",
    "hipblaslt": "hipBLASLt (libhipblaslt)",
    "rocblas": "rocBLAS (librocblas)",
}
# rsmi_status_t of rocm_smi.h (RSMI_H below); the library's own rsmi_status_string() gives only the text
# for most codes, which the probe records beside the code
RSMI_STATUS = {
    0: "RSMI_STATUS_SUCCESS",
    1: "RSMI_STATUS_INVALID_ARGS",
    2: "RSMI_STATUS_NOT_SUPPORTED",
    3: "RSMI_STATUS_FILE_ERROR",
    4: "RSMI_STATUS_PERMISSION",
    5: "RSMI_STATUS_OUT_OF_RESOURCES",
    6: "RSMI_STATUS_INTERNAL_EXCEPTION",
    7: "RSMI_STATUS_INPUT_OUT_OF_BOUNDS",
    8: "RSMI_STATUS_INIT_ERROR",
    9: "RSMI_STATUS_NOT_YET_IMPLEMENTED",
    10: "RSMI_STATUS_NOT_FOUND",
    11: "RSMI_STATUS_INSUFFICIENT_SIZE",
    12: "RSMI_STATUS_INTERRUPT",
    13: "RSMI_STATUS_UNEXPECTED_SIZE",
    14: "RSMI_STATUS_NO_DATA",
    15: "RSMI_STATUS_UNEXPECTED_DATA",
    16: "RSMI_STATUS_BUSY",
    17: "RSMI_STATUS_REFCOUNT_OVERFLOW",
    18: "RSMI_STATUS_SETTING_UNAVAILABLE",
    19: "RSMI_STATUS_AMDGPU_RESTART_ERR",
    20: "RSMI_STATUS_DRM_ERROR",
    21: "RSMI_STATUS_FAIL_LOAD_MODULE",
    22: "RSMI_STATUS_FAIL_LOAD_SYMBOL",
    0xFFFFFFFF: "RSMI_STATUS_UNKNOWN_ERROR",
}
RSMI_FIX = {
    "RSMI_STATUS_PERMISSION": "Give the job /dev/kfd and /dev/dri with the video/render groups (or run as root)",
    "RSMI_STATUS_INIT_ERROR": (
        "The amdgpu driver is not visible: pass /dev/kfd, /dev/dri and the host's /sys into the container"
    ),
    "RSMI_STATUS_FILE_ERROR": "Mount the host's /sys (read-only) into the container",
}


@dataclass(frozen=True)
class LoadError:
    """What the loader's message says: kind library / version / symbol / other, and the name in it."""

    kind: str
    name: str
    provider: str | None = None  # the library that lacks the version (version)


def parse_load_error(message: str) -> LoadError:
    if m := LOADER_VERSION_MISS.search(message):
        return LoadError("version", m.group(2), m.group(1))
    if m := LOADER_UNDEFINED.search(message):
        return LoadError("symbol", m.group(1))
    if m := LOADER_MISSING_LIB.search(message):
        return LoadError("library", m.group(1))
    return LoadError("other", message.strip().splitlines()[0][:300] if message.strip() else "")


def rsmi_status_name(code: int) -> str:
    return RSMI_STATUS.get(code, f"status {code}")


def _data(snap: Snapshot) -> dict:
    return snap.probe(PROBE) or {}


def _package_of_version(prefix: str, provider: str) -> str:
    if prefix == "GLIBC":
        return "libc6 (a newer base image)"
    if prefix in ("GLIBCXX", "CXXABI"):
        return "libstdc++6"
    return provider


def _problem(entry: dict) -> tuple[str, str]:
    """(what is wrong, the fix) for one file that did not load."""
    file = str(entry.get("file") or entry.get("module") or "?")
    package = str(entry.get("package") or "the package")
    if entry.get("crash"):
        out = str(entry.get("output") or "").splitlines()
        return (
            f"{file}: loading it crashed the process ({entry['crash']})" + (f": {out[-1]}" if out else ""),
            f"Load it by hand to see the abort: python -c \"import ctypes; ctypes.CDLL('{file}')\"",
        )
    if entry.get("timed_out"):
        return (
            f"{file}: loading it did not finish within {entry['timed_out']} s",
            "A static initialiser hangs (often one waiting for the GPU): load it by hand under strace",
        )
    if entry.get("not_started"):
        return (
            f"{file}: not loaded ({entry['not_started']})",
            "Raise --probe-timeout (and ROCMSTACK_LOADS_DEADLINE) so that the sweep reaches every file",
        )
    error = parse_load_error(str(entry.get("error") or ""))
    rebuild = f"use the {package} wheel built for this image (its ROCm, torch and base OS)"
    if error.kind == "library":
        lib = error.name
        if re.match(r"lib(cudart|cuda|cublas|cublasLt|nvrtc|cudnn|nccl)\b", lib):
            return (
                f"{file} needs {lib}: a CUDA build on a ROCm image",
                f"Install the ROCm build of {package}: this one is built for CUDA",
            )
        return (
            f"{file} needs {lib}, which the loader cannot find",
            f"Install what ships {lib} (or put its folder on LD_LIBRARY_PATH), or {rebuild}",
        )
    if error.kind == "version":
        m = re.match(r"([A-Za-z][\w.]*?)_[0-9]", error.name)
        prefix = m.group(1) if m else error.name
        has = str(entry.get("provider_has") or "")
        provider = os.path.basename(error.provider or "") or "the library"
        upto = (
            f"the image's {provider} has up to {has[len(prefix) + 1 :] if has.startswith(prefix) else has}"
            if has
            else f"the image's {provider} lacks it"
        )
        return (
            f"{file} needs {error.name}; {upto}",
            f"needs {error.name}; {upto}: install a newer {_package_of_version(prefix, provider)} or {rebuild}",
        )
    if error.kind == "symbol":
        shown = entry.get("demangled") or error.name
        raw = f" ({error.name})" if entry.get("demangled") else ""
        return (
            f"{file}: undefined symbol {shown}{raw}",
            f"{file} was built against another version of the library that defines it (torch, ROCm): {rebuild}",
        )
    return (f"{file}: {error.name or 'does not load'}", f"Reinstall {package}: {rebuild}")


def _rocm_entries(data: dict) -> list[dict]:
    libs = data.get("rocm_libs") or {}
    return [{"package": name, "module": ROCM_LIBS.get(name, name), **entry} for name, entry in libs.items()]


def _timing(data: dict) -> tuple[list[str], dict[str, Any]]:
    seconds = data.get("seconds")
    slow = isinstance(seconds, int | float) and seconds > SLOW_S
    lines = []
    if isinstance(seconds, int | float):
        lines.append(
            f"the sweep took {seconds:.1f} s"
            + (f": over the {SLOW_S:.0f} s a level 1 probe should take" if slow else "")
        )
    return lines, {"probe_seconds": seconds, "slow": slow}


def native_extensions(snap: Snapshot, opts: DoctorOptions) -> Result:
    if problem := probe_problem(snap, PROBE, "loads", fix=PROBE_FIX):
        return problem
    data = _data(snap)
    if "error" in data and "files" not in data:
        return failed(f"the loads probe failed: {data['error']}", fix=PROBE_FIX)
    entries = [*(data.get("files") or []), *_rocm_entries(data)]
    timing, figures = _timing(data)
    torch = data.get("torch") or {}
    context = [f"torch did not import first: {torch['error']}"] if torch.get("error") else []
    if not entries:
        found = ", ".join(sorted(data.get("packages") or {}))
        return skipped(
            f"no compiled file of {ENGINES}, and no RCCL, hipBLASLt or rocBLAS here"
            + (f" ({found} installed without one)" if found else ""),
            *timing,
        )
    bad = [e for e in entries if e.get("ok") is not True]
    loaded = [e for e in entries if e.get("ok") is True]
    if bad:
        problems = [_problem(e) for e in bad]
        result = failed(
            f"{len(bad)} of {len(entries)} compiled files do not load: {problems[0][0]}",
            *(p for p, _ in problems),
            *context,
            f"loaded: {len(loaded)}",
            *timing,
            fix="; ".join(dict.fromkeys(f for _, f in problems[:3])),
        )
    else:
        by_package: dict[str, int] = {}
        for e in loaded:
            by_package[str(e.get("package"))] = by_package.get(str(e.get("package")), 0) + 1
        result = passed(
            (f"{len(loaded)} compiled files load (" if len(loaded) > 1 else "1 compiled file loads (")
            + ", ".join(f"{k} {v}" for k, v in sorted(by_package.items()))
            + ")",
            *(
                f"{e.get('module')}: {e.get('file')}"
                + (f" (after the {e['with_siblings']} files beside it)" if e.get("with_siblings") else "")
                for e in loaded
            ),
            *timing,
        )
    return Result(
        result.status,
        result.summary,
        result.details,
        result.fix,
        {**figures, "loaded": len(loaded), "failed": [str(e.get("file")) for e in bad]},
    )


def _node_archs(snap: Snapshot, opts: DoctorOptions) -> list[str]:
    if opts.gpu_archs:
        return sorted({a.split(":")[0] for a in opts.gpu_archs})
    return sorted({n.arch for n in snap.kfd or []})


def rocm_kernel_files(snap: Snapshot, opts: DoctorOptions) -> Result:
    if problem := probe_problem(snap, PROBE, "loads", fix=PROBE_FIX):
        return problem
    libs = {
        n: e for n, e in (_data(snap).get("rocm_libs") or {}).items() if isinstance(e.get("kernels"), dict)
    }
    if not libs:
        return skipped("no hipBLASLt or rocBLAS (the ROCm libraries that read kernel files) here")
    archs = _node_archs(snap, opts)
    lines = []
    for name, entry in libs.items():
        k = entry["kernels"]
        shipped = ", ".join(f"{g} ({n})" for g, n in (k.get("archs") or {}).items()) or "none"
        lines.append(f"{ROCM_LIBS.get(name, name)} {entry.get('file')}: {k.get('dir')}: {shipped}")
    if not archs:
        return skipped("no GPU arch known here (no KFD GPU; --gpu-arch names one)", *lines)
    missing = []
    for name, entry in libs.items():
        k = entry["kernels"]
        env = f" (from {k['from_env']})" if k.get("from_env") else ""
        if k.get("missing"):
            missing.append(f"{ROCM_LIBS.get(name, name)}: no kernel folder {k.get('dir')}{env}")
            continue
        for gfx in archs:
            if not (k.get("archs") or {}).get(gfx):
                missing.append(f"{ROCM_LIBS.get(name, name)}: no {gfx} kernel files in {k.get('dir')}{env}")
    if missing:
        return failed(
            missing[0] + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""),
            *missing,
            *lines,
            fix=(
                f"Install the ROCm libraries built for {', '.join(archs)} (the image's GPU_ARCHS / "
                "PYTORCH_ROCM_ARCH must include it), or point ROCBLAS_TENSILE_LIBPATH / "
                "HIPBLASLT_TENSILE_LIBPATH at a folder that has them"
            ),
        )
    return passed(
        f"{', '.join(ROCM_LIBS.get(n, n) for n in libs)} have kernel files for {', '.join(archs)}", *lines
    )


def _smi_line(name: str, entry: dict) -> tuple[bool, str, str | None]:
    """(initialised, the line, the status name where rsmi answered one)."""
    if entry.get("crash"):
        return False, f"{name}: init crashed the process ({entry['crash']})", None
    if entry.get("timed_out"):
        return False, f"{name}: init did not return within {entry['timed_out']} s", None
    if name == "rocm_smi" and "code" in entry:
        code = int(entry["code"])
        status = rsmi_status_name(code)
        text = f": {entry['text']}" if entry.get("text") else ""
        where = entry.get("path") or entry.get("file")
        return code == 0, f"rsmi_init(0) in {where} returned {code} ({status}{text})", status
    if entry.get("ok") is True:
        return True, f"{name}: initialised", None
    return False, f"{name}: {entry.get('error') or 'no answer'}", None


def smi_init(snap: Snapshot, opts: DoctorOptions) -> Result:
    if problem := probe_problem(snap, PROBE, "loads", fix=PROBE_FIX):
        return problem
    smi = _data(snap).get("smi") or {}
    if not smi:
        return skipped("no SMI library here (amdsmi, librocm_smi64, pyrsmi)")
    lines = [_smi_line(name, entry) for name, entry in sorted(smi.items())]
    if "amdsmi" in smi and snap.probe("amdsmi") is not None:
        # the amdsmi probe ran too: amdsmi-import judges it (import and init), once
        ok, line, _status = lines[sorted(smi).index("amdsmi")]
        if not ok:
            lines[sorted(smi).index("amdsmi")] = (True, f"{line} (judged by amdsmi-import)", None)
    bad = [(line, status) for ok, line, status in lines if not ok]
    details = [line for _ok, line, _s in lines]
    if not bad:
        return passed(f"{', '.join(sorted(smi))} initialise", *details)
    first, status = bad[0]
    if snap.vendor() != "amd":
        return skipped(f"no AMD GPU here, and as expected: {first}", *details)
    return failed(
        f"{len(bad)} of {len(lines)} SMI libraries do not initialise: {first}",
        *details,
        fix=RSMI_FIX.get(
            status or "",
            "Pass /dev/kfd and /dev/dri into the container and use SMI libraries "
            "that match the driver (amdsmi from the ROCm SDK)",
        ),
    )


def engine_defaults(snap: Snapshot, opts: DoctorOptions) -> Result:
    if problem := probe_problem(snap, PROBE, "loads", fix=PROBE_FIX):
        return problem
    defaults = _data(snap).get("defaults") or {}
    if not defaults:
        return skipped("neither vLLM nor aiter is installed")
    details: list[str] = []
    failures: list[str] = []
    warnings: list[str] = []
    figures: dict[str, Any] = {}
    summary = []
    vllm = defaults.get("vllm")
    if isinstance(vllm, dict):
        error = str(vllm.get("error") or "")
        if error.startswith("ModuleNotFoundError") and "vllm.envs" in error:
            warnings.append(f"this vLLM has no vllm.envs to read its settings from ({error})")
        elif error or vllm.get("crash") or vllm.get("timed_out"):
            why = error or vllm.get("crash") or f"no answer in {vllm.get('timed_out')} s"
            failures.append(f"vLLM's settings do not load (import vllm.envs): {why}")
        else:
            values: dict[str, Any] = {}
            for name, entry in sorted((vllm.get("aiter_env") or {}).items()):
                if "value_error" in entry:
                    failures.append(
                        f"{name}={snap.env.get(name, '?')} is rejected by vLLM: {entry['value_error']}"
                    )
                    continue
                values[name] = entry.get("value")
                here = " (set here)" if entry.get("set") else ""
                details.append(f"{name}: default {entry.get('default')!r}, here {entry.get('value')!r}{here}")
            figures["vllm"] = values
            known = set(vllm.get("known") or [])
            unknown = sorted(k for k in snap.env if k.startswith("VLLM_ROCM_") and known and k not in known)
            for name in unknown:
                warnings.append(
                    f"{name} is set, but vLLM {vllm.get('version') or ''} does not read it (renamed or "
                    "removed): it changes nothing"
                )
            platform = vllm.get("platform") or "?"
            fp8 = vllm.get("fp8_dtype")
            if vllm.get("platform_error"):
                details.append(f"vLLM's platform: {vllm['platform_error']}")
            figures["fp8_dtype"] = fp8
            on = [k for k, v in values.items() if v is True]
            summary.append(
                f"vLLM {vllm.get('version') or ''} ({platform}, FP8 {fp8 or '?'}): "
                f"{len(on)} of {len(values)} VLLM_ROCM_USE_AITER* on"
                + (
                    f", VLLM_ROCM_USE_AITER={values['VLLM_ROCM_USE_AITER']}"
                    if "VLLM_ROCM_USE_AITER" in values
                    else ""
                )
            )
            if "aiter_supported" in vllm:
                details.append(f"vLLM: aiter found and supported on this GPU: {vllm['aiter_supported']}")
            if values.get("VLLM_ROCM_USE_AITER") is True and "aiter" not in (
                _data(snap).get("packages") or {}
            ):
                warnings.append("VLLM_ROCM_USE_AITER is on, but aiter is not installed: vLLM runs without it")
    aiter = defaults.get("aiter")
    if isinstance(aiter, dict):
        gfx = aiter.get("get_gfx_runtime") or aiter.get("get_gfx")
        figures["aiter_gfx"] = gfx
        why = aiter.get("error") or aiter.get("crash") or aiter.get("get_gfx_runtime_error")
        details.append(f"aiter: runtime arch {gfx}" if gfx else f"aiter: no runtime arch ({why})")
        if aiter.get("GPU_ARCHS"):
            details.append(f"aiter: GPU_ARCHS={aiter['GPU_ARCHS']}")
        archs = _node_archs(snap, opts)
        if gfx and archs and gfx not in archs:
            warnings.append(
                f"aiter dispatches kernels for {gfx}, but this node's GPUs are {', '.join(archs)}"
            )
        summary.append(f"aiter {'on ' + gfx if gfx else '(no GPU arch)'}")
    if failures:
        result = failed(
            failures[0],
            *failures[1:],
            *warnings,
            *details,
            fix="Unset or correct the variable (vllm/envs.py of the installed vLLM lists its values), or "
            "reinstall vLLM",
        )
    elif warnings:
        result = warned(
            warnings[0], *warnings[1:], *details, fix="Unset it, or use the name this version reads"
        )
    else:
        result = passed("; ".join(summary) or "engine settings read", *details)
    return Result(result.status, result.summary, result.details, result.fix, figures)


RSMI_H = "https://github.com/ROCm/rocm_smi_lib/blob/fb22d777ff4558624f1acc4a1c669118a99383f6/include/rocm_smi/rocm_smi.h"
CHECKS = (
    Check(
        "native-extensions",
        "engines",
        "every compiled file of the engines, kernel libraries and ROCm libraries loads (RTLD_NOW)",
        native_extensions,
        "https://github.com/vllm-project/vllm/pull/38750",
        frozenset({PROBE}),
    ),
    Check(
        "engine-defaults",
        "engines",
        "the fast-path settings the installed engines compute (vLLM's AITER flags, FP8 type, aiter's arch)",
        engine_defaults,
        "https://github.com/vllm-project/vllm/blob/main/vllm/envs.py",
        frozenset({PROBE}),
    ),
    Check(
        "rocm-kernel-files",
        "amd",
        "hipBLASLt and rocBLAS ship kernel files for this GPU's arch",
        rocm_kernel_files,
        "https://github.com/ROCm/AMDMIGraphX/pull/3517",
        frozenset({PROBE}),
    ),
    Check(
        "smi-init",
        "amd",
        "every SMI library the stack uses initialises (amdsmi, rocm_smi, pyrsmi)",
        smi_init,
        RSMI_H,
        frozenset({PROBE}),
    ),
)
