"""The machine a command ran on, as the build manifest and validate's report record it."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any


def host_info() -> dict[str, Any]:
    return {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "in_container": Path("/run/.containerenv").exists() or Path("/.dockerenv").exists(),
    }
