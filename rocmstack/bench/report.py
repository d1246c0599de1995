"""The rollout bench's report (``rollout.json``): its schema, and the reader of the schema before it.

Schema 2 speaks the one status vocabulary (``rocmstack.status``): a row, an engine and a weight-sync
method that ran are ``pass`` (schema 1: ``ok``), and a baseline check carries a ``status`` (schema 1: a
boolean ``ok``). A report of schema 1 comes from files kept from earlier runs and from images built
before; ``upgrade`` moves exactly those two spellings and nothing else.
"""

from __future__ import annotations

from typing import Any

from rocmstack.status import Status

SCHEMA = 2
KIND = "rocmstack.bench.rollout"
EARLIER = 1
ROWS = ("results", "engines", "weight_sync")  # the lists whose entries carry a status


def _row(row: Any) -> Any:
    if isinstance(row, dict) and row.get("status") == "ok":
        return {**row, "status": Status.PASS.value}
    return row


def _check(check: Any) -> Any:
    if not isinstance(check, dict) or "ok" not in check:
        return check
    # anything but a true ``ok`` was not a pass: it stays a failure
    rest = {k: v for k, v in check.items() if k != "ok"}
    return {**rest, "status": (Status.PASS if check["ok"] is True else Status.FAIL).value}


def upgrade(report: Any) -> Any:
    """A schema-1 report in schema 2; anything else as given (the caller's own checks judge its shape).

    Tolerant of any JSON: it comes from images and files rocmstack did not necessarily write."""
    if not isinstance(report, dict) or report.get("schema") != EARLIER:
        return report
    out: dict[str, Any] = {**report, "schema": SCHEMA}
    for key in ROWS:
        if isinstance(out.get(key), list):
            out[key] = [_row(r) for r in out[key]]
    base = out.get("baseline")
    if isinstance(base, dict) and isinstance(base.get("checks"), list):
        out["baseline"] = {**base, "checks": [_check(c) for c in base["checks"]]}
    return out
