"""The kernel log's GPU error events (rocmstack.doctor.kmsg) on the drivers' real lines
(tests/fixtures/doctor/kmsg/SOURCES.md) and on this machine's own /dev/kmsg."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocmstack.doctor.kmsg import gpu_events, parse, read_kmsg, xid_catalog

KMSG = Path(__file__).resolve().parents[1] / "fixtures" / "doctor" / "kmsg"


def _events(name: str) -> list[str]:
    return [e.describe() for e in gpu_events(read_kmsg(KMSG / name))]


def _whats(name: str) -> list[str]:
    return [e.what for e in gpu_events(read_kmsg(KMSG / name))]


def test_amdgpus_uncorrectable_interrupt_and_aca_dump_are_two_events_not_seven():
    assert _events("amdgpu-mi300x-4021.kmsg") == [
        "0000:1c:00.0: amdgpu uncorrectable error: amdgpu 0000:1c:00.0: {1}uncorrectable hardware "
        "error(ERREVENT_ATHUB_INTERRUPT) detected!",
        "0000:42:00.0: amdgpu uncorrectable error: amdgpu 0000:42:00.0: {1}[Hardware Error]: Accelerator "
        "Check Architecture events logged",
    ]


def test_xids_the_catalog_sends_to_a_reset_or_reboot_are_events():
    assert _whats("nvidia-xid-48-64.kmsg") == [
        "Xid 48 (Double-bit ECC error)",
        "Xid 64 (ECC page retirement or row remapping failure)",
    ]
    assert _events("nvidia-xid-79.kmsg") == [
        "0000:2b:00: Xid 79 (GPU has fallen off the bus): NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off "
        "the bus."
    ]
    assert _whats("nvidia-xid-62-154.kmsg") == [
        "Xid 62 (Internal micro-controller halt (PMU_HALT_ERROR))",
        "Xid 154 (recovery action: GPU Reset Required)",
    ]


def test_an_applications_own_xid_and_a_recovery_action_of_none_are_not_events():
    assert _events("nvidia-xid-45.kmsg") == []
    none = "4,9,10,-;NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x1 (x) to 0x0 (None)"
    assert gpu_events(parse([none])) == []
    unknown = "4,9,10,-;NVRM: Xid (PCI:0000:01:00): 201, something new"
    assert [e.what for e in gpu_events(parse([unknown]))] == [
        "Xid 201 (not in NVIDIA's catalog: judged as a node fault)"
    ]


def test_only_the_kernels_own_records_count():
    lines = [
        # written into /dev/kmsg from user space: facility 1 (LOG_USER) at least, whatever it claims
        "11,40,500,-;NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
        " SUBSYSTEM=pci",  # a continuation line: key/value context, not a record
        "3,41,600,-;NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
        "not a record",
    ]
    assert [r.seq for r in parse(lines)] == [41]


def test_every_xid_in_the_catalog_is_classified():
    assert {kind for _, kind in xid_catalog().values()} == {"node", "job"}
    assert xid_catalog()[79] == ("GPU has fallen off the bus", "node")


@pytest.mark.skipif(not os.access("/dev/kmsg", os.R_OK), reason="this machine's kernel log is not readable")
def test_this_machines_kernel_log_reads_as_records_in_sequence():
    records = read_kmsg(Path("/dev/kmsg"))
    assert records, "the kernel holds no record"
    seqs = [r.seq for r in records]
    assert seqs == sorted(set(seqs))  # one record per read, each once, oldest first
