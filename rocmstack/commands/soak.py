"""``rocmstack soak -- DOCTOR ARGS``: the doctor run N times on a node known to be healthy; every failure is a
false one, counted per check and per day."""

from __future__ import annotations

import sys

import typer

from rocmstack.errors import InputError, quoted
from rocmstack.options import JSON_OPT, TIMEOUT, parse_duration


def register(app: typer.Typer) -> None:
    @app.command("soak", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def soak_cmd(
        ctx: typer.Context,
        runs: int = typer.Option(50, "--runs", metavar="N", help="Doctor runs, each a fresh process."),
        interval: str = typer.Option(
            "5m", "--interval", metavar="TIME", help="The health check's interval the per-day figure assumes."
        ),
        timeout: str = TIMEOUT("10m", detail="Here: of one doctor run."),
        json_out: bool = JSON_OPT,
    ) -> None:
        """Run `rocmstack doctor ARGS` (after `--`) N times on a healthy node and count its false failures.

        Exit 0 when no run failed, 1 when some did (each named with its checks)."""
        from rocmstack.doctor.soak import soak
        from rocmstack.output import print_json, progress_lines

        if runs < 1:
            raise InputError(f"--runs {runs} is below 1", fix="give a number of runs, e.g. 50")
        args = list(ctx.args)
        if "--json" in args:
            raise InputError(f"{quoted('--json')} after `--` is the soak's own", fix="put --json before `--`")
        with progress_lines("soak") as say:
            result = soak(
                args,
                runs,
                timeout=parse_duration(timeout, "--timeout"),
                interval_s=parse_duration(interval, "--interval"),
                progress=say,
            )
        data = result.as_dict()
        if json_out:
            print_json(data)
        else:
            rate = (
                "n/a" if data["per_day"] is None else f"{data['per_day']:g} a day at one run every {interval}"
            )
            sys.stdout.write(
                f"soak: {data['false_failing_runs']} of {data['runs']} run(s) failed on a healthy node ({rate})\n"
            )
            for check, n in data["by_check"].items():
                sys.stdout.write(f"  {check}: {n} run(s)\n")
            for f in data["failures"][:10]:
                named = "; ".join(f"{c['id']}: {c['summary']}" for c in f["checks"]) or f["problem"]
                sys.stdout.write(f"  run {f['run']}: {named}\n")
        raise typer.Exit(1 if data["false_failing_runs"] else 0)
