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
