"""The rollout bench's report (``rollout.json``): its schema, its model, and the reader of the schemas before.

The headline rate is ``decode_tokens_per_s`` (batch x (new tokens - 1) / all decode steps' time: the rate
the roofline and MBU are of), under that one name from the engine's row to the baseline check.

Schema 3 compares a baseline on that decode rate, and each check names the rate it compared (``metric``),
with this run's value under that name and the baseline's under ``baseline_`` + that name. Schema 2 spoke
the status vocabulary already but compared the prefill-inclusive ``tokens_per_s``; schema 1 also wrote a
row that ran as ``ok`` and a check's verdict as a boolean ``ok``. Reports of both come from files kept from
earlier runs and from images built before. ``upgrade`` moves exactly those spellings and marks an old
check's metric as the ``tokens_per_s`` it was: never relabelled as a decode rate it was not.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from rocmstack.status import Status, status_of
from rocmstack.wire import Scalar, WireModel

SCHEMA = 3
KIND = "rocmstack.bench.rollout"
EARLIER = (1, 2)
HEADLINE = "decode_tokens_per_s"
OLD_METRIC = "tokens_per_s"  # what a baseline check of schema 1 or 2 compared
ROWS = ("results", "engines", "weight_sync")  # the lists whose entries carry a status


def _row(row: Any) -> Any:
    if isinstance(row, dict) and row.get("status") == "ok":
        return {**row, "status": Status.PASS.value}
    return row


def _check(check: Any, schema: int) -> Any:
    if not isinstance(check, dict):
        return check
    out = {**check, "metric": OLD_METRIC}  # whatever an old check claims, it compared the whole-run rate
    if schema != 1 or "ok" not in check:
        return out
    # anything but a true ``ok`` was not a pass: it stays a failure (never a skip)
    rest = {k: v for k, v in out.items() if k != "ok"}
    return {**rest, "status": status_of(check["ok"] is True).value}


def upgrade(report: Any) -> Any:
    """A report of an EARLIER schema in this one; anything else as given (the caller's own checks judge its
    shape).

    Tolerant of any JSON: it comes from images and files rocmstack did not necessarily write."""
    schema = report.get("schema") if isinstance(report, dict) else None
    if type(schema) is not int or schema not in EARLIER:  # true == 1 in Python: not a schema here
        return report
    out: dict[str, Any] = {**report, "schema": SCHEMA}
    if schema == 1:
        for key in ROWS:
            if isinstance(out.get(key), list):
                out[key] = [_row(r) for r in out[key]]
    base = out.get("baseline")
    if isinstance(base, dict) and isinstance(base.get("checks"), list):
        out["baseline"] = {**base, "checks": [_check(c, schema) for c in base["checks"]]}
    return out


def check_rates(check: dict[str, Any]) -> tuple[Any, Any]:
    """A baseline check's (this run, baseline) rates, by the metric it names."""
    metric = check["metric"]
    return check[metric], check[f"baseline_{metric}"]


# -- rollout.json as its readers index it (validate's report carries it whole) -----------------------------


class BenchRow(WireModel):
    engine: Scalar
    batch: Scalar
    status: Scalar


class _BaselineCheck(WireModel):
    engine: Scalar
    batch: Scalar
    status: Scalar
    ratio: Scalar


class DecodeCheck(_BaselineCheck):
    metric: Literal["decode_tokens_per_s"]
    decode_tokens_per_s: Scalar
    baseline_decode_tokens_per_s: Scalar


class WholeRunCheck(_BaselineCheck):
    """A check of a report of schema 1 or 2: it compared the prefill-inclusive rate."""

    metric: Literal["tokens_per_s"]
    tokens_per_s: Scalar
    baseline_tokens_per_s: Scalar


class BaselineVerdict(WireModel):
    """The bench's verdict against a baseline (``baseline.compare``): ``passed`` is the verdict."""

    device: Scalar = None
    tolerance: Scalar = None
    checks: list[Annotated[DecodeCheck | WholeRunCheck, Field(discriminator="metric")]] = Field(
        default_factory=list
    )
    passed: bool | None = None  # every check passed, and one at least ran
    file: Scalar = None  # the baseline file compared with


class BenchShape(WireModel):
    name: Scalar


class BenchDevice(WireModel):
    name: Scalar
    type: Scalar = None


class BenchReport(WireModel):
    """rollout.json: what ``bench.rollout`` builds and writes, and what its readers index (validate's
    report carries it whole); an EARLIER schema once upgraded. A bench measures: its one verdict is the
    baseline's ``passed``, when a baseline was given."""

    schema_: Scalar = Field(default=None, alias="schema")
    kind: Scalar = None
    date: Scalar = None
    command: list[Any] = Field(default_factory=list)
    host: Scalar = None
    device: BenchDevice
    versions: dict[str, Any] | None = None
    shape: BenchShape
    settings: dict[str, Any]
    results: list[BenchRow]
    # each rollout engine run beside the reference: its setup
    engines: list[Any] = Field(default_factory=list)
    weight_sync: list[Any] = Field(default_factory=list)
    interrupted: dict[str, Any] | None = None  # Ctrl-C: the phase it stopped in, and the rows kept
    baseline: BaselineVerdict | None = None
