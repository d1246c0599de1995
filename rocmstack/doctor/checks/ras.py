"""GPU error events between jobs: the driver's uncorrectable-error counters and retired pages against the
node's first run of this boot (``--history DIR``; rocmstack.doctor.ras reads them)."""

from __future__ import annotations

import dataclasses
import socket

from rocmstack.doctor.checks.host import ecc_output, parse_nvidia_ecc
from rocmstack.doctor.history import read_history
from rocmstack.doctor.model import Check, DoctorOptions, Result, failed, passed, skipped
from rocmstack.doctor.ras import RAS_CHECK, Counters, boot_id, from_nvidia, new_events, read_amd, recorded
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


def _first_of_boot(opts: DoctorOptions, boot: str) -> tuple[Counters, str] | None:
    """This boot's first counters and when they were read (carried by every run of the boot, the last one
    read); None before the first run of this boot."""
    assert opts.history_dir is not None
    found = None
    for run in read_history(opts.history_dir, socket.gethostname()).runs:
        kept = recorded(run)
        if kept is not None and kept[0] == boot:
            found = kept[1], printable(kept[2] or "an earlier run")[:40]
    return found


def gpu_ras_events(snap: Snapshot, opts: DoctorOptions) -> Result:
    now = _counters(snap, opts)
    if isinstance(now, Result):
        return now
    boot = boot_id(opts.proc_root)
    data: dict[str, object] = {"boot_id": boot, "counters": now}
    if opts.history_dir is None or boot is None:
        why = "no --history DIR" if opts.history_dir is None else "the kernel gives no boot id"
        return dataclasses.replace(
            skipped(
                f"{why}: this boot's first counts are not known, so a new event cannot be told from an old one"
            ),
            data=data,
        )
    first = _first_of_boot(opts, boot)
    if first is None:
        return dataclasses.replace(
            passed(f"first run of this boot: {len(now)} error counter(s) remembered"), data=data
        )
    baseline, when = first
    data.update(baseline=baseline, since=when)
    lines = new_events(baseline, now)
    if lines:
        return dataclasses.replace(
            failed(
                # the record first: a drain reason keeps 200 characters
                f"{lines[0]}{f' (+{len(lines) - 1} more)' if len(lines) > 1 else ''}, new since this boot's "
                "first run",
                *lines,
                f"this boot's first run: {when}",
                fix="Drain the node and have the GPU checked (amd-smi ras / nvidia-smi -q -d ECC,PAGE_RETIREMENT); "
                "a reboot clears the event, not the fault, if it comes back",
            ),
            data=data,
        )
    return dataclasses.replace(
        passed(
            f"no new uncorrectable event in {len(now)} error counter(s) since this boot's first run ({when})"
        ),
        data=data,
    )


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
