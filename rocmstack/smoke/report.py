"""``-o/--output DIR``: metrics.jsonl (one JSON object per step), summary.json and PNG plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from rocmstack.output import dumps
from rocmstack.plots import legend_below
from rocmstack.wire import Scalar, WireModel

if TYPE_CHECKING:
    from rich.table import Table

PLOTS = ("reward.png", "logprob_diff.png", "phase_times.png")
_RESULT = {"pass": "[green]PASS[/green]", "fail": "[red]FAIL[/red]", "skip": "[yellow]N/A[/yellow]"}


class CriterionRow(WireModel):
    name: Scalar
    status: Scalar  # pass, fail, or skip: could not be measured here
    detail: Scalar


class SmokeSummary(WireModel):
    """summary.json of ``smoke grpo``: what ``run_grpo_smoke`` builds and writes, and what its readers index
    (validate's report carries it whole). Only what a reader cannot do without is required."""

    passed: bool | None = None  # the verdict: every criterion that could be judged passed
    failed: list[Scalar] = Field(default_factory=list)  # the failed criteria's names
    interrupted: dict[str, Any] | None = None  # Ctrl-C: the step and phase it stopped in
    criteria: list[CriterionRow]
    inject: Scalar = None
    expected_failure: Scalar = None
    inject_caught: Scalar = None
    device: Scalar = None
    dtype: Scalar = None
    shape: Scalar = None
    placement: Scalar = None
    rollout: Scalar = None
    rollout_dtype: Scalar = None
    logprob_bar: Scalar = None
    engine: Any = None
    params: Scalar = None
    trainer_visible_devices: Any = None
    rollout_visible_devices: Any = None
    same_device: Scalar = None
    steps: Scalar = None
    time_to_verdict_s: Scalar = None
    model_init_s: Scalar = None
    first_sync_s: Scalar = None
    canary_noise_floor: Scalar = None
    startup_s: Scalar = None
    ray_init_s: Scalar = None
    final: dict[str, Any]
    options: dict[str, Any] | None = None


class FrameworkSummary(WireModel):
    """summary.json of ``smoke framework`` (an RL framework's own loop), as ``run_framework_smoke`` writes it."""

    kind: Literal["framework"] = "framework"
    recipe: Scalar = None
    framework: Scalar = None
    steps: Scalar = None
    steps_seen: Scalar = None
    argv: list[Any] = Field(default_factory=list)
    work_dir: Scalar = None
    log: Scalar = None
    returncode: Scalar = None
    timed_out: Scalar = None
    error: Scalar = None
    timeout_s: Scalar = None
    inputs_s: Scalar = None
    run_s: Scalar = None
    metrics: list[Any] = Field(default_factory=list)
    skipped_lines: list[Any] = Field(default_factory=list)
    skipped_count: Scalar = None
    criteria: list[CriterionRow]
    failed: list[Scalar] = Field(default_factory=list)
    passed: bool | None = None
    log_tail: list[Any] = Field(default_factory=list)
    failure: dict[str, Any] | None = None  # gpu.engine_log.Failure: the process that broke first
    known_causes: list[Any] = Field(default_factory=list)


def criteria_table(summary: dict[str, Any]) -> Table:
    """The summary's criteria as a table: the smoke's and the framework smoke's alike."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(show_header=True, header_style="bold")
    table.add_column("criterion", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("detail", overflow="fold")
    for c in summary["criteria"]:
        table.add_row(c["name"], _RESULT.get(c["status"], escape(str(c["status"]))), c["detail"])
    return table


def write_report(directory: Path, metrics: list[dict[str, Any]], summary: dict[str, Any]) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "metrics.jsonl").open("w") as fh:
        for row in metrics:
            fh.write(json.dumps(row, sort_keys=True) + "\n")
    (directory / "summary.json").write_text(dumps(summary))
    return [directory / "metrics.jsonl", directory / "summary.json", *plot(directory, metrics, summary)]


def plot(directory: Path, metrics: list[dict[str, Any]], summary: dict[str, Any]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")  # files only; no display on CI or in a container
    import matplotlib.pyplot as plt

    from rocmstack.smoke.task import BLIND_CEILING

    steps = [m["step"] for m in metrics]
    title = (
        f"GRPO smoke: {summary['placement']} on {summary['device']} ({summary['dtype']}, {summary['shape']})"
    )
    verdict = "PASS" if summary["passed"] else "FAIL: " + ", ".join(summary["failed"])
    out = []

    fig, ax = plt.subplots(figsize=(7, 4))
    mean = [m["raw_reward_mean"] for m in metrics]
    std = [m["raw_reward_std"] for m in metrics]
    ax.plot(steps, mean, label="raw_reward mean", color="tab:blue")
    lo = [a - b for a, b in zip(mean, std, strict=True)]
    hi = [a + b for a, b in zip(mean, std, strict=True)]
    ax.fill_between(steps, lo, hi, alpha=0.15)
    ax.plot(
        steps, [m["zero_std_group_frac"] for m in metrics], label="zero-std group fraction", color="tab:gray"
    )
    ax.axhline(BLIND_CEILING, ls=":", color="tab:red", label=f"prompt-blind ceiling ({BLIND_CEILING})")
    ax.set(xlabel="step", ylabel="reward", ylim=(-0.05, 1.05), title=f"{title}\n{verdict}")
    legend_below(ax)
    out.append(_save(fig, directory / PLOTS[0]))

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.semilogy(steps, [max(m["train_rollout_logprob_abs_diff_mean"], 1e-9) for m in metrics], label="mean")
    ax.semilogy(steps, [max(m["train_rollout_logprob_abs_diff_max"], 1e-9) for m in metrics], label="max")
    ax.set(xlabel="step", ylabel="|logprob trainer - rollout|", title="train vs rollout log-prob difference")
    legend_below(ax)
    out.append(_save(fig, directory / PLOTS[1]))

    fig, ax = plt.subplots(figsize=(7, 4))
    bottom = [0.0] * len(steps)
    for key in ("time_rollout_s", "time_logprobs_s", "time_train_s", "time_sync_s"):
        values = [m[key] for m in metrics]
        ax.bar(steps, values, bottom=bottom, label=key.removeprefix("time_").removesuffix("_s"))
        bottom = [a + b for a, b in zip(bottom, values, strict=True)]
    ax.set(xlabel="step", ylabel="seconds", title="phase times per step")
    legend_below(ax)
    out.append(_save(fig, directory / PLOTS[2]))
    return out


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
