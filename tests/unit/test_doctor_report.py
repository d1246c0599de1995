"""Report formats: versioned JSON schema, table, Markdown, JUnit."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from pydantic import ValidationError
from rich.console import Console

from rocmstack.doctor.model import SCHEMA
from rocmstack.doctor.report import (
    CheckRow,
    ClusterNode,
    ClusterReport,
    DoctorReport,
    render_junit,
    render_markdown,
    render_table,
    upgrade,
)
from rocmstack.doctor.runner import run_doctor, verdict_line

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "rocmstack" / "doctor" / "schema.json"


@pytest.fixture(scope="module")
def report():
    from rocmstack.doctor.model import DoctorOptions

    r = run_doctor(DoctorOptions(fast=True, expect_gpus=1))  # no GPU in CI: gpu-count fails, a real failure
    r["checks"].append(
        {
            "id": "x-warn",
            "group": "zz",
            "title": "t",
            "status": "warn",
            "summary": "a | b",
            "details": [],
            "fix": "do the thing",
            "source": "https://example.org",
            "seconds": 0.0,
        }
    )
    return r


def test_schema_is_versioned_and_validates(report):
    schema = json.loads(SCHEMA_FILE.read_text())
    assert report["schema"] == SCHEMA == schema["$defs"]["node"]["properties"]["schema"]["const"]
    jsonschema.validate(json.loads(json.dumps(report)), schema)
    broken = json.loads(json.dumps(report))
    broken["checks"][0]["status"] = "maybe"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_the_model_the_doctor_builds_is_the_published_schema(report):
    DoctorReport.model_validate(json.loads(json.dumps(report)))
    defs = json.loads(SCHEMA_FILE.read_text())["$defs"]
    # the doctor's two descriptions of one report agree: every key the model lets the producer write is
    # published, and every published key is the model's (a key added to one alone fails here)
    pairs = [(DoctorReport, "node"), (ClusterReport, "cluster"), (CheckRow, "check")]
    for model, name in pairs:
        assert model.declared() == set(defs[name]["properties"]), name
    node = defs["cluster"]["properties"]["nodes"]["items"]
    assert ClusterNode.declared() == set(node["properties"])
    # what a reader cannot do without is what the schema requires
    for model, name in pairs:
        required = {f.alias or n for n, f in model.model_fields.items() if f.is_required()}
        assert required <= set(defs[name]["required"]), name


def test_the_producer_refuses_a_key_the_schema_does_not_publish(report):
    with pytest.raises(TypeError, match="DoctorReport declares no field 'ok'"):
        DoctorReport.produce({**report, "ok": True})
    with pytest.raises(ValidationError):
        DoctorReport.produce({**report, "passed": "yes"})  # a verdict is a boolean, never coerced


@pytest.mark.parametrize(
    ("earlier", "now"),
    [
        # the doctor's verdict before schema 2, in a node's report
        ({"schema": "rocmstack.doctor/1", "ok": False, "judged": 0}, {"passed": False, "judged": 0}),
        (
            {
                "schema": "rocmstack.doctor/1",
                "mode": "cluster",
                "ok": True,
                "nodes": [
                    {"state": "ok", "report": {"schema": "rocmstack.doctor/1", "ok": True, "checks": []}},
                    {
                        "state": "ok",
                        "report": {"ok": True, "checks": [], "facts": {}},
                    },  # --only cluster checks
                    {"state": "died", "report": None},
                ],
            },
            {
                "mode": "cluster",
                "passed": True,
                "nodes": [
                    {"state": "passed", "report": {"schema": SCHEMA, "passed": True, "checks": []}},
                    {"state": "passed", "report": {"passed": True, "checks": [], "facts": {}}},
                    {"state": "died", "report": None},
                ],
            },
        ),
    ],
)
def test_a_report_of_the_earlier_schema_reads_with_its_verdict_as_passed(earlier, now):
    assert upgrade(earlier) == {"schema": SCHEMA, **now}
    assert upgrade(upgrade(earlier)) == upgrade(earlier)
    # anything else is left as it is: a reader's own checks judge it
    for other in ({"schema": "rocmstack.doctor/9", "ok": True}, ["ok"], None):
        assert upgrade(other) == other


def _doctor_reports() -> list[Path]:
    found = sorted((SCHEMA_FILE.parents[2] / "docs" / "evidence").glob("**/*.json"))
    return [p for p in found if '"rocmstack.doctor/' in p.read_text()[:200_000] and _is_doctor(p)]


def _is_doctor(path: Path) -> bool:
    data = json.loads(path.read_text())
    return isinstance(data, dict) and str(data.get("schema", "")).startswith("rocmstack.doctor/")


@pytest.mark.parametrize("path", _doctor_reports(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_committed_doctor_report_reads_with_its_verdict_as_passed(path):
    earlier = json.loads(path.read_text())
    now = upgrade(earlier)
    model = ClusterReport if now.get("mode") == "cluster" else DoctorReport
    read = model.model_validate(now)
    assert read.passed is earlier.get("ok", earlier.get("passed"))
    if model is ClusterReport:
        assert all(n.state != "ok" for n in read.nodes)


def test_the_earlier_schemas_verdict_is_read_from_a_committed_report():
    # a level-2 run on an H200 (2026-12-04), written in schema 1
    path = SCHEMA_FILE.parents[2] / "docs/evidence/doctor-options-by-level-h200-2026-12-04/level2.json"
    earlier = json.loads(path.read_text())
    assert earlier["schema"] == "rocmstack.doctor/1" and "ok" in earlier
    now = DoctorReport.model_validate(upgrade(earlier))
    assert now.passed is earlier["ok"] and "ok" not in now.model_dump()


def test_table_groups_and_fix(report):
    console = Console(record=True, width=200)
    render_table(report, console)
    text = console.export_text()
    assert "gpus" in text and "gpu-count" in text and "FAIL" in text
    assert "fix: do the thing" in text
    assert "NOT READY: gpu-count" in text


def test_table_keeps_check_ids_and_sources_whole_at_60_columns(report):
    long_id = "rocr-visible-devices-versus-hip-visible-devices"
    narrow = json.loads(json.dumps(report))
    narrow["checks"][-1]["id"] = long_id
    console = Console(record=True, width=60)
    render_table(narrow, console)
    text = console.export_text()
    assert long_id in text and "…" not in text


def test_markdown(report):
    md = render_markdown(report)
    assert md.startswith("## rocmstack doctor")
    assert "| `gpu-count` | ❌ fail |" in md
    assert "a \\| b" in md  # pipes escaped


def test_junit(report):
    root = ET.fromstring(render_junit(report))
    suite = root.find("testsuite")
    assert int(suite.get("tests")) == len(report["checks"])
    assert int(suite.get("failures")) == report["summary"]["fail"]
    failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert "gpu-count" in failed


def test_verdict_line():
    assert (
        verdict_line({"pass": 2, "warn": 1, "fail": 0, "error": 0, "skip": 0}, []) == "READY (2 pass, 1 warn)"
    )
    assert verdict_line({"pass": 1, "fail": 1}, ["gpu-count"]).startswith("NOT READY: gpu-count")


HOSTILE = "ckpt\x1b]52;c;cHduZWQ=\x07\x1b[2J\u202e[red]x[/red] | ![i](http://x/y.png) <img src=x>\nforged row"


@pytest.fixture
def hostile(report):
    """A report whose outside text (a model folder's file name in a summary, a GPU name, a host name,
    a source's detail) carries terminal escapes, rich markup, Markdown and HTML."""
    r = json.loads(json.dumps(report))
    r["host"] = HOSTILE
    r["platform"]["vendor"] = HOSTILE
    r["checks"][-1]["summary"] = f"{HOSTILE}.safetensors: truncated"
    r["checks"][-1]["details"] = [HOSTILE]
    r["checks"][-1]["fix"] = HOSTILE
    r["sources"].append({"name": "[red]kfd[/red]", "scope": "node", "count": 1, "detail": HOSTILE})
    return r


def test_table_prints_outside_text_escaped(hostile):
    console = Console(record=True, width=400, force_terminal=True)
    render_table(hostile, console)
    raw = console.export_text(styles=False)
    assert "\x07" not in raw and "\u202e" not in raw and "\x1b]52" not in raw and "\x1b[2J" not in raw
    assert "\\x1b]52;c;cHduZWQ=\\x07" in raw and "[red]x[/red]" in raw  # shown, not obeyed
    assert "[red]kfd[/red]" in raw  # a cell's text is not read as markup either


def test_markdown_escapes_outside_text(hostile):
    md = render_markdown(hostile)
    assert "\x1b" not in md and "\x07" not in md and "\u202e" not in md
    assert not re.search(r"(?<!\\)(!\[|<img)", md) and "\nforged row" not in md  # no image, no tag, no row
    assert "\\!\\[i\\](http://x/y.png) \\<img src=x\\>\\\\nforged row" in md  # shown as written
    rows = [line for line in md.splitlines() if "truncated" in line]
    assert len(rows) == 1 and len(re.split(r"(?<!\\)\|", rows[0])) == 6  # four cells, no more


def test_junit_of_outside_text_is_valid_xml(hostile):
    xml = render_junit(hostile)
    ET.fromstring(xml.split("\n", 1)[1])  # a raw control character is not XML: the parser would refuse it
    assert "\x1b" not in xml and "\\x1b" in xml


def test_a_cluster_report_prints_node_text_escaped():
    """Node labels, node errors and the nodes' own check text come from other machines."""
    evil = "n\x1b[2J\x1b]0;t\x07[red]x"
    check = {
        "id": "gpu-count",
        "group": "g",
        "status": "fail",
        "summary": evil,
        "fix": evil,
        "details": [evil],
    }
    rep = {
        "mode": "cluster",
        "address": evil,
        "seconds": 1.0,
        "check_ids": ["gpu-count"],
        "passed": False,
        "verdict": "NOT READY",
        "nodes": [
            {
                "label": evil,
                "state": "failed",
                "error": evil,
                "report": {"checks": [{**check, "source": "s"}]},
            },
            {"label": "b", "state": "died", "error": evil, "report": None},
        ],
        "cluster_checks": [{**check, "id": "x", "source": "s"}],
    }
    console = Console(record=True, width=200, force_terminal=True)
    render_table(rep, console)
    text = console.export_text(styles=False)
    assert "\x1b" not in text and "\x07" not in text and "[red]x" in text
    assert "\x1b" not in render_markdown(rep)
    xml = render_junit(rep)
    ET.fromstring(xml.split("\n", 1)[1])
    assert "\x1b" not in xml
