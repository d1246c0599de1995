"""Report formats: versioned JSON schema, table, Markdown, JUnit."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from rich.console import Console

from rocmstack.doctor.model import SCHEMA
from rocmstack.doctor.report import render_junit, render_markdown, render_table
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
