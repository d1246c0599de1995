"""GPU error events in the kernel's log: NVIDIA's Xid lines, judged by NVIDIA's Xid catalog (xid.yaml), and
amdgpu's uncorrectable-error and hardware-error lines.

The log is read from ``/dev/kmsg``: one record per read, ``PRIO,SEQ,USEC,FLAGS;TEXT``
(Documentation/ABI/testing/dev-kmsg). SEQ counts from each boot, so a node's earlier run of this boot tells
which records it has seen; only facility 0 is the kernel's own (user space cannot write it, so a line echoed
into /dev/kmsg is not taken for a driver's). NVML cannot serve here: it reports only the Xids that occur
while a process listens, and a health check runs between them.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

XID_FILE = Path(__file__).with_name("xid.yaml")
_RECORD = re.compile(r"^(\d+),(\d+),(\d+),[^;]*;(.*)$")
# NVIDIA's driver: "NVRM: Xid (PCI:0000:2b:00): 79, pid=..., name=..., TEXT" (MIG: "(PCI:... GPU-I:01 ...)")
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)[^)]*\): (\d+),")
_XID_154 = re.compile(r"recovery action changed from .* to 0x[0-9a-fA-F]+ \(([^)]*)\)")
# amdgpu (amdgpu_ras.c, amdgpu_aca.c): an uncorrectable interrupt, a count of new uncorrectable errors, the
# start of an ACA bank dump (its entry lines follow and are not events of their own)
_AMD = (
    re.compile(r"^amdgpu (\S+): .*uncorrectable hardware error\b"),
    re.compile(r"^amdgpu (\S+): .*\bnew uncorrectable hardware errors detected in\b"),
    re.compile(r"^amdgpu (\S+): .*\[Hardware Error\]: Accelerator Check Architecture events logged"),
)
_READ = 8192  # a record is at most 8 KiB (printk's CONSOLE_EXT_LOG_MAX)


@dataclass(frozen=True)
class Record:
    seq: int
    text: str


@dataclass(frozen=True)
class Event:
    seq: int
    gpu: str  # the PCI address the line names
    what: str  # "Xid 79 (GPU has fallen off the bus)", "amdgpu uncorrectable error"
    line: str  # the kernel's own text

    def describe(self) -> str:
        return f"{self.gpu}: {self.what}: {self.line[:160]}"


def parse(lines: Iterable[str]) -> list[Record]:
    """The kernel's own records (facility 0) among ``/dev/kmsg`` lines; continuation lines (" KEY=value")
    and other facilities are left out."""
    out = []
    for line in lines:
        m = _RECORD.match(line)
        if m and int(m.group(1)) >> 3 == 0:
            out.append(Record(int(m.group(2)), m.group(4).rstrip("\n")))
    return out


def read_kmsg(path: Path) -> list[Record]:
    """Every record the kernel still holds, oldest first (raises OSError when the log cannot be read, e.g.
    without CAP_SYSLOG under kernel.dmesg_restrict). A regular file (a saved ``/dev/kmsg``) reads the same."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            with os.fdopen(os.dup(fd), encoding="utf-8", errors="replace") as f:
                return parse(f)
        lines = []
        while True:
            try:
                chunk = os.read(fd, _READ)
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records overwritten while reading: go on from the oldest left
                    continue
                if exc.errno == errno.EAGAIN:
                    break
                raise
            if not chunk:
                break
            lines.append(chunk.decode("utf-8", errors="replace"))
        return parse(lines)
    finally:
        os.close(fd)


@functools.cache
def xid_catalog() -> Mapping[int, tuple[str, str]]:
    """Xid -> (name, "node" | "job") from xid.yaml."""
    data = yaml.safe_load(XID_FILE.read_text(encoding="utf-8"))
    return {int(code): (entry["name"], entry["class"]) for code, entry in data["xid"].items()}


def node_xid(text: str) -> tuple[str, str] | None:
    """(PCI address, "Xid N (name)") when ``text`` is an Xid line NVIDIA's catalog says the node must be
    repaired for (a code not in the catalog counts as one); None for any other line, an application's own
    Xid, and an Xid 154 whose new recovery action is none. The one reading of Xid lines: ``gpu-ras-events``
    (here) and ``kernel-faults`` (dmesg) use it both."""
    m = _XID.search(text)
    if m is None:
        return None
    code = int(m.group(2))
    if code == 154:
        action = _XID_154.search(text)
        if action is None or action.group(1).strip().lower() == "none":
            return None
        return m.group(1), f"Xid 154 (recovery action: {action.group(1)})"
    name, kind = xid_catalog().get(code, ("not in NVIDIA's catalog: judged as a node fault", "node"))
    return (m.group(1), f"Xid {code} ({name})") if kind == "node" else None


def gpu_events(records: Iterable[Record]) -> list[Event]:
    """The records that are a GPU error the node must be repaired for."""
    out = []
    for record in records:
        if xid := node_xid(record.text):
            out.append(Event(record.seq, xid[0], xid[1], record.text))
            continue
        for pattern in _AMD:
            if m := pattern.search(record.text):
                out.append(Event(record.seq, m.group(1), "amdgpu uncorrectable error", record.text))
                break
    return out
