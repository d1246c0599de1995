"""GPU counts: do the independent sources agree, would Ray see the GPUs, does partitioning multiply them."""

from __future__ import annotations

from collections.abc import Iterable

from rocmstack.doctor.checks.amdsmi import SDK_INSTALL
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
from rocmstack.platform.rocm import PARTITION_FACTORS, parse_amd_smi_partition
from rocmstack.platform.snapshot import GpuSource, Snapshot


def _fmt(sources: Iterable[GpuSource]) -> str:
    return ", ".join(f"{s.name}={s.count}" for s in sources)


def gpu_count(snap: Snapshot, opts: DoctorOptions) -> Result:
    expect = opts.expect_gpus
    sources = snap.sources()
    physical = [s for s in sources if s.scope == "physical" and s.count is not None]
    masks = snap.masks()
    details = [f"{s.name} ({s.scope}): {'-' if s.count is None else s.count}  {s.detail}" for s in sources]
    counts = {s.count for s in physical if s.count is not None}
    if len(counts) > 1:
        low = [s for s in physical if s.count == min(counts)]
        fix = "Compare the sources below: the one that sees fewer devices names the broken layer."
        if any(s.name == "amdsmi" for s in low):
            fix = (
                "amdsmi sees fewer devices than the driver: a duplicate libamd_smi loaded RTLD_GLOBAL "
                "(see check amdsmi-duplicate), or amdsmi older than the driver; install amdsmi from the SDK "
                f"({SDK_INSTALL})"
            )
        elif any(s.name in ("kfd", "dri", "nvidia-dev") for s in low):
            fix = (
                "The container sees fewer device nodes than the tools report: pass every device "
                "(--device /dev/kfd --device /dev/dri, or --gpus all on NVIDIA)"
            )
        return failed(f"GPU sources disagree: {_fmt(physical)}", *details, fix=fix)
    n_physical = counts.pop() if counts else 0
    expected_visible = masks.visible_count if masks.visible_count is not None else n_physical
    torch = next(s for s in sources if s.name == "torch")
    rocr = next((s for s in sources if s.name == "rocminfo" and s.count is not None), None)
    problems = []
    if torch.count is not None and n_physical and torch.count != expected_visible:
        problems.append(
            f"torch sees {torch.count} device(s), the masks leave {expected_visible} of {n_physical}"
        )
    if (
        rocr is not None
        and masks.after_rocr is not None
        and n_physical
        and rocr.count != len(masks.after_rocr)
    ):
        problems.append(
            f"rocminfo lists {rocr.count} GPU agent(s), ROCR_VISIBLE_DEVICES leaves {len(masks.after_rocr)}"
        )
    runtime = (snap.probe("torch") or {}).get("runtime_count")
    if runtime is not None and torch.count is not None and runtime != torch.count:
        problems.append(f"torch.cuda.device_count() says {torch.count}, the initialised runtime {runtime}")
    if expect is not None and expected_visible != expect:
        problems.append(f"--expect-gpus {expect}, but {expected_visible} visible ({n_physical} on the node)")
    factor = max((PARTITION_FACTORS.get(m, 1) for m in snap.partitions_sysfs.values()), default=1)
    if (
        problems
        and expect is not None
        and factor > 1
        and expect * factor == expected_visible
        and len(problems) == 1
    ):
        return warned(
            f"{expected_visible} devices = --expect-gpus {expect} x {factor} compute partitions "
            "(see gpu-partition)",
            *details,
            fix="Count partitions, not cards, in --expect-gpus",
        )
    if problems:
        fix = "Make the job see the devices it expects."
        if torch.count == 0 and n_physical:
            fix = (
                "torch sees none of the node's GPUs: check device access (device-access), the RTLD_GLOBAL "
                "preload (amdsmi-duplicate) and the masks (visibility-masks)"
            )
        return failed("; ".join(problems), *details, fix=fix)
    if n_physical == 0 and torch.count in (None, 0):
        # A bring-up validator that finds no GPU has found a problem, unless none was expected.
        if expect == 0:
            return passed("no GPU on this node, as --expect-gpus 0 says", *details)
        return failed(
            "no source finds a GPU",
            *details,
            fix="Run on a GPU node with the devices passed into the container (--device /dev/kfd "
            "--device /dev/dri, or --gpus all), or pass --expect-gpus 0 where no GPU is expected",
        )
    agreeing = [s for s in sources if s.count is not None]
    return passed(
        f"{len(agreeing)} sources agree: {n_physical} GPU(s), {expected_visible} visible ({_fmt(agreeing)})",
        *details,
    )


def ray_gpus(snap: Snapshot, opts: DoctorOptions) -> Result:
    fix = "Run the probe by hand to see its traceback: python -c 'import ray._private.accelerators'"
    if problem := probe_problem(snap, "ray", "Ray", fix=fix):
        return problem
    data = snap.probe("ray") or {}
    if "import_error" in data:
        if data["import_error"].startswith("ModuleNotFoundError"):
            return skipped("Ray is not installed")
        return failed(f"import ray fails: {data['import_error']}", fix="Reinstall Ray in this environment")
    n_physical = snap.physical_count()
    masks = snap.masks()
    expected = masks.visible_count if masks.visible_count is not None else n_physical
    for key in ("manager_error", "visible_error", "resolved_error"):
        if key in data:
            fix = "Fix the visibility masks (see visibility-masks)"
            if "KeyError" in data[key] or "amdsmi" in data[key]:
                fix = f"amdsmi is broken (see amdsmi-import); install it from the SDK: {SDK_INSTALL}"
            return failed(f"Ray {data.get('version')} fails while detecting GPUs: {data[key]}", fix=fix)
    resolved = int(data.get("resolved_gpus") or 0)
    detail = (
        f"manager {data.get('manager')}, detected {data.get('detected')}, visible ids "
        f"{data.get('visible_ids')}, accelerator_type {data.get('accelerator_type')}"
    )
    if resolved == 0 and expected > 0:
        amdsmi = snap.probe("amdsmi") or {}
        if snap.vendor() == "amd" and (data.get("amd_detected") or 0) == 0:
            why = (
                amdsmi.get("import_error")
                or amdsmi.get("init_error")
                or f"amdsmi counts {amdsmi.get('count')}"
            )
            return failed(
                f"Ray would register 0 GPUs, the node has {n_physical}: its AMD detector gets nothing "
                f"from amdsmi ({why}); Ray swallows the error",
                detail,
                fix=f"Install amdsmi from the ROCm SDK: {SDK_INSTALL} (the amdsmi-install patch)",
            )
        return failed(
            f"Ray would register 0 GPUs, {expected} are visible",
            detail,
            fix="Check the masks Ray reads (visibility-masks) and that NVML/amdsmi work in this env",
        )
    if resolved != expected and n_physical:
        return warned(
            f"Ray would register {resolved} GPU(s), {expected} are visible",
            detail,
            fix="Start Ray with --num-gpus matching the visible devices",
        )
    if resolved == 0:
        return skipped("no GPU for Ray to register on this node", detail)
    return passed(
        f"Ray {data.get('version')} would register GPU: {resolved} "
        f"(accelerator_type {data.get('accelerator_type')})",
        detail,
    )


def gpu_partition(snap: Snapshot, opts: DoctorOptions) -> Result:
    expect = opts.expect_gpus
    modes = dict(snap.partitions_sysfs)
    run = snap.tools.get("amd-smi-partition")
    tool_modes = parse_amd_smi_partition(run.stdout) if run is not None and run.ok else []
    if not modes and tool_modes:
        modes = {f"gpu{i}": m for i, m in enumerate(tool_modes)}
    if not modes:
        return skipped("no compute-partition mode exposed (no MI300-class AMD GPU here)")
    split = {card: m for card, m in modes.items() if PARTITION_FACTORS.get(m, 1) > 1}
    summary = ", ".join(f"{card}={m}" for card, m in sorted(modes.items()))
    if not split:
        return passed(f"every GPU in SPX mode ({summary})")
    factor = max(PARTITION_FACTORS[m] for m in split.values())
    n_physical = snap.physical_count()
    masks = snap.masks()
    visible = masks.visible_count if masks.visible_count is not None else n_physical
    kinds = ", ".join(sorted(set(split.values())))
    # sysfs has one current_compute_partition per card (the partitions' own nodes have none); amd-smi lists
    # one row per card, or per partition in newer versions, so only sysfs counts cards.
    cards = len(snap.partitions_sysfs) or None
    where = f"{cards} card(s)" if cards else "amd-smi"
    detail = f"{kinds} mode ({where}): {n_physical} devices in all, {visible} visible"
    if expect is not None and expect == visible:
        return passed(f"{kinds} partitions as expected: {visible} devices ({summary})", detail)
    if expect is not None and visible > expect and (expect == cards or expect * factor == visible):
        return failed(
            f"partition mode multiplies the device count: {visible} devices, --expect-gpus {expect} "
            "counts cards",
            detail,
            fix=f"Expect {visible} devices (cards x partitions), or switch to SPX "
            "(amd-smi set --compute-partition SPX)",
        )
    # Labs partition on purpose, so a uniform mode is no finding without --expect-gpus (which pins the count,
    # and gpu-count judges a wrong one). Cards in different modes are: a mode is set or reset per card, so
    # one card left behind gives the node a device count its siblings do not have.
    if len(set(modes.values())) > 1:
        return warned(
            f"cards in different compute partition modes ({summary}): they contribute unequal device counts",
            detail,
            fix="Set one mode on every card (amd-smi set --compute-partition <SPX|DPX|CPX>)",
        )
    hint = (
        f"pass --expect-gpus {visible} to pin the count"
        if expect is None
        else f"--expect-gpus {expect} counts neither the cards nor the {visible} devices (see gpu-count)"
    )
    return passed(f"{kinds} partitioning on: {n_physical} devices ({summary})", detail, hint)


CHECKS = (
    Check(
        "gpu-count",
        "gpus",
        "GPU count agrees across sources",
        gpu_count,
        "https://github.com/pytorch/pytorch/issues/186516",
        frozenset({"torch", "ray", "amdsmi", "nvml", "tools"}),
    ),
    Check(
        "ray-gpus",
        "gpus",
        "Ray would see the GPUs",
        ray_gpus,
        "https://github.com/ray-project/ray/pull/62393",
        frozenset({"ray", "amdsmi", "nvml", "tools"}),
    ),
    Check(
        "gpu-partition",
        "gpus",
        "Partition mode and device count",
        gpu_partition,
        "https://github.com/ROCm/k8s-device-plugin/issues/157",
        frozenset({"partition", "tools", "amdsmi", "nvml"}),
    ),
)
