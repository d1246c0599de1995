from __future__ import annotations

import json

import pytest

from rocmstack.bench.baseline import BASELINE_DIR, compare, load_baseline, update_baseline
from rocmstack.errors import InputError


def report(tps: dict[int, float], device="H200", shape="qwen3-8b") -> dict:
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
                "tokens_per_s": t,
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
    assert {e["tokens_per_s"] for e in data["entries"]} == {200.0, 9400.0, 30000.0}

    ok = compare(report({1: 190.0, 64: 9400.0, 256: 1.0}), data)  # 256 has no entry: not checked
    assert ok["passed"] and len(ok["checks"]) == 2 and ok["tolerance"] == 0.10
    bad = compare(report({1: 170.0}), data)
    assert not bad["passed"] and bad["checks"][0]["ratio"] == pytest.approx(0.85)
    assert compare(report({1: 170.0}), data, tolerance=0.2)["passed"]


def test_device_mismatch_and_bad_files(tmp_path):
    path = tmp_path / "b.json"
    update_baseline(path, report({1: 200.0}))
    with pytest.raises(InputError, match="baseline is for H200, this device is MI300X"):
        compare(report({1: 200.0}, device="MI300X"), load_baseline(path))
    with pytest.raises(InputError, match="baseline for H200, this run is on MI355X"):
        update_baseline(path, report({1: 1.0}, device="MI355X"))
    with pytest.raises(InputError, match="no such file"):
        load_baseline(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text(json.dumps({"schema": 1, "entries": [{"shape": "qwen3-8b"}]}))
    with pytest.raises(InputError, match=r"entries\[0\] lacks engine"):
        load_baseline(tmp_path / "x.json")


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
