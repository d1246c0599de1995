from __future__ import annotations

import math

from rocmstack.smoke import verdict


def _row(step: int, **over: float) -> dict:
    row = {
        "step": step,
        "raw_reward_mean": 0.1 + 0.04 * step,
        "grad_norm": 0.5,
        "kl": 0.0 if step == 0 else 0.01,
        "train_rollout_logprob_abs_diff_mean": 1e-7,
        "train_rollout_logprob_abs_diff_max": 1e-6,
    }
    row.update(over)
    return row


def _canary(step: int, **over: float) -> dict:
    row = {
        "step": step,
        "trainer_change": 0.1,
        "rollout_change": 0.1,
        "rollout_vs_trainer": 1e-6,
        "rollout_vs_prev_trainer": 0.1,
        "noise_floor": 1e-6,
    }
    row.update(over)
    return row


def _names_failed(metrics, canary, dtype="float32"):
    return [c.name for c in verdict.decide(metrics, canary, dtype=dtype) if not c.passed]


def test_healthy_run_passes_every_criterion():
    metrics = [_row(s) for s in range(20)]
    assert _names_failed(metrics, [_canary(s) for s in range(20)]) == []


def test_rewards_rise_margin_and_window():
    assert verdict.rewards_rise([0.1] * 10 + [0.34] * 10).passed is False  # +0.24 < 0.25
    assert verdict.rewards_rise([0.1] * 10 + [0.36] * 10).passed is True
    short = verdict.rewards_rise([0.0, 0.0, 1.0, 1.0])  # window shrinks to steps // 2
    assert short.passed and "last 2 steps" in short.detail


def test_all_finite_names_the_value_and_step():
    metrics = [_row(0), _row(1, loss=float("nan"))]
    crit = verdict.all_finite(metrics)
    assert not crit.passed and "loss@1" in crit.detail


def test_grad_norm_needs_a_positive_finite_value():
    assert not verdict.grad_norm_positive([0.0, 0.0]).passed
    assert not verdict.grad_norm_positive([float("nan")]).passed
    assert verdict.grad_norm_positive([0.0, float("nan"), 1e-3]).passed


def test_kl_at_step_zero():
    assert verdict.kl_zero_at_step0(0.0).passed
    assert not verdict.kl_zero_at_step0(0.01).passed
    assert not verdict.kl_zero_at_step0(float("nan")).passed


def test_logprob_diff_bound_per_dtype():
    assert verdict.logprob_diff([0.01], [0.1], verdict.LOGPROB_DIFF_BOUND["bfloat16"]).passed
    assert not verdict.logprob_diff([0.01], [0.1], verdict.LOGPROB_DIFF_BOUND["float32"]).passed
    assert not verdict.logprob_diff([math.nan], [0.1], 1.0).passed


def test_canary_catches_missing_sync():
    rows = [_canary(s, rollout_change=0.0, rollout_vs_trainer=0.1 * (s + 1)) for s in range(5)]
    crit = verdict.sync_canary(rows, 1e-3)
    assert not crit.passed and "unchanged" in crit.detail


def test_canary_catches_one_step_stale_weights():
    # The rollout moved, but to the previous step's weights: exact match with the old, off from the new.
    rows = [_canary(s, rollout_vs_trainer=0.05, rollout_vs_prev_trainer=1e-6) for s in range(5)]
    crit = verdict.sync_canary(rows, 0.1)  # even a loose tolerance catches it by "nearer the old"
    assert not crit.passed and "stale" in crit.detail


def test_canary_judges_staleness_only_above_the_noise_floor():
    # bf16 noise 0.02: a trainer move of 0.05 is too small to tell new from old, so it is not judged...
    noisy = [
        _canary(
            s, trainer_change=0.05, rollout_vs_trainer=0.03, rollout_vs_prev_trainer=0.02, noise_floor=0.02
        )
        for s in range(3)
    ]
    assert verdict.sync_canary(noisy, 0.1).passed
    # ...but a move of 0.5 is, and a rollout nearer the old weights then fails.
    moved = [dict(r, trainer_change=0.5) for r in noisy]
    assert not verdict.sync_canary(moved, 0.1).passed


def test_canary_skips_steps_where_the_trainer_did_not_move_but_needs_one():
    rows = [_canary(0, trainer_change=0.0, rollout_change=0.0), _canary(1)]
    assert verdict.sync_canary(rows, 1e-3).passed
    crit = verdict.sync_canary([_canary(0, trainer_change=0.0, rollout_change=0.0)], 1e-3)
    assert not crit.passed and "never moved" in crit.detail


def test_settings_that_cannot_pass_are_named_before_the_run():
    assert "cannot pass rewards_rise" in verdict.settings_warning(1, None)
    assert not verdict.rewards_rise([0.0]).passed and not verdict.rewards_rise([1.0]).passed  # any 1 step
    assert "will hardly pass" in verdict.settings_warning(verdict.CALIBRATED_STEPS - 1, None)
    assert verdict.settings_warning(verdict.CALIBRATED_STEPS, None) is None
    assert verdict.settings_warning(30, None) is None
    assert verdict.settings_warning(1, "zero-reward") is None  # meant to fail rewards_rise


def test_calibrated_steps_follow_the_calibration_curve():
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "docs" / "evidence" / "smoke-calibration-cpu.jsonl"
    seed0 = next(
        r for r in map(json.loads, path.read_text().splitlines()) if r["seed"] == 0 and not r["overrides"]
    )
    curve = seed0["curve"]
    assert verdict.rewards_rise(curve[: verdict.CALIBRATED_STEPS]).passed
    assert not verdict.rewards_rise(curve[:16]).passed


def _engine_row(step: int, **extra):
    row = {
        "step": step,
        "raw_reward_mean": 0.1,
        "grad_norm": 1.0,
        "kl": 0.0,
        "train_rollout_logprob_abs_diff_mean": 1e-3,
        "gen_after_wake": step > 0,
        "gen_distinct_tokens": 12,
        "gen_logprobs_finite": True,
        "sleep_memory_source": "nvml",
        "engine_memory_bytes": 1000,
        "sleep_freed_bytes": 950,
        "sleep_freed_frac": 0.95,
    }
    return row | extra


def _engine_canary(step: int):
    return {
        "step": step,
        "trainer_change": 1.0,
        "rollout_change": 1.0,
        "rollout_vs_trainer": 1e-4,
        "rollout_vs_prev_trainer": 1.0,
        "noise_floor": 1e-6,
    }


def _engine_verdict(rows, canary=None):
    crit = verdict.decide_engine(
        rows, canary or [_engine_canary(r["step"]) for r in rows], dtype="bfloat16", bar=0.1
    )
    return {c.name: c for c in crit}


def test_engine_verdict_passes_a_healthy_short_run_and_leaves_rewards_unjudged():
    by_name = _engine_verdict([_engine_row(i) for i in range(3)])
    assert by_name["rewards_rise"].passed is None
    assert all(c.passed for n, c in by_name.items() if n != "rewards_rise")
    assert verdict.verdict_of(list(by_name.values())) == (True, [])


def test_step0_logprob_diff_is_judged_against_the_bar():
    rows = [_engine_row(0, train_rollout_logprob_abs_diff_mean=0.35), _engine_row(1)]
    by_name = _engine_verdict(rows)
    assert by_name["rollout_logprob_diff"].passed is False
    assert verdict.verdict_of(list(by_name.values())) == (False, ["rollout_logprob_diff"])
    # later steps are recorded, not judged: the policy has moved off the rollout's weights by then
    assert _engine_verdict([_engine_row(0), _engine_row(1, train_rollout_logprob_abs_diff_mean=0.5)])[
        "rollout_logprob_diff"
    ].passed


def test_sleep_must_give_back_80_percent_or_say_it_could_not_measure():
    low = _engine_verdict([_engine_row(0, sleep_freed_bytes=500, sleep_freed_frac=0.5)])
    assert low["sleep_frees_memory"].passed is False and "50%" in low["sleep_frees_memory"].detail
    cpu = _engine_verdict(
        [_engine_row(0, sleep_memory_source="not measurable on CPU", sleep_freed_frac=None)]
    )
    assert cpu["sleep_frees_memory"].passed is None
    assert cpu["sleep_frees_memory"].detail == "not measurable: not measurable on CPU"


def test_a_degenerate_generation_after_wake_fails():
    rows = [_engine_row(0), _engine_row(1, gen_distinct_tokens=1)]
    assert _engine_verdict(rows)["wake_not_degenerate"].passed is False
    rows = [_engine_row(0), _engine_row(1, gen_logprobs_finite=False)]
    assert "steps [1]" in _engine_verdict(rows)["wake_not_degenerate"].detail


def test_an_engine_that_keeps_its_weights_fails_engine_weight_version():
    canary = [_engine_canary(0) | {"rollout_change": 0.0, "rollout_vs_trainer": 1.0}]
    by_name = _engine_verdict([_engine_row(0)], canary)
    assert by_name["engine_weight_version"].passed is False


def test_the_summary_rows_carry_a_status_not_a_boolean():
    rows = verdict.as_dicts(
        [
            verdict.Criterion("a", True, "ok", 1.0, 0.5),
            verdict.Criterion("b", False, "no"),
            verdict.Criterion("c", None, "not measurable: cpu"),
        ]
    )
    assert [(r["name"], r["status"]) for r in rows] == [("a", "pass"), ("b", "fail"), ("c", "skip")]
    assert all("passed" not in r for r in rows)
    assert rows[0] == {"name": "a", "status": "pass", "detail": "ok", "value": 1.0, "threshold": 0.5}
