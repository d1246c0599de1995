"""amdsmi: importable (Ray's AMD detector needs it), and not fighting a second libamd_smi in the process."""

from __future__ import annotations

import os

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
from rocmstack.platform.snapshot import Snapshot

SDK_INSTALL = "pip install --no-deps $(rocm-sdk path --root)/share/amd_smi"


def amdsmi_import(snap: Snapshot, opts: DoctorOptions) -> Result:
    vendor = snap.vendor()
    if vendor != "amd" and not snap.module("amdsmi"):
        return skipped("no AMD GPU and amdsmi not installed")
    fix = "Run `python -c 'import amdsmi; amdsmi.amdsmi_init()'` by hand"
    if problem := probe_problem(snap, "amdsmi", "amdsmi", fix=fix):
        return problem
    data = snap.probe("amdsmi") or {}
    if "import_error" in data:
        kind = data.get("import_error_type")
        if kind == "ModuleNotFoundError":
            return failed(
                "amdsmi is not installed: Ray's AMD detector will report 0 GPUs without an error",
                fix=f"Install amdsmi from the ROCm SDK: {SDK_INSTALL}",
            )
        if kind == "KeyError":
            return failed(
                f"import amdsmi raises {data['import_error']}: the bindings cannot find libamd_smi.so, "
                "and the KeyError escapes Ray's ImportError guard",
                fix=(
                    "Install the amdsmi that matches the SDK (" + SDK_INSTALL + "), or point it at the "
                    "library with ROCM_PATH"
                ),
            )
        return failed(f"import amdsmi fails: {data['import_error']}", fix=f"Reinstall amdsmi: {SDK_INSTALL}")
    if "init_error" in data:
        if vendor != "amd":
            return skipped(f"amdsmi installed, no AMD GPU here ({data['init_error']})")
        return failed(
            f"amdsmi_init fails: {data['init_error']}",
            fix="Pass /dev/kfd and /dev/dri into the container and use an amdsmi matching the driver",
        )
    count = data.get("count")
    kfd = len(snap.kfd or [])
    if vendor == "amd" and kfd and count == 0:
        return failed(
            f"amdsmi imports but enumerates 0 GPUs while KFD shows {kfd}",
            f"libamd_smi mapped: {', '.join(data.get('libamd_smi_loaded') or []) or 'none'}",
            fix="A duplicate libamd_smi loaded RTLD_GLOBAL hijacks its symbols: see amdsmi-duplicate",
        )
    return passed(f"amdsmi imports and counts {count} GPU(s)", f"module: {data.get('module_file')}")


def amdsmi_duplicate(snap: Snapshot, opts: DoctorOptions) -> Result:
    site = snap.site
    files = site.get("libamd_smi_files") or []
    preload = site.get("preload") or {}
    torch = snap.probe("torch") or {}
    loaded = sorted({os.path.realpath(p) for p in torch.get("libamd_smi_loaded") or []})
    physical = sorted({f["real"] for f in files})
    sdk_global = preload.get("sdk_default_global")
    torch_passes = preload.get("torch_passes")
    global_preload = (torch_passes is True) or (torch_passes is None and sdk_global is True)
    details = [
        f"libamd_smi on disk: {', '.join(physical) or 'none'}",
        f"mapped into a torch process: {', '.join(loaded) or 'none (or torch probe not run)'}",
        f"rocm_sdk initialize_process default rtld_global={sdk_global}, torch/_rocm_init passes "
        f"rtld_global={torch_passes}",
    ]
    fix = (
        "Apply the rtld-local patch (rocm_sdk preload with rtld_global=False), or make the amdsmi "
        "package's libamd_smi a symlink to the SDK's copy (SGLang's fix)"
    )
    if len(loaded) > 1:
        return failed(
            f"{len(loaded)} different libamd_smi copies are loaded into one process: the second "
            "initialiser enumerates no devices (torch.cuda.device_count() == 0)",
            *details,
            fix=fix,
        )
    if not physical and sdk_global is None:
        return skipped("no libamd_smi and no rocm_sdk in this environment")
    if len(physical) > 1 and global_preload and snap.module("amdsmi"):
        return failed(
            f"{len(physical)} distinct libamd_smi files and rocm_sdk preloads RTLD_GLOBAL: importing "
            "torch then amdsmi makes amdsmi (and torch's device count) see 0 GPUs",
            *details,
            fix=fix,
        )
    if len(physical) > 1:
        return warned(
            f"{len(physical)} distinct libamd_smi files (harmless while the preload stays RTLD_LOCAL)",
            *details,
            fix=fix,
        )
    return passed("one libamd_smi" + (" (preload RTLD_GLOBAL)" if global_preload else ""), *details)


CHECKS = (
    Check(
        "amdsmi-import",
        "amd",
        "amdsmi imports and enumerates",
        amdsmi_import,
        "https://github.com/pytorch/pytorch/pull/188724",
        frozenset({"amdsmi"}),
    ),
    Check(
        "amdsmi-duplicate",
        "amd",
        "No duplicate libamd_smi under an RTLD_GLOBAL preload",
        amdsmi_duplicate,
        "https://github.com/ROCm/rocm-systems/issues/7643",
        frozenset({"torch"}),
    ),
)
