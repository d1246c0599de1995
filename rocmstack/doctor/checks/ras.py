"""GPU error events between jobs: the driver's uncorrectable-error counters and retired pages against the
node's first run of this boot (``--history DIR``; rocmstack.doctor.ras reads them)."""

from __future__ import annotations

import dataclasses
import socket

from rocmstack.doctor.checks.host import ecc_output, parse_nvidia_ecc
from rocmstack.doctor.history import read_history
from rocmstack.doctor.kmsg import Record, gpu_events, read_kmsg
from rocmstack.doctor.model import Check, DoctorOptions, Result, failed, passed, skipped
from rocmstack.doctor.ras import (
    RAS_CHECK,
    Counters,
    boot_id,
    from_nvidia,
    new_events,
    read_amd,
    recorded,
    recorded_kernel,
)
from rocmstack.errors import printable
from rocmstack.platform.snapshot import Snapshot


def _counters(snap: Snapshot, opts: DoctorOptions) -> Counters | Result:
    vendor = snap.vendor()
    if vendor == "amd":
        found = read_amd(opts.sysfs_root)
        return found or skipped("the amdgpu driver shows no RAS counters here (no ras/ folder of any GPU)")
    out = ecc_output(vendor, opts)  # NVIDIA: nvidia-smi's volatile ECC totals per GPU, as gpu-ecc reads them
    if isinstance(out, Result):
        return out
    return from_nvidia(parse_nvidia_ecc(out)) or skipped("nvidia-smi gives no ECC counter (ECC off)")


SINCE_FIRST = ", new since this boot's first run"
KEPT_EVENTS = 20  # the kernel's GPU error events of a boot a history record carries on (the newest)


def _kernel_log(opts: DoctorOptions) -> list[Record] | str:
    """The kernel's records, or why they cannot be read here."""
    try:
        return read_kmsg(opts.dev_root / "kmsg")
    except OSError as exc:
        return f"the kernel log ({opts.dev_root / 'kmsg'}) is not readable here: {exc.strerror}"


def _this_boot(
    opts: DoctorOptions, boot: str
) -> tuple[tuple[Counters, str] | None, tuple[int, list[str]] | None]:
    """This boot's first counters and when they were read, and what the kernel log showed up to the last run
    (both carried by every run of the boot, the last one read); (None, None) before the first run."""
    assert opts.history_dir is not None
    first: tuple[Counters, str] | None = None
    kernel: tuple[int, list[str]] | None = None
    for run in read_history(opts.history_dir, socket.gethostname()).runs:
        kept = recorded(run)
        if kept is not None and kept[0] == boot:
            first = kept[1], printable(kept[2] or "an earlier run")[:40]
            kernel = recorded_kernel(run)
    return first, kernel


def _kernel_events(records: list[Record], seen: tuple[int, list[str]] | None) -> tuple[list[str], dict, str]:
    """The boot's GPU error events (those an earlier run saw, then the new ones), what to keep, and a note
    on what was read."""
    last, events = seen if seen is not None else (-1, [])
    new = [e.describe() for e in gpu_events(r for r in records if r.seq > last)]
    events = (events + new)[-KEPT_EVENTS:]
    note = f"{len(records)} kernel log record(s)"
    if seen is not None and records and records[0].seq > last + 1:
        note += f" (records {last + 1}-{records[0].seq - 1} were overwritten before this run read them)"
    return events, {"seq": max([last, *(r.seq for r in records)]), "events": events}, note


def gpu_ras_events(snap: Snapshot, opts: DoctorOptions) -> Result:
    counted = _counters(snap, opts)
    if isinstance(counted, Result) and snap.vendor() not in ("amd", "nvidia"):
        return counted  # no GPU: nothing to judge
    kernel = _kernel_log(opts)
    if isinstance(counted, Result) and isinstance(kernel, str):
        return skipped(f"{counted.summary}; {kernel}")
    now: Counters = {} if isinstance(counted, Result) else counted
    boot = boot_id(opts.proc_root)
    data: dict[str, object] = {"boot_id": boot, "counters": now}
    remembered = opts.history_dir is not None and boot is not None
    first, seen = _this_boot(opts, boot) if remembered and boot is not None else (None, None)
    lines: list[str] = []
    counter_lines: list[str] = []
    judged: list[str] = []
    if isinstance(counted, Result):
        judged.append(counted.summary)
    elif not remembered:
        why = "no --history DIR" if opts.history_dir is None else "the kernel gives no boot id"
        judged.append(f"{why}: the driver's counters cannot tell a new event from an old one")
    elif first is None:
        judged.append(f"first run of this boot: {len(now)} error counter(s) remembered")
    else:
        baseline, when = first
        data.update(baseline=baseline, since=when)
        counter_lines = new_events(baseline, now)
        lines += counter_lines
        judged.append(f"{len(now)} error counter(s) against this boot's first run ({when})")
    if isinstance(kernel, str):
        if not remembered:  # neither source can judge
            return dataclasses.replace(skipped(f"{judged[0]}; {kernel}"), data=data)
        judged.append(kernel)
    else:
        events, data["kernel"], note = _kernel_events(kernel, seen)
        lines += events
        judged.append(f"{note} of this boot")
    if lines:
        return dataclasses.replace(
            failed(
                # the record first: a drain reason keeps 200 characters
                f"{lines[0]}{f' (+{len(lines) - 1} more)' if len(lines) > 1 else ''}"
                f"{SINCE_FIRST if lines[0] in counter_lines else ''}",
                *lines,
                *judged,
                fix="Drain the node and have the GPU checked (amd-smi ras --cper / nvidia-smi -q -d "
                "ECC,PAGE_RETIREMENT); a reboot clears the event, not the fault, if it comes back",
            ),
            data=data,
        )
    return dataclasses.replace(passed(f"no GPU error event in this boot: {'; '.join(judged)}"), data=data)


CHECKS = (
    Check(
        RAS_CHECK,
        "host",
        "New uncorrectable GPU errors or retired pages since this boot's first run",
        gpu_ras_events,
        "https://github.com/torvalds/linux/blob/master/drivers/gpu/drm/amd/amdgpu/amdgpu_ras.c",
        frozenset({"tools"}),
    ),
)
