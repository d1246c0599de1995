"""What every part of ``validate`` agrees on: file names, stage statuses, and the report.json schema.

The bottom of the package: ``pipeline`` (the in-place run), ``report`` (the three report files),
``container`` (the run inside an image) and ``publish`` (the gate) import from here, never the other way.

A report.json is untrusted input twice: the one the image wrote (copied up by the host) and the one a
publish is handed. ``parse_report`` checks its shape before anything reads it, so a missing key or a
wrong type is one line naming the field, never a traceback in the writer or the gate. The values shown
to people stay loosely typed (the renderers escape and format whatever they get); what code indexes,
iterates or compares has the type it needs.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rocmstack.bench import report as bench_report
from rocmstack.errors import InputError, printable
from rocmstack.status import Status

SCHEMA = "rocmstack.validate/2"  # bump the suffix on any incompatible change of report.json
# Read too (an older image writes it, an older publish is handed it): /1 spelled a skipped stage "skipped",
# judged a smoke criterion with a boolean "passed" (null: not measurable) and carried a bench report of
# schema 1 (rows "ok", baseline checks a boolean "ok").
EARLIER = "rocmstack.validate/1"
PASS, FAIL, ERROR, SKIP = Status.PASS, Status.FAIL, Status.ERROR, Status.SKIP
# WARN: ran, but there was nothing to judge it against (no bar): not a failure, never a plain pass
WARN = Status.WARN
MAY_WARN = ("bench",)  # the stages that warn (no floor for the arch); any other stage's warn fails
SMOKE_DIR = "smoke"
BENCH_DIR = "bench"
ROOFLINE_PNG = "roofline.png"
BENCH_JSON = "rollout.json"
FRAMEWORK_DIR = "framework"
REPORT_JSON, REPORT_MD, REPORT_HTML = "report.json", "report.md", "report.html"
SBOM_FILE = "sbom.cdx.json"  # the image's SBOM, beside report.json
REPORT_MOUNT = "/report"
BASELINE_MOUNT = "/baseline"
BASELINE_FILE = "baseline.json"  # the one file mounted there: a copy of --baseline
# The image may run as a non-root user (recipes set one): it writes into a world-writable (sticky) folder
# inside a private (0700) per-run folder of the report dir, named after the container, and the host copies
# up only the files below, as regular files, never following a link, each within its size limit.
STAGE = "report"
MiB = 1 << 20
COLLECT = {
    REPORT_JSON: 16 * MiB,
    f"{SMOKE_DIR}/summary.json": 4 * MiB,
    f"{SMOKE_DIR}/metrics.jsonl": 16 * MiB,
    f"{SMOKE_DIR}/reward.png": 8 * MiB,
    f"{SMOKE_DIR}/logprob_diff.png": 8 * MiB,
    f"{SMOKE_DIR}/phase_times.png": 8 * MiB,
    f"{BENCH_DIR}/{BENCH_JSON}": 4 * MiB,
    f"{BENCH_DIR}/{ROOFLINE_PNG}": 8 * MiB,
    f"{FRAMEWORK_DIR}/summary.json": 4 * MiB,
    f"{FRAMEWORK_DIR}/metrics.jsonl": 16 * MiB,
    f"{FRAMEWORK_DIR}/framework.log": 16 * MiB,
}
REPORT_LIMIT = COLLECT[REPORT_JSON]
# Written by the host over whatever the image said (the gate reads only these): the GPU arch the host's
# own driver saw and the options the host ran the image with.
HOST_CHECKED = "host_checked"
IMAGE_CLAIMED = "image_claimed"  # what the image's report said instead, kept for the record


def stage(name: str, status: str, seconds: float, summary: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "status": status, "seconds": round(seconds, 3), "summary": summary, **extra}


def verdict(stages: list[dict[str, Any]]) -> tuple[bool, str]:
    """Pass only when every stage that ran passed; the line names what failed and what was skipped.
    A status other than ours (an image's "PASS", "ok", true) is not a pass: it fails, named as given."""
    ran = [s for s in stages if s["status"] != SKIP]
    # a tuple, compared with ==: an image's stage name may be anything JSON holds, hashable or not
    warns = [s for s in ran if s["status"] == WARN and s["name"] in MAY_WARN]
    bad = [s for s in ran if s["status"] != PASS and not any(s is w for w in warns)]
    skipped = [printable(s["name"]) for s in stages if s["status"] == SKIP]
    warned = [printable(s["name"]) for s in warns]
    notes = [
        f"{', '.join(names)} {what}" for names, what in ((warned, "warned"), (skipped, "skipped")) if names
    ]
    tail = f" ({'; '.join(notes)})" if notes else ""
    if not ran:
        return False, "FAIL: nothing ran" + tail
    if bad:
        named = (f"{printable(s['name'])} {printable(s['status'])}" for s in bad)
        return False, "FAIL: " + ", ".join(named) + tail
    return True, "PASS: " + ", ".join(printable(s["name"]) for s in ran) + tail


# -- the report.json schema -----------------------------------------------------------------------------

Scalar = str | int | float | bool | None  # a value that is only shown: escaped and formatted, never indexed


class _Open(BaseModel):
    """Keys beyond the ones named are kept as they are (the report carries tool output)."""

    model_config = ConfigDict(extra="allow", strict=True)


class Stage(_Open):
    name: str  # the verdict line joins the names: a number or null here is a malformed report
    status: Scalar
    seconds: Scalar
    summary: Scalar


class Check(_Open):
    id: Scalar
    group: Scalar = None
    status: Scalar
    summary: Scalar
    fix: Scalar = None


class Doctor(_Open):
    verdict: Scalar = None
    checks: list[Check] = []
    platform: dict[str, Any] | None = None


class Criterion(_Open):
    name: Scalar
    status: Scalar
    detail: Scalar


class Smoke(_Open):
    criteria: list[Criterion]
    final: dict[str, Any]
    device: Scalar = None


class BenchResult(_Open):
    engine: Scalar
    batch: Scalar
    status: Scalar


class BaselineCheck(_Open):
    engine: Scalar
    batch: Scalar
    status: Scalar
    baseline_tokens_per_s: Scalar
    ratio: Scalar


class Baseline(_Open):
    checks: list[BaselineCheck] = []


class Named(_Open):
    name: Scalar


class BenchDevice(_Open):
    name: Scalar
    type: Scalar = None


class Bench(_Open):
    shape: Named
    device: BenchDevice
    settings: dict[str, Any]
    results: list[BenchResult]
    baseline: Baseline | None = None


class DoctorPart(_Open):
    report: Doctor | None = None


class SmokePart(_Open):
    summary: Smoke | None = None


class BenchPart(_Open):
    report: Bench | None = None


class Image(_Open):
    ref: Scalar = None
    id: Scalar = None
    labels: dict[str, Scalar] = {}


class Engine(_Open):
    engine: Scalar
    commands: list[list[str]] = []


class HostChecked(_Open):
    gpu_arch: str | None
    gpu_archs: list[str]
    options: dict[str, Any]


class Report(_Open):
    schema_: Literal["rocmstack.validate/2"] = Field(alias="schema")
    passed: bool
    verdict: str
    mode: str
    created: Scalar
    seconds: Scalar
    render_hash: str | None = None
    gpu_arch: str | None = None
    gpu_archs: list[str] = []
    host: dict[str, Any]
    stages: list[Stage]
    image: Image | None = None
    engine: Engine | None = None
    options: dict[str, Any] | None = None
    doctor: DoctorPart | None = None
    smoke: SmokePart | None = None
    bench: BenchPart | None = None
    host_checked: HostChecked | None = None

    model_config = ConfigDict(extra="allow", strict=True)


def _where(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def upgraded(data: object) -> object:
    """An EARLIER report in this schema: a skipped stage's "skipped" as "skip", a smoke criterion's boolean
    "passed" as its status, and its bench report through the bench's own reader. Only those spellings move:
    any other status (an image's "ok", true) stays and fails as given. Tolerant of any JSON; anything not
    EARLIER comes back as it is."""
    if not isinstance(data, dict) or data.get("schema") != EARLIER:
        return data
    out: dict[str, Any] = {**data, "schema": SCHEMA}
    if isinstance(out.get("stages"), list):
        out["stages"] = [
            {**s, "status": SKIP.value} if isinstance(s, dict) and s.get("status") == "skipped" else s
            for s in out["stages"]
        ]
    smoke = out.get("smoke")
    summary = smoke.get("summary") if isinstance(smoke, dict) else None
    if isinstance(smoke, dict) and isinstance(summary, dict) and isinstance(summary.get("criteria"), list):
        criteria = [_criterion(c) for c in summary["criteria"]]
        out["smoke"] = {**smoke, "summary": {**summary, "criteria": criteria}}
    bench = out.get("bench")
    if isinstance(bench, dict) and "report" in bench:
        out["bench"] = {**bench, "report": bench_report.upgrade(bench["report"])}
    return out


def _criterion(c: Any) -> Any:
    if not isinstance(c, dict) or "passed" not in c:
        return c
    judged = c["passed"]
    # null was "could not be measured"; anything but a true pass is not a pass
    status = SKIP if judged is None else PASS if judged is True else FAIL
    return {**{k: v for k, v in c.items() if k != "passed"}, "status": status.value}


def report_problem(data: object) -> str | None:
    """None when DATA (an EARLIER report once upgraded) has the report.json shape; otherwise one line naming
    the first field that is wrong."""
    if isinstance(data, dict) and data.get("schema") not in (SCHEMA, EARLIER):
        found = data.get("schema")
        return f"schema {printable(repr(found))}, expected {SCHEMA}"
    try:
        Report.model_validate(upgraded(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        more = exc.error_count() - 1
        tail = f" (and {more} more)" if more else ""
        return printable(f"{_where(first['loc'])}: {first['msg'].lower()}{tail}")
    return None


def parse_report(data: object, source: str) -> dict[str, Any]:
    """DATA as a report dict of this schema (an EARLIER one upgraded, nothing else changed), or InputError
    naming SOURCE and the field that is wrong."""
    problem = report_problem(data)
    if problem is not None:
        raise InputError(
            f"{source}: not a {SCHEMA} report: {problem}",
            fix="pass a report written by `rocmstack validate` of this version",
        )
    report = upgraded(data)
    assert isinstance(report, dict)
    return report
