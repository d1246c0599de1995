"""Whose problem a failing check is: the node's (a reset or a reboot can clear it) or the user's (what a job or
its image brought or left). The classes are data (problems.yaml); a result whose finding decides overrides."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import yaml

from rocmstack.doctor.model import Result

CLASSES = ("node", "user")
DATA = Path(__file__).with_name("problems.yaml")


@functools.lru_cache(maxsize=4)  # shipped data, read once per process
def load_classes(path: Path = DATA) -> Mapping[str, str]:
    """check id -> "node" | "user"; a check listed twice is a ValueError (a packaging fault, caught by tests)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    out: dict[str, str] = {}
    for cls in CLASSES:
        for check in data.get(cls) or []:
            if check in out:
                raise ValueError(f"{path.name}: {check} is in both lists")
            out[str(check)] = cls
    return MappingProxyType(out)


def problem_of(check_id: str, result: Result, classes: Mapping[str, str]) -> str:
    """The result's own class where its finding decided one, else the check's (tests/unit/test_doctor_problems.py
    keeps every check listed)."""
    return result.problem or classes.get(check_id, "node")
