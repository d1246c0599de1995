"""Shared by the probe scripts (found on sys.path[0], the probes folder)."""

import json
import sys

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
