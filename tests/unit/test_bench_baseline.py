from __future__ import annotations

import json

import pytest

from rocmstack.bench.baseline import BASELINE_DIR, compare, load_baseline, update_baseline
from rocmstack.errors import InputError


def report(tps: dict[int, float], device="H200", shape="qwen3-8b", whole_run: float = 0.8) -> dict:
    """A run whose decode rate at each batch is TPS; the prefill-inclusive rate is WHOLE_RUN of it."""
    return {
        "date": "2026-11-29T10:00:00+00:00",
        "command": ["rocmstack", "bench", "rollout"],
        "device": {"name": f"NVIDIA {device}", "spec": {"name": device}},
        "shape": {"name": shape},
        "settings": {"dtype": "bfloat16"},
        "results": [
            {
                "engine": "reference",
                "batch": b,
                "prompt_len": 128,
                "new_tokens": 256,
                "status": "pass",
                "tokens_per_s": t * whole_run,
                "decode_tokens_per_s": t,
                "mbu": 0.5,
            }
            for b, t in tps.items()
        ]
        + [
            {
                "engine": "vllm",
                "batch": 1,
                "prompt_len": 128,
                "new_tokens": 256,
                "status": "skip",
                "tokens_per_s": None,
                "decode_tokens_per_s": None,
                "mbu": None,
            }
        ],
    }


def test_save_merge_and_gate(tmp_path):
    path = tmp_path / "h200.json"
    update_baseline(path, report({1: 200.0, 64: 9000.0}))
    update_baseline(path, report({64: 9400.0}, shape="qwen3-8b"))  # same config: replaced
    update_baseline(path, report({64: 30000.0}, shape="qwen3-0.6b"))
    data = load_baseline(path)
    assert len(data["entries"]) == 3 and len(data["sources"]) == 3
    assert data["schema"] == 2
    assert {e["decode_tokens_per_s"] for e in data["entries"]} == {200.0, 9400.0, 30000.0}
    assert all("tokens_per_s" not in e for e in data["entries"])  # one rate stored: the decode rate

    ok = compare(report({1: 190.0, 64: 9400.0, 256: 1.0}), data)  # 256 has no entry: not checked
    assert ok["passed"] and len(ok["checks"]) == 2 and ok["tolerance"] == 0.10
    bad = compare(report({1: 170.0}), data)
    assert not bad["passed"] and bad["checks"][0]["ratio"] == pytest.approx(0.85)
    assert compare(report({1: 170.0}), data, tolerance=0.2)["passed"]
    check = bad["checks"][0]
    assert check["metric"] == "decode_tokens_per_s" and check["status"] == "fail"
    assert (check["decode_tokens_per_s"], check["baseline_decode_tokens_per_s"]) == (170.0, 200.0)


def test_the_gate_compares_the_decode_rate_not_the_prefill_inclusive_one(tmp_path):
    path = tmp_path / "h200.json"
    data = update_baseline(path, report({64: 9000.0}, whole_run=0.9))
    # a slower prefill (whole-run rate down by a third) with the same decode: not a decode regression
    assert compare(report({64: 9000.0}, whole_run=0.6), data)["passed"]
    # a decode 20% slower, hidden by a faster prefill (whole-run rate up): still a regression
    slower = compare(report({64: 7200.0}, whole_run=1.2), data)
    assert not slower["passed"] and slower["checks"][0]["ratio"] == pytest.approx(0.8)


def test_an_engine_with_no_decode_rate_is_not_stored_or_checked(tmp_path):
    run = report({1: 200.0})
    run["results"][0]["decode_tokens_per_s"] = None  # it measured the whole run only
    data = update_baseline(tmp_path / "b.json", report({1: 200.0, 64: 9000.0}))
    assert len(update_baseline(tmp_path / "c.json", run)["entries"]) == 0
    assert compare(run, data)["checks"] == []  # the caller's "no config checked" names it


def test_device_mismatch_and_bad_files(tmp_path):
    path = tmp_path / "b.json"
    update_baseline(path, report({1: 200.0}))
    with pytest.raises(InputError, match="baseline is for H200, this device is MI300X"):
        compare(report({1: 200.0}, device="MI300X"), load_baseline(path))
    with pytest.raises(InputError, match="baseline for H200, this run is on MI355X"):
        update_baseline(path, report({1: 1.0}, device="MI355X"))
    with pytest.raises(InputError, match="no such file"):
        load_baseline(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text(json.dumps({"schema": 2, "entries": [{"shape": "qwen3-8b"}]}))
    with pytest.raises(InputError, match=r"entries\[0\] lacks engine"):
        load_baseline(tmp_path / "x.json")
    good = load_baseline(path)
    for rate in (0, -1.0, None, "200", True, float("nan")):
        entry = {**good["entries"][0], "decode_tokens_per_s": rate}
        (tmp_path / "r.json").write_text(json.dumps({**good, "entries": [entry]}))
        with pytest.raises(
            InputError, match=r"entries\[0\]\.decode_tokens_per_s = .* is not a positive rate"
        ):
            load_baseline(tmp_path / "r.json")


def test_a_schema_1_baseline_is_refused_with_how_to_record_it_again(tmp_path):
    """Schema 1 stored the prefill-inclusive tokens/s: compared with a decode rate it would pass any run."""
    old = {
        "schema": 1,
        "device": "H200",
        "tolerance": 0.1,
        "entries": [
            {"shape": "qwen3-8b", "engine": "reference", "batch": 1, "prompt_len": 128, "new_tokens": 256,
             "dtype": "bfloat16", "tokens_per_s": 199.7, "mbu": 0.72}
        ],
        "sources": [],
    }  # fmt: skip
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    for call in (lambda: load_baseline(path), lambda: update_baseline(path, report({1: 200.0}))):
        with pytest.raises(InputError, match="schema 1 holds the prefill-inclusive tokens/s") as err:
            call()
        assert "--save-baseline" in (err.value.fix or "")
    assert json.loads(path.read_text()) == old  # nothing half-written


def test_shipped_h200_baseline_covers_the_goal_configs():
    data = load_baseline(BASELINE_DIR / "h200.json")
    assert data["device"] == "H200"
    keys = {
        (e["shape"], e["engine"], e["batch"])
        for e in data["entries"]
        if e["prompt_len"] == 128 and e["new_tokens"] == 256
    }
    for batch in (1, 64, 256):
        assert ("qwen3-8b", "reference", batch) in keys and ("qwen3-8b", "hf", batch) in keys
    assert ("qwen3-0.6b", "reference", 64) in keys
