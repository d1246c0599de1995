"""``rocmstack doctor``: the CLI over rocmstack.doctor.run_doctor (node) and run_cluster (--ray-address)."""

from __future__ import annotations

import contextlib
import copy
import inspect
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from rocmstack.errors import InputError, quoted
from rocmstack.options import (
    ADVISORIES_DIR_OPT,
    ARCH_OPT,
    BARE_SAVE_BASELINE,
    BUSBW_BASELINE_OLD,
    DOCTOR_SKIP_OPT,
    EXPECT_GPUS,
    JSON_OPT,
    KV_CACHE_DTYPE,
    MARKDOWN,
    MINUTES_OLD,
    ONLY,
    PROBE_TIMEOUT_OLD,
    SAVE_BUSBW_BASELINE_OLD,
    parse_duration,
    renamed,
    split_ids,
)


@contextlib.contextmanager
def _stdout_to_stderr():
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _print_report(report: dict, json_out: bool, markdown: bool) -> None:
    from rocmstack.doctor.report import render_markdown, render_table
    from rocmstack.output import print_json, stdout

    if json_out:
        print_json(report)
    elif markdown:
        sys.stdout.write(render_markdown(report))
    else:
        render_table(report, stdout())


def register(app: typer.Typer) -> None:
    @app.command("checkpoint")
    def checkpoint(
        model: Path = typer.Argument(
            ..., metavar="DIR", help="The model folder (config.json, *.safetensors)."
        ),
        gpu_arch: str | None = ARCH_OPT,
        kv_cache_dtype: str | None = KV_CACHE_DTYPE(None),
        json_out: bool = JSON_OPT,
        markdown: bool = MARKDOWN(False),
    ) -> None:
        """Preflight a model folder: shards and index, FP8 format, quantisation and KV-cache dtype for the arch.

        Reads the safetensors headers and config.json only; no tensor is loaded."""
        from rocmstack.doctor import options as doctor_options
        from rocmstack.doctor.checks.checkpoint import CHECKS
        from rocmstack.doctor.runner import exit_code, run_doctor

        if json_out and markdown:
            raise InputError("--json and --markdown both given", fix="choose one output format")
        opts = doctor_options.validated(
            fast=True,
            only=tuple(c.id for c in CHECKS),
            model_dir=model,
            gpu_arch=gpu_arch,
            kv_cache_dtype=kv_cache_dtype,
            model_flag="DIR",
        )
        report = run_doctor(opts)
        _print_report(report, json_out, markdown)
        if not report.get("ok"):
            raise typer.Exit(int(exit_code(report)))

    @app.command("doctor")
    @app.command("doctor")
    def doctor(
        fast: bool = typer.Option(False, "--fast", help="Skip every probe that imports torch, Ray or vLLM."),
        deep: bool = typer.Option(
            False, "--deep", help="Also initialise the GPU runtime in the torch probe."
        ),
        expect_gpus: int | None = EXPECT_GPUS(None),
        only: list[str] = ONLY([]),
        skip: list[str] = DOCTOR_SKIP_OPT,
        list_checks: bool = typer.Option(False, "--list-checks", help="List the checks and exit."),
        json_out: bool = JSON_OPT,
        markdown: bool = MARKDOWN(False),
        junit: Path | None = typer.Option(
            None, "--junit", metavar="FILE", help="Also write JUnit XML to FILE."
        ),
        tensor_parallel: int | None = typer.Option(
            None, "--tensor-parallel", metavar="N", help="Rollout TP size, to judge allocator x all-reduce."
        ),
        memory_share: float = typer.Option(
            0.9,
            "--memory-share",
            metavar="F",
            help="Share of each GPU's memory the job's engine takes (vLLM gpu_memory_utilization, "
            "SGLang mem_fraction_static).",
        ),
        advisories_dir: list[Path] = ADVISORIES_DIR_OPT,
        allow_pid: list[int] = typer.Option(
            [], "--allow-pid", metavar="PID", help="A process whose GPU memory is the job's own (repeat)."
        ),
        probe_timeout: str = typer.Option(
            "30s", "--probe-timeout", metavar="TIME", help="Time limit of each probe, e.g. 30s or 2m."
        ),
        level_given: int | None = typer.Option(
            None,
            "--level",
            metavar="1|2|3|4",
            help="1 static checks (default; with --budget: 1 and 2), 2 active probes on this node, 3 the cluster,"
            " 4 a burn-in of this node.",
        ),
        collectives: list[str] = typer.Option(
            [], "--collective", metavar="OP", help="Level 2/3: only these collectives (repeat or a,b)."
        ),
        sizes: str | None = typer.Option(
            None, "--sizes", metavar="MIN..MAX", help="Level 2/3 sweep, e.g. 1M..1G (default; 16M on CPU)."
        ),
        iters: int | None = typer.Option(None, "--iters", metavar="N", help="Timed iterations per size."),
        bars: Path | None = typer.Option(
            None, "--bars", metavar="FILE", help="Bars YAML (default: built in)."
        ),
        busbw_baseline: Path | None = typer.Option(
            None, "--busbw-baseline", metavar="FILE", help="Level 2: warn under 90 % of this busbw baseline."
        ),
        save_busbw_baseline: Path | None = typer.Option(
            None, "--save-busbw-baseline", metavar="FILE", help="Level 2: merge this run's busbw into FILE."
        ),
        save_baseline_bare: bool = typer.Option(False, BARE_SAVE_BASELINE, hidden=True),
        sync_repeats: int = typer.Option(5, "--sync-repeats", metavar="N", help="Weight-sync start-ups."),
        sync_bytes: str = typer.Option(
            "1G", "--sync-bytes", metavar="SIZE", help="Split weight-sync bucket."
        ),
        cpu_ranks: int = typer.Option(
            2, "--cpu-ranks", metavar="N", help="gloo ranks on a node without GPUs."
        ),
        comm_inits: int = typer.Option(
            20, "--comm-inits", metavar="N", help="Level 2: fresh communicators in communicator-churn."
        ),
        ipc_handles: int = typer.Option(
            64, "--ipc-handles", metavar="N", help="Level 2: IPC handles per GPU held open at once."
        ),
        ray_address: str | None = typer.Option(
            None, "--ray-address", metavar="ADDR", help="Run on every alive node of this Ray cluster."
        ),
        cluster_timeout: str | None = typer.Option(
            None,
            "--cluster-timeout",
            metavar="TIME",
            help="Time limit of a cluster run, e.g. 30m; default: what the chosen probes cost, twice over.",
        ),
        culprit_budget: str = typer.Option(
            "2m", "--culprit-budget", metavar="TIME", help="Level 3: time the culprit search may take."
        ),
        model: Path | None = typer.Option(
            None,
            "--model",
            metavar="DIR",
            help="Also preflight this model folder (see `rocmstack checkpoint`).",
        ),
        gpu_arch: str | None = ARCH_OPT,
        kv_cache_dtype: str | None = KV_CACHE_DTYPE(None),
        models: list[str] = typer.Option(
            [],
            "--models",
            metavar="NAME",
            help="Judge tuned-config coverage for these models (default: the recipe's).",
        ),
        burn_in: str = typer.Option(
            "10m", "--burn-in", metavar="TIME", help="Level 4: time of sustained load, e.g. 90s or 10m."
        ),
        html: Path | None = typer.Option(
            None, "--html", metavar="FILE", help="Also write an HTML report (burn-in plots per GPU)."
        ),
        slurm: str | None = typer.Option(
            None,
            "--slurm",
            metavar="HOOK",
            help="Run as Slurm's healthcheck, prolog or epilog: drain on failure, resume what it drained.",
        ),
        node: str | None = typer.Option(
            None, "--node", metavar="NAME", help="--slurm: the node's Slurm name (default $SLURMD_NODENAME)."
        ),
        budget: str | None = typer.Option(
            None, "--budget", metavar="TIME", help="Run only the checks that fit, e.g. 10s or 2m."
        ),
        prometheus: Path | None = typer.Option(
            None, "--prometheus", metavar="FILE", help="Also write node-exporter textfile metrics (*.prom)."
        ),
        history: Path | None = typer.Option(
            None, "--history", metavar="DIR", help="Keep this run and compare it with the node's last one."
        ),
        allow_shared_dir: bool = typer.Option(
            False,
            "--allow-shared-dir",
            help="--prometheus/--history: accept a folder users other than root can write.",
        ),
        breaker_share: float = typer.Option(
            0.1,
            "--breaker-share",
            metavar="F",
            help="--slurm: take no node out once this share of its partitions' nodes is out by rocmstack.",
        ),
        breaker_max: int | None = typer.Option(
            None,
            "--breaker-max",
            metavar="N",
            help="--slurm: nor once N nodes of them are (default: no count cap).",
        ),
        breaker_file: Path = typer.Option(
            Path("/var/lib/rocmstack/breaker.json"),
            "--breaker-file",
            metavar="FILE",
            help="--slurm: where a tripped circuit breaker is kept (a shared path holds the whole fleet).",
        ),
        breaker_reset: bool = typer.Option(
            False,
            "--breaker-reset",
            help="Close the circuit breaker at --breaker-file, say what it held, exit.",
        ),
        remediate: bool = typer.Option(
            False,
            "--remediate",
            help="--slurm: repair a node problem through Slurm (a GPU reset with --gpu-reset-cmd, else "
            "`scontrol reboot ASAP`), then judge it again; a user problem is only drained.",
        ),
        remediate_tries: int = typer.Option(
            2,
            "--remediate-tries",
            metavar="N",
            help="--remediate: after N repairs that did not help, the node stays drained.",
        ),
        gpu_reset_cmd: str | None = typer.Option(
            None,
            "--gpu-reset-cmd",
            metavar="CMD",
            help="--remediate: the site's GPU reset command (e.g. 'amd-smi reset -G'), tried before a reboot "
            "when no job is on the node.",
        ),
        telemetry_replay: Path | None = typer.Option(None, "--telemetry-replay", hidden=True),
        sysfs_root: Path = typer.Option(Path("/sys"), "--sysfs-root", hidden=True),
        dev_root: Path = typer.Option(Path("/dev"), "--dev-root", hidden=True),
        proc_root: Path = typer.Option(Path("/proc"), "--proc-root", hidden=True),
        minutes: float | None = MINUTES_OLD,
        timeout_old: str | None = PROBE_TIMEOUT_OLD,
        baseline_old: Path | None = BUSBW_BASELINE_OLD,
        save_baseline_old: Path | None = SAVE_BUSBW_BASELINE_OLD,
    ) -> None:
        """Check that this node (or every node of a Ray cluster) is ready for RL post-training."""
        from rocmstack.doctor import options as doctor_options
        from rocmstack.doctor.report import list_checks_table, render_junit
        from rocmstack.doctor.slurm import Breaker, Remedy

        if not 0.0 < breaker_share <= 1.0:
            raise InputError(
                f"--breaker-share {breaker_share:g} is not a share", fix="give a number in (0, 1], e.g. 0.1"
            )
        if breaker_max is not None and breaker_max < 1:
            raise InputError(f"--breaker-max {breaker_max} is below 1", fix="give a node count of 1 or more")
        breaker = Breaker(max_share=breaker_share, max_nodes=breaker_max, file=breaker_file)
        if remediate_tries < 1:
            raise InputError(f"--remediate-tries {remediate_tries} is below 1", fix="give 1 or more, e.g. 2")
        try:
            reset_argv = tuple(shlex.split(gpu_reset_cmd)) if gpu_reset_cmd is not None else ()
        except ValueError as exc:
            raise InputError(
                f"--gpu-reset-cmd {quoted(gpu_reset_cmd or '')}: {exc}", fix="quote it as a shell would"
            ) from None
        if gpu_reset_cmd is not None and not reset_argv:
            raise InputError("--gpu-reset-cmd is empty", fix="give the command, e.g. 'amd-smi reset -G'")
        remedy = Remedy(tries=remediate_tries, gpu_reset=reset_argv) if remediate else None
        if breaker_reset:
            from rocmstack.doctor.slurm import reset_breaker
            from rocmstack.output import print_json

            held = reset_breaker(breaker)
            if json_out:
                print_json({"breaker_file": str(breaker_file), "was_open": held is not None, "record": held})
            elif held is None:
                sys.stdout.write(f"rocmstack: the circuit breaker at {breaker_file} was not open\n")
            else:
                sys.stdout.write(
                    f"rocmstack: circuit breaker at {breaker_file} reset; it held: {held.get('why', '?')} "
                    f"(opened by {held.get('opened_by', '?')} at {held.get('at', '?')})\n"
                )
            return
        from rocmstack.doctor.runner import select_checks
        from rocmstack.output import print_json, stderr, stdout

        if json_out and markdown:
            raise InputError("--json and --markdown both given", fix="choose one output format")
        minutes = renamed(None, minutes, "--minutes", "--burn-in")  # N minutes, the old unit
        timeout_flag = "--timeout" if timeout_old is not None else "--probe-timeout"
        probe_timeout_s = parse_duration(
            renamed(probe_timeout, timeout_old, "--timeout", "--probe-timeout"), timeout_flag
        )
        cluster_timeout_s = (
            parse_duration(cluster_timeout, "--cluster-timeout") if cluster_timeout is not None else None
        )
        culprit_budget_s = parse_duration(culprit_budget, "--culprit-budget")
        baseline = renamed(busbw_baseline, baseline_old, "--baseline", "--busbw-baseline")
        save_baseline = renamed(
            save_busbw_baseline, save_baseline_old, "--save-baseline", "--save-busbw-baseline"
        )
        if prometheus is not None and ray_address:
            raise InputError(
                "--prometheus keeps this node's own figures", fix="drop --ray-address; run it on each node"
            )
        from rocmstack.doctor.bars import default_baseline_path

        baseline_file = baseline or default_baseline_path()
        if save_baseline_bare:  # the old flag: saved into the file it compares with
            save_baseline = renamed(
                save_baseline, baseline_file, "--save-baseline without FILE", "--save-busbw-baseline FILE"
            )
        opts = doctor_options.validated(
            level=level_given,
            sizes=sizes,
            sync_bytes=sync_bytes,
            budget=budget,
            burn_in=burn_in if minutes is None else None,
            gpu_arch=gpu_arch,
            cluster_address=ray_address,
            collectives=split_ids(collectives),
            iters=iters,
            bars_file=bars,
            baseline_file=baseline_file,
            save_baseline=save_baseline,
            sync_repeats=sync_repeats,
            cpu_ranks=cpu_ranks,
            comm_inits=comm_inits,
            ipc_handles=ipc_handles,
            culprit_budget=culprit_budget_s,
            model_dir=model,
            kv_cache_dtype=kv_cache_dtype,
            models=split_ids(models),
            history_dir=history,
            burnin_minutes=10.0 if minutes is None else minutes,
            telemetry_replay=telemetry_replay,
            fast=fast,
            deep=deep,
            expect_gpus=expect_gpus,
            only=split_ids(only),
            skip=split_ids(skip),
            tensor_parallel=tensor_parallel,
            memory_share=memory_share,
            allow_pids=tuple(allow_pid),
            advisories_dirs=tuple(advisories_dir),
            probe_timeout=probe_timeout_s,
            sysfs_root=sysfs_root,
            dev_root=dev_root,
            proc_root=proc_root,
        )
        level, budget_s = opts.level, opts.budget_s
        if html is not None:
            from rocmstack.output import check_output_file

            check_output_file(html, "--html")
        if junit is not None:
            from rocmstack.output import check_output_file

            check_output_file(junit, "--junit")  # before the checks, not after them
        from rocmstack.doctor.slurm import HOOKS

        if slurm is not None and slurm not in HOOKS:
            raise InputError(f"--slurm {quoted(slurm)} is not a hook", fix=f"one of {', '.join(HOOKS)}")
        if slurm is not None and ray_address:
            raise InputError("--slurm runs on the node itself", fix="drop --ray-address")
        if node is not None and slurm is None:
            raise InputError("--node names the Slurm node of --slurm", fix="add --slurm healthcheck")
        allocation: dict[str, str] = {}
        hook_deadline: float | None = None
        if slurm is not None:
            import time

            from rocmstack.doctor.slurm import job_allocation

            # scontrol's calls end with the budget, counted from here (None: the hook's own cap)
            hook_deadline = None if budget_s is None else time.monotonic() + budget_s
            # slurmd sets the job's GPUs (ROCR_VISIBLE_DEVICES, ...) in a Prolog/Epilog's environment: the
            # job's allocation, not the node's configuration. The probes and Ray's workers inherit this
            # process's environment, so they leave it here, and the report keeps them as the allocation.
            allocation = job_allocation(os.environ)
            for var in allocation:
                del os.environ[var]
        if prometheus is not None:
            from rocmstack.doctor.prometheus import check_textfile_path

            check_textfile_path(prometheus, allow_shared_dir)
        if history is not None:
            from rocmstack.doctor.history import check_history_dir

            check_history_dir(history, allow_shared_dir)
        if allow_shared_dir and prometheus is None and history is None:
            raise InputError(
                "--allow-shared-dir is about the folder of --prometheus or --history", fix="drop it"
            )
        # every check of the level when neither is given; validates ids (--list-checks: every level)
        checks = select_checks(opts.only, opts.skip, None if list_checks else level)
        if list_checks:
            if json_out:
                print_json(
                    [
                        {
                            "id": c.id,
                            "group": c.group,
                            "title": c.title,
                            "needs": sorted(c.needs),
                            "level": c.level,
                            "source": c.source,
                        }
                        for c in checks
                    ]
                )
            else:
                list_checks_table(checks, stdout())
            return
        err = stderr()
        scope = None
        if slurm is not None:
            import dataclasses

            from rocmstack.doctor.slurm import (
                node_name,
                read_scope,
                scope_deadline,
                scope_lines,
                syslog_writer,
            )

            # what this hook may judge (its job's GPUs, the GPUs running jobs hold), read before any check
            slurm_env = dict(os.environ)
            scope = read_scope(
                slurm, node_name(node, slurm_env), allocation, slurm_env, scope_deadline(hook_deadline)
            )
            opts = dataclasses.replace(opts, scope=scope)
            for line in scope_lines(scope):
                syslog_writer(slurm)(line)
                if not json_out:
                    sys.stdout.write(line + "\n")
        if ray_address:
            from rocmstack.doctor.cluster import run_cluster

            with (
                _stdout_to_stderr()
            ):  # Ray's driver threads print node events on stdout; keep it for the report
                report = run_cluster(
                    opts,
                    ray_address,
                    timeout=cluster_timeout_s,
                    progress=lambda msg: err.print(f"[dim]doctor:[/dim] {msg}"),
                )
        else:
            from rocmstack.doctor.runner import run_doctor

            interactive = not (json_out or markdown or slurm) and sys.stderr.isatty()
            progress = (lambda msg: err.print(f"[dim]doctor:[/dim] {msg}")) if level > 1 else None
            if interactive and level == 1:
                with err.status(f"running {len(checks)} checks..."):
                    report = run_doctor(opts)
            else:
                with _stdout_to_stderr():  # Ray and NCCL may print on stdout; keep it for the report
                    report = run_doctor(opts, progress=progress)
        if prometheus is not None and slurm is None:  # a hook writes its file once it has acted
            from rocmstack.doctor.prometheus import write_textfile

            write_textfile(prometheus, report, allow_shared_dir)
        if html is not None:
            from rocmstack.doctor.html import write_html

            write_html(html, report)
        if junit is not None:
            try:
                junit.write_text(render_junit(report), encoding="utf-8")
            except OSError as exc:
                raise InputError(
                    f"--junit {junit}: {exc.strerror}", fix="give a writable file path"
                ) from None
        if slurm is not None:
            from rocmstack.doctor.slurm import act, node_name, scope_report, syslog_writer

            env = dict(os.environ)
            to_syslog = syslog_writer(slurm)

            def log(line: str) -> None:
                to_syslog(line)
                if not json_out:
                    sys.stdout.write(line + "\n")

            # a job on the node (or jobs Slurm does not track there): no GPU reset, only Slurm's reboot after it
            busy = scope is None or not scope.tracked or bool(scope.running)
            outcome = act(report, slurm, node_name(node, env), env, log, hook_deadline, breaker, remedy, busy)
            from rocmstack.doctor.slurm import breaker_record

            record = breaker_record(breaker)
            report["slurm"] = {
                "hook": slurm,
                "action": outcome.action,
                "lines": list(outcome.lines),
                "allocation": allocation,
                "gpus": scope_report(scope),
                "breaker": {"open": record is not None, "file": str(breaker_file), "record": record},
            }
            if prometheus is not None:
                from rocmstack.doctor.prometheus import write_textfile

                write_textfile(prometheus, report, allow_shared_dir)
            if json_out:
                print_json(report)
            sys.stdout.flush()
            raise typer.Exit(outcome.exit_code)
        _print_report(report, json_out, markdown)
        if not report.get("ok"):
            from rocmstack.doctor.runner import exit_code

            raise typer.Exit(int(exit_code(report)))

    by_level(doctor)


# `doctor --help` groups the options by the level that uses them; those not named stay under "Options".
HELP_PANELS: dict[str, tuple[str, ...]] = {
    "Level 1: this node's facts": (
        "--fast", "--deep", "--expect-gpus", "--tensor-parallel", "--memory-share", "--allow-pid",
        "--probe-timeout", "--advisories-dir",
        "--model", "--gpu-arch", "--kv-cache-dtype", "--models",
    ),
    "Level 2: active probes on this node": (
        "--collective", "--sizes", "--iters", "--bars", "--busbw-baseline", "--save-busbw-baseline",
        "--sync-repeats",
        "--sync-bytes", "--cpu-ranks", "--comm-inits", "--ipc-handles",
    ),
    "Level 3: every node of a Ray cluster": ("--ray-address", "--cluster-timeout", "--culprit-budget"),
    "Level 4: burn-in": ("--burn-in", "--html"),
    "Fleet hooks": (
        "--slurm", "--node", "--prometheus", "--history", "--allow-shared-dir", "--breaker-share", "--breaker-max",
        "--breaker-file", "--breaker-reset", "--remediate", "--remediate-tries", "--gpu-reset-cmd",
    ),
}  # fmt: skip


def by_level(command: Callable[..., Any]) -> None:
    """Put each option of COMMAND in its HELP_PANELS panel (typer reads the panel when it builds the help)."""
    panel_of = {flag: panel for panel, flags in HELP_PANELS.items() for flag in flags}
    signature = inspect.signature(command)
    params = []
    for param in signature.parameters.values():
        decls = getattr(param.default, "param_decls", ())
        panel = next((panel_of[d] for d in decls if d in panel_of), None)
        if panel is not None:
            # A copy: a shared option (rocmstack.options) keeps no doctor panel in the other commands' help.
            option = copy.copy(param.default)
            option.rich_help_panel = panel
            param = param.replace(default=option)
        params.append(param)
    command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
