"""``rocmstack smoke grpo``: a short GRPO job on Ray that proves the RL plumbing learns and syncs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from rocmstack.errors import ExitCode
from rocmstack.options import JSON_OPT, SET_OPT, old_spelling, renamed
from rocmstack.smoke.config import LOGPROB_BAR, SmokeOptions


def register(app: typer.Typer) -> None:
    smoke = typer.Typer(
        help="Short end-to-end jobs that prove an image can do RL post-training.", no_args_is_help=True
    )

    @smoke.command("grpo")
    def grpo_cmd(
        placement: str = typer.Option(
            "colocated", help="colocated (one GPU, IPC sync) or split (one GPU each, broadcast)."
        ),
        device: str = typer.Option("auto", help="auto, cuda (also HIP) or cpu."),
        steps: int = typer.Option(SmokeOptions.steps, min=1, help="GRPO steps."),
        inject: str | None = typer.Option(
            None,
            help="Fault to inject: skip-sync, stale-weights, zero-reward, nan-loss, "
            "logprob-mismatch (engine rollouts).",
        ),
        rollout: str = typer.Option(
            "reference",
            help="Rollout: reference (rocmstack's engine), vllm (the image's vLLM: offline LLM, "
            "collective_rpc weight loads, sleep/wake) or sglang (the image's SGLang: offline Engine, "
            "update_weights_from_tensor, release/resume memory; GPUs only, colocated).",
        ),
        logprob_bar: float = typer.Option(
            LOGPROB_BAR, help="Engine rollouts: bar on step 0's mean |trainer - rollout| log-prob."
        ),
        prompts: int = typer.Option(
            SmokeOptions.prompts_per_step, min=1, help="Prompts per step (each sampled group-size times)."
        ),
        report: Path | None = typer.Option(
            None, "--report", help="Write metrics.jsonl, summary.json and PNG plots here."
        ),
        decoder: str = typer.Option(
            "auto",
            help="The reference rollout's decoder: auto or reference (the bench's engine), or kvcache "
            "(HF + DynamicCache).",
        ),
        shape: str = typer.Option(
            "auto", help="Model shape: auto (tiny on CPU, small on GPU), tiny, small or medium."
        ),
        seed: int = typer.Option(0, help="Seed for model init, prompts and sampling."),
        json_out: bool = JSON_OPT,
        engine: str | None = old_spelling("--engine"),
    ) -> None:
        """Train a tiny random Qwen3 with GRPO on "copy the first prompt digit"; exit 0 on a passing verdict."""
        opts = SmokeOptions(
            placement=placement,
            device=device,
            steps=steps,
            inject=inject,
            report_dir=report,
            engine=renamed(decoder, engine, "--engine", "--decoder"),
            shape=shape,
            seed=seed,
            rollout=rollout,
            logprob_bar=logprob_bar,
            prompts_per_step=prompts,
        ).validated()
        from rocmstack.smoke.verdict import settings_warning

        if opts.rollout == "reference" and (why := settings_warning(opts.steps, opts.inject)) is not None:
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
        steps: int | None = typer.Option(None, min=1, help="Steps (default: the recipe's)."),
        timeout: float | None = typer.Option(None, min=1, help="Time limit in s (default: the recipe's)."),
        work_dir: Path | None = typer.Option(
            None, "--report", help="Folder for the inputs, framework.log, metrics.jsonl, summary.json."
        ),
        overrides: list[str] = SET_OPT,
        allow_command: bool = typer.Option(
            False,
            "--allow-recipe-command",
            help="Run the recipe's command on a node that is no rocmstack image (it is code from the recipe; "
            "it gets a minimal environment, never the caller's secrets).",
        ),
        json_out: bool = JSON_OPT,
    ) -> None:
        """Run the image's RL framework's own short loop as the recipe declares; exit 0 on a passing verdict."""
        from rocmstack.smoke import framework

        summary = framework.run_command(
            recipe, overrides, work_dir, steps=steps, timeout_s=timeout, allow_command=allow_command
        )
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
