"""What every part of ``validate`` agrees on: file names, stage statuses, and the report.json schema.

The bottom of the package: ``pipeline`` (the in-place run), ``report`` (the three report files),
``container`` (the run inside an image) and ``publish`` (the gate) import from here, never the other way.

A report.json is untrusted input twice: the one the image wrote (copied up by the host) and the one a
publish is handed. ``parse_report`` checks its shape before anything reads it, so a missing key or a
wrong type is one line naming the field, never a traceback in the writer or the gate. The doctor's,
the smoke's and the bench's parts are checked with the models their producers own (``DoctorReport``,
``SmokeSummary``, ``BenchReport``, on ``rocmstack.wire``); this module describes only its own stages.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError

from rocmstack.bench import report as bench_report
from rocmstack.doctor import report as doctor_report
from rocmstack.doctor.report import DoctorReport
from rocmstack.errors import InputError, printable
from rocmstack.smoke.report import FrameworkSummary, SmokeSummary
from rocmstack.status import Status, status_of
from rocmstack.wire import Scalar, WireModel

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


def device_archs(doctor: dict[str, Any] | None) -> list[str]:
    """The gfx targets of this node's GPUs, as the doctor read them from the driver (KFD topology)."""
    archs = ((doctor or {}).get("platform") or {}).get("gpu_archs") or []
    return sorted({a for a in archs if isinstance(a, str)})


def single_arch(archs: list[str]) -> str | None:
    """The arch a report stands for: the node's one GPU arch; None on a CPU node or a mixed one."""
    return archs[0] if len(archs) == 1 else None


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


class Stage(WireModel):
    name: str  # the verdict line joins the names: a number or null here is a malformed report
    status: Scalar
    seconds: Scalar
    summary: Scalar


class DoctorPart(WireModel):
    report: DoctorReport | None = None


class SmokePart(WireModel):
    summary: SmokeSummary | None = None
    dir: Scalar = None  # beside report.json: its metrics and plots


class BenchPart(WireModel):
    report: bench_report.BenchReport | None = None
    dir: Scalar = None


class FrameworkPart(WireModel):
    summary: FrameworkSummary | None = None
    dir: Scalar = None
    note: Scalar = None  # why it did not run


class Image(WireModel):
    ref: Scalar = None
    id: Scalar = None
    labels: dict[str, Scalar] = Field(default_factory=dict)


class Engine(WireModel):
    engine: Scalar
    commands: list[list[str]] = Field(default_factory=list)


class HostChecked(WireModel):
    gpu_arch: str | None
    gpu_archs: list[str]
    options: dict[str, Any]


class ValidateReport(WireModel):
    """report.json: this package's stages around the doctor's, the smoke's and the bench's own reports. The
    in-place run builds it; the host writes its own facts over an image's (``produce(..., over=)``)."""

    schema_: Literal["rocmstack.validate/2"] = Field(alias="schema")
    rocmstack_version: Scalar = None
    passed: bool
    verdict: str
    mode: str
    created: Scalar
    seconds: Scalar
    render_hash: str | None = None
    gpu_arch: str | None = None
    gpu_archs: list[str] = Field(default_factory=list)
    host: dict[str, Any]
    stages: list[Stage]
    image: Image | None = None
    engine: Engine | None = None
    options: dict[str, Any] | None = None
    doctor: DoctorPart | None = None
    smoke: SmokePart | None = None
    engine_smoke: dict[str, SmokeSummary | None] | None = None  # rollout engine -> its smoke's summary
    bench: BenchPart | None = None
    framework: FrameworkPart | None = None
    # written by the host of a run inside an image
    sbom: dict[str, Any] | None = None
    host_gpu_archs: list[str] | None = None
    host_checked: HostChecked | None = None
    image_claimed: dict[str, Any] | None = None


def _where(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def upgraded(data: object) -> object:
    """A report in this schema: an EARLIER one's skipped stage "skipped" as "skip" and the boolean "passed"
    of its smokes' criteria (the GRPO smoke's, each engine smoke's, the framework's) as their status; and,
    of either schema, the bench's and the doctor's reports through their own readers (an image of this
    schema may have written an earlier one). Only those spellings move: any other status (an image's "ok",
    true) stays and fails as given. Tolerant of any JSON; anything of neither schema comes back as it is."""
    if not isinstance(data, dict) or data.get("schema") not in (SCHEMA, EARLIER):
        return data
    for part, upgrade in (("bench", bench_report.upgrade), ("doctor", doctor_report.upgrade)):
        carried = data.get(part)
        if isinstance(carried, dict) and "report" in carried:
            data = {**data, part: {**carried, "report": upgrade(carried["report"])}}
    if data["schema"] != EARLIER:
        return data
    out: dict[str, Any] = {**data, "schema": SCHEMA}
    if isinstance(out.get("stages"), list):
        out["stages"] = [
            {**s, "status": SKIP.value} if isinstance(s, dict) and s.get("status") == "skipped" else s
            for s in out["stages"]
        ]
    for part in ("smoke", "framework"):
        carried = out.get(part)
        if isinstance(carried, dict) and "summary" in carried:
            out[part] = {**carried, "summary": _judged(carried["summary"])}
    if isinstance(out.get("engine_smoke"), dict):
        out["engine_smoke"] = {name: _judged(summary) for name, summary in out["engine_smoke"].items()}
    return out


def _judged(summary: Any) -> Any:
    """A summary whose criteria judged with a boolean "passed" (schema 1), with their status instead."""
    if not isinstance(summary, dict) or not isinstance(summary.get("criteria"), list):
        return summary
    return {**summary, "criteria": [_criterion(c) for c in summary["criteria"]]}


def _criterion(c: Any) -> Any:
    if not isinstance(c, dict) or "passed" not in c:
        return c
    # null was "could not be measured"; anything but a true pass is not a pass
    return {**{k: v for k, v in c.items() if k != "passed"}, "status": status_of(c["passed"]).value}


def report_problem(data: object) -> str | None:
    """None when DATA (an EARLIER report once upgraded) has the report.json shape; otherwise one line naming
    the first field that is wrong."""
    if isinstance(data, dict) and data.get("schema") not in (SCHEMA, EARLIER):
        found = data.get("schema")
        return f"schema {printable(repr(found))}, expected {SCHEMA}"
    try:
        ValidateReport.model_validate(upgraded(data))
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
