"""The smoke verdict: named criteria over the per-step metrics (pure functions, no torch).

Thresholds and why (measurements in docs/evidence/smoke-calibration.md):
- rewards_rise: mean reward of the last W steps >= first W + REWARD_MARGIN (W = min(10, steps // 2)).
  A prompt-blind policy scores at most 0.1 (task.BLIND_CEILING), so it cannot rise by more than 0.1 over
  chance (~0.06); 0.25 is only reachable by attending to the prompt, while calibrated runs rise by 0.6+.
- all_finite: every number logged is finite.
- grad_norm_positive: some step's pre-clip gradient norm > 0 (a run with all-zero gradients learns nothing).
- kl_zero_at_step0: the policy starts as a copy of the reference, so k3 KL at step 0 must be ~0.
- logprob_diff: trainer (full forward) vs rollout (KV-cache decode) log-probs of the sampled tokens, the
  worst step's mean |diff| under a bound per compute dtype (measured worst: fp32 1.2e-7 on CPU, bf16 7.3e-3
  on the H200; vime reports ~0.012 on Qwen3-8B in bf16).
- sync_canary: after every sync in which the trainer's weights moved, the rollout's log-probs of a fixed
  probe (a) changed, (b) match the trainer's new log-probs within CANARY_TOL (measured worst: fp32 1.4e-6,
  bf16 0.055 on the H200, while one step moves the probe by 0.55-6.6), and (c) lie nearer the new
  weights than the previous step's, where the trainer moved by more than NOISE_FACTOR x the trainer-rollout
  difference measured right after the first sync (the numerical noise floor of the two code paths).
  A missing sync fails (a); a one-step-stale sync fails (a) at step 0 and (b)/(c) after.

With an engine (vLLM) as the rollout, ``decide_engine`` judges what RL frameworks assert of theirs:
- rollout_logprob_diff: step 0's mean |trainer - rollout| log-prob of the sampled tokens <= a bar (0.1 by
  default, slime's --ci-test bound); every step's value is in the metrics.
- engine_weight_version: sync_canary's test on the engine's prompt log-probs: the engine serves the
  weights the trainer just pushed.
- sleep_frees_memory: sleep gives back >= SLEEP_FREE_FRAC of the engine's device memory as the driver
  counts it (NVML / amdsmi); not measurable on CPU or in a split placement (the engine does not sleep).
- wake_not_degenerate: every generation (after a wake, when the engine sleeps) has more than one distinct
  token and finite log-probs (vllm#44972: memory back dirty, every token id 0).
- rewards_rise is judged from CALIBRATED_STEPS steps on (engine smokes are usually a few steps long).
A criterion that cannot be measured has ``passed=None``: it neither passes nor fails the run. On the wire (the
summary's ``criteria``) each carries its ``status``: pass, fail, or skip for one that could not be measured.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from rocmstack.status import Status, status_of

REWARD_MARGIN = 0.25
KL_STEP0_TOL = 1e-4
LOGPROB_DIFF_BOUND = {"float32": 1e-3, "bfloat16": 0.05}
CANARY_TOL = {"float32": 1e-3, "bfloat16": 0.25}
NOISE_FACTOR = 4.0
# Fewer steps rarely rise by REWARD_MARGIN at the defaults: the CPU calibration's seed-0 curve
# (docs/evidence/smoke-calibration-cpu.jsonl) rises +0.20 over 16 steps and +0.35 over 20.
CALIBRATED_STEPS = 20
SLEEP_FREE_FRAC = 0.8


@dataclass(frozen=True)
class Criterion:
    name: str
    passed: bool | None  # None: not measurable here (reported, neither passing nor failing the run)
    detail: str
    value: float | None = None
    threshold: float | None = None

    @property
    def status(self) -> Status:
        return status_of(self.passed)


def reward_window(steps: int) -> int:
    """W: the steps averaged at each end of the run."""
    return max(1, min(10, steps // 2))


def settings_warning(steps: int, inject: str | None) -> str | None:
    """Why a run with these settings cannot (or will hardly) pass, said before it starts; None if it can."""
    if inject == "zero-reward":
        return None  # rewards_rise is meant to fail there
    if steps < 2:
        return (
            f"--steps {steps} cannot pass rewards_rise: it compares the mean reward of the first and the "
            f"last {reward_window(steps)} step(s), the same step (use --steps {CALIBRATED_STEPS} or more; "
            "the default is 30)"
        )
    if steps < CALIBRATED_STEPS:
        return (
            f"--steps {steps} will hardly pass rewards_rise: calibrated runs need about {CALIBRATED_STEPS} "
            f"steps to rise by {REWARD_MARGIN} (the default is 30)"
        )
    return None


def rewards_rise(rewards: list[float], margin: float = REWARD_MARGIN) -> Criterion:
    w = reward_window(len(rewards))
    first = sum(rewards[:w]) / w
    last = sum(rewards[-w:]) / w
    rise = last - first
    return Criterion(
        "rewards_rise",
        math.isfinite(rise) and rise >= margin,
        f"mean reward of last {w} steps {last:.3f} vs first {w} {first:.3f}: rise {rise:+.3f} (need >= {margin})",
        rise,
        margin,
    )


def _non_finite(metrics: list[dict[str, Any]]) -> list[str]:
    bad = []
    for row in metrics:
        for key, value in row.items():
            if isinstance(value, float) and not math.isfinite(value):
                bad.append(f"{key}@{row['step']}")
    return bad


def all_finite(metrics: list[dict[str, Any]]) -> Criterion:
    bad = _non_finite(metrics)
    shown = ", ".join(bad[:4]) + (f" (+{len(bad) - 4} more)" if len(bad) > 4 else "")
    return Criterion("all_finite", not bad, f"non-finite: {shown}" if bad else "every logged value is finite")


def grad_norm_positive(norms: list[float]) -> Criterion:
    finite = [n for n in norms if math.isfinite(n)]
    top = max(finite, default=0.0)
    return Criterion("grad_norm_positive", top > 0.0, f"largest finite grad norm {top:.3g}", top, 0.0)


def kl_zero_at_step0(kl0: float, tol: float = KL_STEP0_TOL) -> Criterion:
    ok = math.isfinite(kl0) and abs(kl0) <= tol
    return Criterion(
        "kl_zero_at_step0", ok, f"k3 KL(policy || ref) at step 0 = {kl0:.3g} (need |kl| <= {tol})", kl0, tol
    )


def logprob_diff(means: list[float], maxes: list[float], bound: float) -> Criterion:
    worst = max(means) if means and all(math.isfinite(m) for m in means) else float("nan")
    peak = max(maxes) if maxes and all(math.isfinite(m) for m in maxes) else float("nan")
    ok = math.isfinite(worst) and worst <= bound
    return Criterion(
        "logprob_diff",
        ok,
        f"train-rollout |logprob diff|: worst step mean {worst:.3g} (need <= {bound}), max token {peak:.3g}",
        worst,
        bound,
    )


def sync_canary(rows: list[dict[str, Any]], tol: float, name: str = "sync_canary") -> Criterion:
    """``rows``: per sync, the max-abs distances the runner measured on the probe (see module doc)."""
    evaluated, unchanged, mismatched, nearer_old = 0, [], [], []
    for r in rows:
        if not r["trainer_change"] > 0.0:
            continue  # the trainer did not move: nothing to prove at this step
        evaluated += 1
        if not r["rollout_change"] > 0.0:
            unchanged.append(r["step"])
        if not r["rollout_vs_trainer"] <= tol:
            mismatched.append(r["step"])
        # "Nearer the new weights than the old" is only decidable when the trainer moved by clearly more
        # than the two code paths' numerical noise, measured right after the first sync.
        if (
            r["trainer_change"] > NOISE_FACTOR * r["noise_floor"]
            and not r["rollout_vs_trainer"] < r["rollout_vs_prev_trainer"]
        ):
            nearer_old.append(r["step"])
    problems = []
    if evaluated == 0:
        problems.append("the trainer's weights never moved, so no sync could be checked")
    if unchanged:
        problems.append(f"rollout weights unchanged after sync at steps {unchanged[:5]}")
    if mismatched:
        problems.append(f"rollout log-probs do not match the trainer's (> {tol}) at steps {mismatched[:5]}")
    if nearer_old:
        problems.append(f"rollout matches the previous step's weights (stale) at steps {nearer_old[:5]}")
    worst = max((r["rollout_vs_trainer"] for r in rows), default=float("nan"))
    detail = (
        "; ".join(problems)
        if problems
        else (
            f"{evaluated} syncs: rollout probe moved with the trainer and matches it (worst {worst:.3g} <= {tol})"
        )
    )
    return Criterion(name, not problems, detail, worst, tol)


def decide(metrics: list[dict[str, Any]], canary: list[dict[str, Any]], *, dtype: str) -> list[Criterion]:
    """Every criterion, in the order the console prints them."""
    return [
        rewards_rise([m["raw_reward_mean"] for m in metrics]),
        all_finite(metrics),
        grad_norm_positive([m["grad_norm"] for m in metrics]),
        kl_zero_at_step0(metrics[0]["kl"] if metrics else float("nan")),
        logprob_diff(
            [m["train_rollout_logprob_abs_diff_mean"] for m in metrics],
            [m["train_rollout_logprob_abs_diff_max"] for m in metrics],
            LOGPROB_DIFF_BOUND[dtype],
        ),
        sync_canary(canary, CANARY_TOL[dtype]),
    ]


# ``smoke framework``: criteria over what an RL framework's own loop logged (rows ``{"step": N, key: float}``).
_OPS = {
    "<=": lambda a, b: a <= b,
    "<": lambda a, b: a < b,
    ">=": lambda a, b: a >= b,
    ">": lambda a, b: a > b,
}


def exit_clean(returncode: int | None, *, timed_out: bool, seconds: float, limit: float) -> Criterion:
    if timed_out:
        detail = f"killed at the time limit: still running after {seconds:.0f} s (limit {limit:.0f} s)"
    elif returncode is None:
        detail = "the command could not start"
    else:
        detail = f"exit {returncode} after {seconds:.1f} s (limit {limit:.0f} s)"
    return Criterion("exit_clean", returncode == 0 and not timed_out, detail, seconds, limit)


def steps_seen(steps: list[int], want: int) -> Criterion:
    seen = len(set(steps))
    return Criterion(
        "steps_seen", seen >= want, f"{seen} step(s) logged (need {want})", float(seen), float(want)
    )


def metric_check(rows: list[dict[str, Any]], metric: str, op: str, value: float | None, at: str) -> Criterion:
    """``metric op value`` at every/any/the first/the last logged step; ``finite``/``present`` need no value.
    A metric no step logged fails, naming it."""
    target = f" {value:g}" if value is not None else ""
    name = f"{metric} {op}{target}" + ("" if at == "every" else f" ({at})")
    logged = [(r["step"], r[metric]) for r in rows if metric in r]
    if not logged:
        where = "no step was logged" if not rows else f"none of {len(rows)} logged step(s) has it"
        return Criterion(name, False, f"{metric} missing: {where}", None, value)
    missing = [r["step"] for r in rows if metric not in r]
    if at == "first":
        logged = logged[:1]
    elif at == "last":
        logged = logged[-1:]

    def ok(x: float) -> bool:
        if op == "present":
            return True
        if op == "finite" or value is None:
            return math.isfinite(x)
        return math.isfinite(x) and bool(_OPS[op](x, value))

    bad = [(s, x) for s, x in logged if not ok(x)]
    shown = ", ".join(f"step {s}: {x:.4g}" for s, x in logged[:6])
    if at == "every" and missing:
        return Criterion(
            name, False, f"{metric} missing at step(s) {missing[:5]}; logged {shown}", None, value
        )
    passed = bool(logged) and (not bad if at != "any" else len(bad) < len(logged))
    worst = bad[0][1] if bad else logged[-1][1]
    return Criterion(name, passed, shown, worst, value)


def rollout_logprob_diff(means: list[float], bar: float) -> Criterion:
    step0 = means[0] if means else float("nan")
    finite = [m for m in means if math.isfinite(m)]
    worst = max(finite, default=float("nan"))
    return Criterion(
        "rollout_logprob_diff",
        math.isfinite(step0) and step0 <= bar,
        f"step-0 mean |trainer - rollout| log-prob {step0:.3g} (need <= {bar}); worst step {worst:.3g}",
        step0,
        bar,
    )


def sleep_frees_memory(rows: list[dict[str, Any]], frac: float = SLEEP_FREE_FRAC) -> Criterion:
    """``rows``: per step, the sleep's ``engine_memory_bytes`` / ``sleep_freed_bytes`` (None: not measured)."""
    measured = [r for r in rows if r.get("sleep_freed_frac") is not None]
    if not measured:
        why = next((r["sleep_memory_source"] for r in rows if r.get("sleep_memory_source")), "no sleep")
        return Criterion("sleep_frees_memory", None, f"not measurable: {why}", None, frac)
    worst = min(measured, key=lambda r: r["sleep_freed_frac"])
    ok = all(r["sleep_freed_frac"] >= frac for r in measured)
    return Criterion(
        "sleep_frees_memory",
        ok,
        f"worst sleep (step {worst['step']}) gave back {worst['sleep_freed_bytes'] / 2**20:.0f} of "
        f"{worst['engine_memory_bytes'] / 2**20:.0f} MiB ({worst['sleep_freed_frac']:.0%}; need >= {frac:.0%}, "
        f"{worst['sleep_memory_source']})",
        worst["sleep_freed_frac"],
        frac,
    )


def wake_not_degenerate(rows: list[dict[str, Any]]) -> Criterion:
    bad = [r["step"] for r in rows if r["gen_distinct_tokens"] < 2 or not r["gen_logprobs_finite"]]
    after_wake = sum(1 for r in rows if r["gen_after_wake"])
    what = f", {after_wake} of them after a wake" if after_wake else " (the engine never slept)"
    return Criterion(
        "wake_not_degenerate",
        bool(rows) and not bad,
        f"degenerate (one token, or non-finite log-probs) at steps {bad[:5]}"
        if bad
        else f"{len(rows)} generations{what}: several distinct tokens, finite log-probs",
    )


def decide_engine(
    metrics: list[dict[str, Any]], canary: list[dict[str, Any]], *, dtype: str, bar: float
) -> list[Criterion]:
    """The criteria of a smoke whose rollout is an engine (see the module doc)."""
    rewards = [m["raw_reward_mean"] for m in metrics]
    if len(metrics) >= CALIBRATED_STEPS:
        rise = rewards_rise(rewards)
    else:
        rise = Criterion(
            "rewards_rise", None, f"not judged: {len(metrics)} steps (judged from {CALIBRATED_STEPS})"
        )
    return [
        rise,
        all_finite(metrics),
        grad_norm_positive([m["grad_norm"] for m in metrics]),
        kl_zero_at_step0(metrics[0]["kl"] if metrics else float("nan")),
        rollout_logprob_diff([m["train_rollout_logprob_abs_diff_mean"] for m in metrics], bar),
        sync_canary(canary, CANARY_TOL.get(dtype, CANARY_TOL["bfloat16"]), name="engine_weight_version"),
        sleep_frees_memory(metrics),
        wake_not_degenerate(metrics),
    ]


def verdict_of(criteria: list[Criterion]) -> tuple[bool, list[str]]:
    """(passed, names of failed criteria): one that could not be measured neither passes nor fails."""
    failed = [c.name for c in criteria if c.passed is False]
    return not failed, failed


def as_dicts(criteria: list[Criterion]) -> list[dict[str, Any]]:
    """The summary's rows: the judgement as its status, never as a boolean beside it."""
    rows = []
    for c in criteria:
        row = {k: v for k, v in asdict(c).items() if k != "passed"}
        rows.append({"name": row.pop("name"), "status": c.status.value, **row})
    return rows
