"""``rocmstack doctor``: the bring-up validator. In-process API::

    from rocmstack.doctor import DoctorOptions, run_doctor
    report = run_doctor(DoctorOptions(fast=True))   # dict, schema SCHEMA; report["passed"] is the verdict
    DoctorOptions(level=2, active=ActiveOptions(iters=5))   # each higher level's options in its group

Names resolve lazily, so importing the CLI (which imports rocmstack.commands.doctor) costs nothing here.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "SCHEMA": "rocmstack.doctor.model",
    "DoctorOptions": "rocmstack.doctor.model",
    "ActiveOptions": "rocmstack.doctor.model",
    "ClusterOptions": "rocmstack.doctor.model",
    "BurninOptions": "rocmstack.doctor.model",
    "Status": "rocmstack.doctor.model",
    "run_doctor": "rocmstack.doctor.runner",
    "select_checks": "rocmstack.doctor.runner",
    "run_cluster": "rocmstack.doctor.cluster",
}
__all__ = [
    "SCHEMA",
    "ActiveOptions",
    "BurninOptions",
    "ClusterOptions",
    "DoctorOptions",
    "Status",
    "run_cluster",
    "run_doctor",
    "select_checks",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'rocmstack.doctor' has no attribute {name!r}")
