"""``rocmstack validate``: the post-build gate."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from rocmstack.errors import EngineError, ExitCode, InputError, printable
from rocmstack.options import (
    ALLOW_RECIPE_COMMAND,
    BASELINE,
    CONTAINER_ENGINE,
    DEVICE,
    DOCTOR_SKIP_OLD,
    DOCTOR_SKIP_OPT,
    DRY_RUN,
    EXPECT_GPUS,
    JSON_OPT,
    OUTPUT,
    RECIPE_NAME,
    REPORT_OLD,
    SMOKE_STEPS_OLD,
    STEPS,
    renamed,
    split_ids,
)

if TYPE_CHECKING:
    from rocmstack.validate.pipeline import ValidateOptions

DEFAULT_REPORT = Path("validate-report")


def register(app: typer.Typer) -> None:
    @app.command("validate")
    def validate(
        image: str | None = typer.Argument(None, help="Image to validate (omit with --in-place)."),
        engine: str = CONTAINER_ENGINE("auto"),
        in_place: bool = typer.Option(
            False, "--in-place", help="Validate this node (already inside the image); no container."
        ),
        expect_gpus: int | None = EXPECT_GPUS(None),
        output: Path = OUTPUT(DEFAULT_REPORT, detail="Here: the folder for report.json/.md/.html."),
        skip_smoke: bool = typer.Option(False, "--skip-smoke", help="Leave out the GRPO smoke job."),
        skip_bench: bool = typer.Option(False, "--skip-bench", help="Leave out the rollout bench."),
        skip_framework: bool = typer.Option(
            False, "--skip-framework", help="Leave out the RL framework's own loop (smoke framework)."
        ),
        baseline: Path | None = BASELINE(None),
        recipe: str | None = RECIPE_NAME(None),
        allow_recipe_command: bool = ALLOW_RECIPE_COMMAND(False),
        device: str = DEVICE("auto"),
        steps: int | None = STEPS(None),
        skip: list[str] = DOCTOR_SKIP_OPT,
        smoke_steps: int | None = SMOKE_STEPS_OLD,
        doctor_skip: list[str] = DOCTOR_SKIP_OLD,
        seccomp_unconfined: bool = typer.Option(
            False,
            "--seccomp-unconfined",
            help="Run the image without the engine's default seccomp profile (never the image's choice).",
        ),
        dry_run: bool = DRY_RUN(False),
        json_out: bool = JSON_OPT,
        report_old: Path | None = REPORT_OLD,
    ) -> None:
        """Run the doctor, the GRPO smoke job and the rollout bench inside IMAGE; exit 0 only if all that ran passed."""
        from rocmstack.validate.pipeline import ValidateOptions

        smoke_steps = renamed(steps, smoke_steps, "--smoke-steps", "--steps")
        report = renamed(output, report_old, "--report", "--output")
        doctor_skip = renamed(skip, doctor_skip, "--doctor-skip", "--skip")

        opts = ValidateOptions(
            report_dir=report,
            expect_gpus=expect_gpus,
            skip_smoke=skip_smoke,
            skip_bench=skip_bench,
            skip_framework=skip_framework,
            baseline=baseline,
            device=device,
            smoke_steps=smoke_steps,
            doctor_skip=split_ids(doctor_skip),
            recipe=recipe,
            allow_recipe_command=allow_recipe_command,
        )
        if in_place:
            if image:
                raise InputError(
                    f"--in-place validates this node; IMAGE {image!r} was given too",
                    fix="drop IMAGE, or drop --in-place to validate the image in a container",
                )
            if dry_run or seccomp_unconfined:
                flag = "--dry-run" if dry_run else "--seccomp-unconfined"
                raise InputError(
                    f"{flag} is about the engine command; --in-place runs none", fix="drop one of them"
                )
            result = _in_place(opts.validated())  # clears the folder's earlier results itself
        else:
            if not image:
                raise InputError(
                    "IMAGE missing", fix="rocmstack validate IMAGE [--engine buildah], or --in-place"
                )
            if recipe:
                raise InputError(
                    f"--recipe {recipe!r} is for --in-place: an image's own lock.json names its recipe",
                    fix="drop --recipe",
                )
            if allow_recipe_command:
                raise InputError(
                    "--allow-recipe-command is for --in-place: inside the image its own declaration runs",
                    fix="drop --allow-recipe-command",
                )
            opts = opts.validated()
            if not dry_run:
                from rocmstack.validate.pipeline import prepare_report_dir

                prepare_report_dir(opts.report_dir)  # a skipped stage leaves no earlier run's folder behind
            ran = _in_container(
                image,
                engine,
                opts,
                dry_run=dry_run,
                json_out=json_out,
                seccomp_unconfined=seccomp_unconfined,
            )
            if ran is None:
                return
            result = ran
        _finish(result, report, json_out)


def _in_place(opts: ValidateOptions) -> dict:
    from rocmstack.output import progress_lines
    from rocmstack.validate.pipeline import run_in_place
    from rocmstack.validate.report import write_all

    with progress_lines("validate") as say:
        result = run_in_place(opts, progress=say)
    write_all(result, opts.report_dir)
    return result


def _in_container(
    image: str,
    engine: str,
    opts: ValidateOptions,
    *,
    dry_run: bool,
    json_out: bool,
    seccomp_unconfined: bool = False,
) -> dict | None:
    from rocmstack.container.engine import choose
    from rocmstack.validate import container

    engine = choose(engine, need="run")
    host = container.detect_host()
    plan = container.plan(
        engine=engine,
        host=host,
        image=image,
        report_dir=opts.report_dir,
        args=container.in_image_args(opts),
        baseline=opts.baseline,
        seccomp_unconfined=seccomp_unconfined,
    )
    if dry_run:
        import sys

        from rocmstack.output import warn

        shown, pinned_to = plan, None
        try:
            shown, info = container.pinned(plan)  # what a run executes: the image by its id
            pinned_to = info["id"]
        except EngineError as exc:
            warn(f"{exc.one_line()}; a run would stop here, so the plan shows {image} as given")
        if json_out:
            from rocmstack.output import print_json

            print_json({**shown.as_dict(), "image_ref": image, "image_id": pinned_to})
        else:
            sys.stdout.write(shown.shell() + "\n")
        return None
    from rocmstack.output import progress_lines

    # stderr: stdout stays JSON with --json; the image's lines are untrusted, and say() prints no control
    # character (a terminal escape) of theirs
    with progress_lines("validate") as say:
        return container.validate_image(plan, opts, on_line=lambda line: say(f"image | {line}"))


def _finish(result: dict, report_dir: Path, json_out: bool) -> None:
    from rocmstack.output import print_json, stdout

    if json_out:
        print_json(result)
    else:
        console = stdout()
        for s in result["stages"]:
            mark = {"pass": "[green]PASS[/green]", "skip": "[dim]skipped[/dim]"}.get(
                s["status"], f"[red]{escape(printable(s['status']).upper())}[/red]"
            )
            name, summary = escape(printable(s["name"])), escape(printable(s["summary"]))
            console.print(f"  {name:<7} {mark}  {summary}", highlight=False)
        color = "green" if result["passed"] else "red"
        console.print(
            f"[{color}]{escape(printable(result['verdict']))}[/{color}]  report: {report_dir / 'report.html'}",
            highlight=False,
        )
    if not result["passed"]:
        raise typer.Exit(int(ExitCode.FAILED))
