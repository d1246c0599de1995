"""``rocmstack preflight [OPTIONS] -- COMMAND...``: the lab's own job, shrunk to one step, run on this node."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from rocmstack.errors import InputError, printable
from rocmstack.options import (
    ADVISORIES_DIR_OPT,
    DRY_RUN,
    JSON_OPT,
    OUTPUT,
    TIMEOUT,
    WORK_DIR_OLD,
    parse_duration,
    renamed,
)


def _env(pairs: list[str], env_file: Path | None) -> dict[str, str]:
    """KEY=VALUE from --env-file (docker's format: one a line, # comments) then each --env."""
    out: dict[str, str] = {}
    lines: list[tuple[str, str]] = []
    if env_file is not None:
        try:
            text = env_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(
                f"--env-file {printable(env_file)}: {exc}", fix="give a KEY=VALUE file"
            ) from None
        lines += [(f"--env-file {env_file}:{i}", line) for i, line in enumerate(text.splitlines(), 1)]
    lines += [("--env", pair) for pair in pairs]
    for where, line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, eq, value = line.removeprefix("export ").partition("=")
        if not eq or not key.strip().isidentifier():
            raise InputError(
                f"{printable(where)}: {printable(line)!r} is not KEY=VALUE",
                fix="e.g. HIP_VISIBLE_DEVICES=0,1",
            )
        out[key.strip()] = value.strip().strip("'\"")
    return out


def register(app: typer.Typer) -> None:
    @app.command(
        "preflight",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )
    def preflight(
        ctx: typer.Context,
        framework: str | None = typer.Option(
            None,
            "--framework",
            metavar="NAME",
            help="verl, slime, vime, vllm or sglang (default: from the command).",
        ),
        model_config: Path | None = typer.Option(
            None,
            "--model-config",
            metavar="FILE",
            help="The job's model config.json (default: the command's model folder).",
        ),
        engine_args: Path | None = typer.Option(
            None,
            "--engine-args",
            metavar="FILE",
            help="A vLLM/SGLang engine-args YAML or JSON instead of a command.",
        ),
        env_file: Path | None = typer.Option(
            None, "--env-file", metavar="FILE", help="The job's environment, KEY=VALUE a line."
        ),
        env: list[str] = typer.Option(
            [], "--env", metavar="KEY=VALUE", help="One more variable of the job's environment (repeat)."
        ),
        output: Path | None = OUTPUT(
            None, detail="Here: the folder for the model, data and log (default: a new temporary folder)."
        ),
        timeout: str = TIMEOUT("5m", detail="Here: of the step."),
        layers: int = typer.Option(2, "--layers", metavar="N", help="Layers of the shrunk model."),
        advisories_dir: list[Path] = ADVISORIES_DIR_OPT,
        dry_run: bool = DRY_RUN(False, detail="Here: the inputs are written."),
        json_out: bool = JSON_OPT,
        work_dir_old: Path | None = WORK_DIR_OLD,
    ) -> None:
        """Run the lab's own RL job (or engine) for one step on a 2-layer model of its architecture.

        Give the job's command after `--`, exactly as it is launched; its parallelism, engine, dtype,
        quantization and environment are kept; the model, data, step count, loggers and checkpoints are
        replaced. Exit 0 when the step ran, 1 when it failed (with the failing process and its error)."""
        from rocmstack.output import print_json, progress_lines
        from rocmstack.preflight.adapters import engine_args_argv
        from rocmstack.preflight.runner import PreflightRequest, run_preflight

        argv = list(ctx.args)
        work_dir = renamed(output, work_dir_old, "--work-dir", "--output")
        if engine_args is not None:
            if argv:
                raise InputError("--engine-args and a command both given", fix="give one of them")
            argv = engine_args_argv(_engine_file(engine_args), framework or "vllm")
            framework = framework or "vllm"
        if layers < 1:
            raise InputError(f"--layers {layers} must be >= 1", fix="e.g. --layers 2")
        if work_dir is not None and work_dir.exists() and not work_dir.is_dir():
            raise InputError(f"--output {printable(work_dir)} is a file", fix="give a folder (it is created)")
        limit = parse_duration(timeout, "--timeout")
        job_env = _env(env, env_file)
        if work_dir is None:
            import tempfile

            work_dir = Path(tempfile.mkdtemp(prefix="rocmstack-preflight-"))
        req = PreflightRequest(
            tuple(argv), work_dir.resolve(), framework, model_config, job_env, limit, layers, dry_run,
            tuple(advisories_dir),
        )  # fmt: skip
        with progress_lines("preflight") as say:
            report = run_preflight(req, progress=say)
        if json_out:
            print_json(report)
        else:
            _print(report)
        if report.get("passed") is False:
            raise typer.Exit(1)


def _engine_file(path: Path) -> dict:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InputError(
            f"--engine-args {printable(path)}: {exc}", fix="give a YAML or JSON mapping of engine args"
        ) from None
    if not isinstance(data, dict) or not (data.get("model") or data.get("model_path")):
        raise InputError(
            f"--engine-args {printable(path)}: not a mapping with a model",
            fix="e.g. model: /models/x, tensor_parallel_size: 2",
        )
    return data


def _print(report: dict) -> None:
    out = sys.stdout
    out.write(f"preflight {report['framework']}: {report['verdict']}\n")
    out.write(
        f"  model: {report['model']['architectures']}, {report['model']['layers_before']} -> 2 layers\n"
    )
    for line in report["changed"]:
        out.write(f"  changed {printable(line)}\n")
    if report.get("passed") is None:
        out.write("  step: " + " ".join(printable(a) for a in report["step_argv"]) + "\n")
        return
    for sel in report.get("selections", []):
        out.write(f"  [{sel['category']}] {sel['text']} ({sel['process']})\n")
    broke = report.get("failure")
    if broke:
        out.write(f"  failed in {broke['process']}:\n")
        for line in broke["lines"]:
            out.write(f"    {line}\n")
        if broke.get("then"):
            out.write(f"  then {broke['then']}\n")
    for known in report.get("known_causes", []):
        out.write(
            f"  known cause {known['id']}: {known['title']}\n    fix: {known['fix']}\n    {known['source']}\n"
        )
    out.write(f"  log: {report['log']}\n")
