"""Shared by the probe scripts (found on sys.path[0], the probes folder)."""

import json
import re
import sys

# The dynamic loader's words (glibc's dlerror), read by the loads probe on the node and by its check
LOADER_VERSION_MISS = re.compile(r"(\S+): version [`'\"](([A-Za-z][\w.]*?)_[0-9][\w.]*)['`\"] not found")
LOADER_UNDEFINED = re.compile(r"undefined symbol: (\S+)")
LOADER_MISSING_LIB = re.compile(r"(\S+): cannot open shared object file")

MARK = "ROCMSTACK-PROBE-JSON:"


def emit(data: dict) -> None:
    sys.stdout.write("\n" + MARK + json.dumps(data, default=str) + "\n")
    sys.stdout.flush()


def error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def loaded_copies(fragment: str) -> list:
    """Distinct files whose name contains ``fragment`` mapped into this process (duplicates = ODR clash)."""
    paths = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) == 6 and fragment in parts[5].rsplit("/", 1)[-1]:
                    paths.add(parts[5].strip())
    except OSError:
        return []
    return sorted(paths)


def ancestors(pid: int, proc_root: str = "/proc", limit: int = 64) -> list:
    """Parent, grandparent, ... of ``pid`` read from ``proc_root`` (empty when the pid is not visible)."""
    chain: list = []
    while pid > 1 and len(chain) < limit:
        try:
            with open(f"{proc_root}/{pid}/stat", encoding="utf-8", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            break
        # the command sits in parentheses and may hold spaces: the ppid is the 2nd field after the last ")"
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) < 2 or not fields[1].isdigit():
            break
        pid = int(fields[1])
        chain.append(pid)
    return chain
