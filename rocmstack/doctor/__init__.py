"""``rocmstack doctor``: the bring-up validator. In-process API::

    from rocmstack.doctor import DoctorOptions, run_doctor
    report = run_doctor(DoctorOptions(fast=True))   # dict, schema SCHEMA; report["ok"] is the verdict
"""

from rocmstack.doctor.model import SCHEMA, DoctorOptions, Status
from rocmstack.doctor.runner import run_doctor, select_checks

__all__ = ["SCHEMA", "DoctorOptions", "Status", "run_doctor", "select_checks"]
