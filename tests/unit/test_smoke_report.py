from __future__ import annotations

import json

from rocmstack.smoke.report import PLOTS, SmokeSummary, write_report
from rocmstack.smoke.verdict import as_dicts, decide, verdict_of


def _metrics() -> list[dict]:
    return [
        {
            "step": s,
            "raw_reward_mean": 0.1 * s,
            "raw_reward_std": 0.1,
            "zero_std_group_frac": 0.5,
            "train_rollout_logprob_abs_diff_mean": 1e-7,
            "train_rollout_logprob_abs_diff_max": 0.0,
            "time_rollout_s": 0.1,
            "time_logprobs_s": 0.1,
            "time_train_s": 0.2,
            "time_sync_s": 0.01,
            "kl": 0.0,
            "grad_norm": 1.0,
        }
        for s in range(5)
    ]


def test_report_writes_jsonl_summary_and_pngs(tmp_path):
    metrics = _metrics()
    summary = {
        "placement": "colocated",
        "device": "cpu",
        "dtype": "float32",
        "shape": "tiny",
        "passed": False,
        "failed": ["rewards_rise"],
    }
    paths = write_report(tmp_path / "r", metrics, summary)
    assert [p.name for p in paths] == ["metrics.jsonl", "summary.json", *PLOTS]
    lines = (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == list(range(5))
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["failed"] == ["rewards_rise"]
    for name in PLOTS:
        assert (tmp_path / "r" / name).read_bytes()[:4] == b"\x89PNG"


def test_the_summary_the_verdict_writes_is_the_one_its_readers_index(tmp_path):
    metrics = _metrics()
    judged = decide(metrics, [], dtype="float32")
    passed, failed = verdict_of(judged)
    criteria = as_dicts(judged)
    assert {c["status"] for c in criteria} <= {"pass", "fail", "skip"}
    summary = {"criteria": criteria, "final": metrics[-1], "device": "cpu", "placement": "colocated"}
    write_report(
        tmp_path,
        metrics,
        {**summary, "dtype": "float32", "shape": "tiny", "passed": passed, "failed": failed},
    )
    read = SmokeSummary.model_validate(json.loads((tmp_path / "summary.json").read_text()))
    assert [c.name for c in read.criteria] == [c["name"] for c in criteria]
