"""``wire``: what a producer may write (only declared keys, each of its type) and what it writes (the keys
it gave, every value as given)."""

from __future__ import annotations

import math

import pytest
from pydantic import Field, ValidationError

from rocmstack.wire import Scalar, WireModel


class Row(WireModel):
    name: Scalar
    seconds: Scalar = None


class Report(WireModel):
    schema_: Scalar = Field(default=None, alias="schema")
    passed: bool | None = None
    rows: list[Row] = Field(default_factory=list)
    note: Scalar = None


def test_a_key_the_model_does_not_declare_is_the_producers_bug():
    with pytest.raises(TypeError, match="Report declares no field 'ok', 'zz'"):
        Report.produce({"schema": "x", "ok": True, "zz": 1})


def test_a_verdict_of_the_wrong_type_is_refused_never_coerced():
    for bad in ("yes", 1):
        with pytest.raises(ValidationError):
            Report.produce({"passed": bad})


def test_the_wire_holds_the_keys_given_and_their_values_as_given():
    out = Report.produce({"schema": "x", "passed": True, "rows": [{"name": "a", "seconds": 3, "extra": [1]}]})
    wire = out.wire()
    assert wire == {"schema": "x", "passed": True, "rows": [{"name": "a", "seconds": 3, "extra": [1]}]}
    assert type(wire["rows"][0]["seconds"]) is int  # no float made of an int
    assert "note" not in wire  # a default is never added
    nan = Report.produce({"note": math.nan}).wire()["note"]
    assert math.isnan(nan)  # never turned into null


def test_written_over_a_report_read_back_only_the_written_keys_must_be_declared():
    image = {"schema": "x", "passed": True, "from_a_newer_release": {"kept": 1}}
    out = Report.produce({"passed": False}, over=image).wire()
    assert out == {"schema": "x", "passed": False, "from_a_newer_release": {"kept": 1}}
    with pytest.raises(TypeError, match="declares no field 'from_the_host'"):
        Report.produce({"from_the_host": 1}, over=image)
