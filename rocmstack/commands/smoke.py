"""``rocmstack smoke grpo``: a short GRPO job on Ray that proves the RL plumbing learns and syncs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from rocmstack.errors import ExitCode
from rocmstack.options import (
    ALLOW_RECIPE_COMMAND,
    DEVICE,
    JSON_OPT,
    OUTPUT,
    REPORT_OLD,
    ROLLOUT,
    ROLLOUT_ENGINE_OLD,
    SEED,
    SET_OPT,
    SMOKE_SHAPE_OLD,
    STEPS,
    TIMEOUT,
    parse_duration,
    renamed,
)
from rocmstack.smoke.config import ENGINES, LOGPROB_BAR, ROLLOUTS, SmokeOptions, served


def register(app: typer.Typer) -> None:
    smoke = typer.Typer(
        help="Short end-to-end jobs that prove an image can do RL post-training.", no_args_is_help=True
    )

    @smoke.command("grpo")
    def grpo_cmd(
        placement: str = typer.Option(
            "colocated", help="colocated (one GPU, IPC sync) or split (one GPU each, broadcast)."
        ),
        device: str = DEVICE("auto"),
        steps: int = STEPS(SmokeOptions.steps, min=1),
        inject: str | None = typer.Option(
            None,
            help="Fault to inject: skip-sync, stale-weights, zero-reward, nan-loss, "
            "logprob-mismatch (engine rollouts).",
        ),
        rollout: str = ROLLOUT(
            "reference",
            detail=f"Here: one of {', '.join(ROLLOUTS)}; an engine rollout loads weights through the engine's "
            "own update path and sleeps or releases its memory between steps (sglang: GPUs only, colocated).",
        ),
        logprob_bar: float = typer.Option(
            LOGPROB_BAR, help="Engine rollouts: bar on step 0's mean |trainer - rollout| log-prob."
        ),
        prompts: int = typer.Option(
            SmokeOptions.prompts_per_step, min=1, help="Prompts per step (each sampled group-size times)."
        ),
        output: Path | None = OUTPUT(
            None, detail="Here: a folder for metrics.jsonl, summary.json and PNG plots."
        ),
        decoder: str = typer.Option(
            "auto",
            help=f"The reference rollout's decoder: {', '.join(ENGINES)} (auto and reference: the bench's "
            "engine; kvcache: HF + DynamicCache).",
        ),
        size: str = typer.Option(
            "auto", "--size", help="Model size: auto (tiny on CPU, small on GPU), tiny, small or medium."
        ),
        seed: int = SEED(0),
        json_out: bool = JSON_OPT,
        engine: str | None = ROLLOUT_ENGINE_OLD,
        report: Path | None = REPORT_OLD,
        shape: str | None = SMOKE_SHAPE_OLD,
    ) -> None:
        """Train a tiny random Qwen3 with GRPO on "copy the first prompt digit"; exit 0 on a passing verdict."""
        opts = SmokeOptions(
            placement=placement,
            device=device,
            steps=steps,
            inject=inject,
            report_dir=renamed(output, report, "--report", "--output"),
            engine=renamed(decoder, engine, "--engine", "--decoder"),
            shape=renamed(size, shape, "--shape", "--size"),
            seed=seed,
            rollout=rollout,
            logprob_bar=logprob_bar,
            prompts_per_step=prompts,
        ).validated()
        from rocmstack.smoke.verdict import settings_warning

        if not served(opts.rollout) and (why := settings_warning(opts.steps, opts.inject)) is not None:
            from rocmstack.output import warn

            warn(why)
        summary = _run_with_progress(opts)
        if json_out:
            from rocmstack.output import print_json

            print_json(summary)
        else:
            _print_verdict(summary)
        raise typer.Exit(int(ExitCode.OK if summary["passed"] else ExitCode.FAILED))

    @smoke.command("framework")
    def framework_cmd(
        recipe: str = typer.Argument(..., help="Recipe name or path; it must declare framework_smoke."),
        steps: int | None = STEPS(None, min=1),
        timeout: str | None = TIMEOUT(None, detail="Default: the recipe's."),
        output: Path | None = OUTPUT(
            None, detail="Here: a folder for the inputs, framework.log, metrics.jsonl, summary.json."
        ),
        overrides: list[str] = SET_OPT,
        allow_command: bool = ALLOW_RECIPE_COMMAND(False),
        json_out: bool = JSON_OPT,
        report: Path | None = REPORT_OLD,
    ) -> None:
        """Run the image's RL framework's own short loop as the recipe declares; exit 0 on a passing verdict."""
        from rocmstack.output import progress_lines
        from rocmstack.smoke import framework

        work_dir = renamed(output, report, "--report", "--output")
        limit = parse_duration(timeout, "--timeout") if timeout is not None else None
        with progress_lines("smoke framework") as say:
            summary = framework.run_command(
                recipe, overrides, work_dir, steps=steps, timeout_s=limit, allow_command=allow_command,
                progress=say,
            )  # fmt: skip
        if json_out:
            from rocmstack.output import print_json

            print_json(framework.json_safe(summary))
        else:
            framework.print_summary(summary)
        raise typer.Exit(int(ExitCode.OK if summary["passed"] else ExitCode.FAILED))

    app.add_typer(smoke, name="smoke")


def _run_with_progress(opts: SmokeOptions) -> dict[str, Any]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from rocmstack.output import stderr
    from rocmstack.smoke.runner import run_grpo_smoke

    columns = (
        TextColumn("[bold]grpo[/bold] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("reward {task.fields[reward]:.2f}"),
        TextColumn("step {task.fields[step_s]:.2f}s"),
        TimeElapsedColumn(),
    )
    if not stderr().is_terminal:  # a log or a pipe: a line a step, and one at least every 30 s
        from rocmstack.output import log_lines

        with log_lines("smoke grpo") as say:
            say(f"{opts.placement} on {opts.device}, {opts.steps} steps")

            def said(row: dict[str, Any]) -> None:
                reward, took = row["raw_reward_mean"], row["time_step_s"]
                say(f"step {row['step'] + 1}/{opts.steps}: reward {reward:.2f}, {took:.2f} s")

            return run_grpo_smoke(opts, on_step=said)
    with Progress(*columns, console=stderr(), transient=False) as progress:
        task_id = progress.add_task(f"{opts.placement}", total=opts.steps, reward=0.0, step_s=0.0)

        def on_step(row: dict[str, Any]) -> None:
            progress.update(task_id, advance=1, reward=row["raw_reward_mean"], step_s=row["time_step_s"])

        return run_grpo_smoke(opts, on_step=on_step)


def _print_verdict(summary: dict[str, Any]) -> None:
    from rocmstack.output import print_table, stdout
    from rocmstack.smoke.config import throughput_unit
    from rocmstack.smoke.report import criteria_table

    console = stdout()
    f = summary["final"]
    console.print(
        f"{summary['placement']} on {summary['device']} ({summary['dtype']}, shape {summary['shape']}, "
        f"{summary['params']:,} params, rollout {summary['engine']} in {summary['rollout_dtype']}), "
        f"{summary['steps']} steps"
    )
    console.print(
        f"reward {f['reward_first_window']:.3f} -> {f['reward_last_window']:.3f}; "
        f"{f['tokens_per_gpu_per_sec_avg']:,.0f} {throughput_unit(summary['device'])}; "
        f"sync {f['sync_bytes'] / 1e6:.2f} MB at "
        f"{f['sync_gb_per_s_avg']:.3f} GB/s; time to verdict {summary['time_to_verdict_s']:.1f} s "
        f"(Ray start {summary['ray_init_s']:.1f} s, model init {summary['model_init_s']:.1f} s)"
    )
    print_table(criteria_table(summary), console)
    if summary["inject"]:
        caught = "caught" if summary["inject_caught"] else "NOT caught"
        console.print(
            f"injected {summary['inject']}: expected {summary['expected_failure']} to fail: {caught}"
        )
    verdict = (
        "[green]PASS[/green]" if summary["passed"] else "[red]FAIL[/red]: " + ", ".join(summary["failed"])
    )
    console.print(f"verdict: {verdict}")
