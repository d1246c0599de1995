"""``rocmstack doctor``: the CLI over rocmstack.doctor.run_doctor (node) and run_cluster (--ray-address).

The doctor's options are declared in groups (frozen dataclasses below), one per `--help` panel; the command's
parameters are built from them, and its arguments read back into them (DoctorArgs)."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import os
import sys
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import typer

from rocmstack.errors import InputError
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

if TYPE_CHECKING:
    from rocmstack.doctor.model import DoctorOptions


def opt(option: Any) -> Any:
    """A group's field, declared by its typer option (or a rocmstack.options one): the doctor command takes
    a parameter of the field's name and type with this option as its default (see ``signature``)."""
    return field(metadata={"option": option})


@dataclass(frozen=True)
class Group:
    """A group of the doctor's options, declared as a frozen dataclass whose fields are ``opt``s. The group is
    the declaration: its PANEL is the `--help` panel its options show under (None: typer's "Options"), the
    command's parameters are built from the groups (``signature``), in DoctorArgs' order, which is --help's,
    and the values given are read back into them (``read``)."""

    PANEL: ClassVar[str | None] = None


@dataclass(frozen=True)
class Selection(Group):
    """Which checks run."""

    only: list[str] = opt(ONLY([]))
    skip: list[str] = opt(DOCTOR_SKIP_OPT)


@dataclass(frozen=True)
class Output(Group):
    """What the run prints and writes (--list-checks prints the checks instead of running them)."""

    # no panel of its own: under "Options", where these have always been
    list_checks: bool = opt(typer.Option(False, "--list-checks", help="List the checks and exit."))
    json_out: bool = opt(JSON_OPT)
    markdown: bool = opt(MARKDOWN(False))
    junit: Path | None = opt(
        typer.Option(None, "--junit", metavar="FILE", help="Also write JUnit XML to FILE.")
    )


@dataclass(frozen=True)
class Depth(Group):
    """How far the run goes: its level, or the checks that fit a time budget."""

    level_given: int | None = opt(
        typer.Option(
            None,
            "--level",
            metavar="1|2|3|4",
            help="1 static checks (default; with --budget: 1 and 2), 2 active probes on this node, 3 the cluster,"
            " 4 a burn-in of this node.",
        )
    )
    budget: str | None = opt(
        typer.Option(None, "--budget", metavar="TIME", help="Run only the checks that fit, e.g. 10s or 2m.")
    )


@dataclass(frozen=True)
class NodeFacts(Group):
    PANEL: ClassVar[str | None] = "Level 1: this node's facts"
    fast: bool = opt(typer.Option(False, "--fast", help="Skip every probe that imports torch, Ray or vLLM."))
    deep: bool = opt(
        typer.Option(False, "--deep", help="Also initialise the GPU runtime in the torch probe.")
    )
    expect_gpus: int | None = opt(EXPECT_GPUS(None))
    tensor_parallel: int | None = opt(
        typer.Option(
            None, "--tensor-parallel", metavar="N", help="Rollout TP size, to judge allocator x all-reduce."
        )
    )
    memory_share: float = opt(
        typer.Option(
            0.9,
            "--memory-share",
            metavar="F",
            help="Share of each GPU's memory the job's engine takes (vLLM gpu_memory_utilization, "
            "SGLang mem_fraction_static).",
        )
    )
    advisories_dir: list[Path] = opt(ADVISORIES_DIR_OPT)
    allow_pid: list[int] = opt(
        typer.Option(
            [], "--allow-pid", metavar="PID", help="A process whose GPU memory is the job's own (repeat)."
        )
    )
    probe_timeout: str = opt(
        typer.Option(
            "30s", "--probe-timeout", metavar="TIME", help="Time limit of each probe, e.g. 30s or 2m."
        )
    )
    model: Path | None = opt(
        typer.Option(
            None,
            "--model",
            metavar="DIR",
            help="Also preflight this model folder (see `rocmstack checkpoint`).",
        )
    )
    gpu_arch: str | None = opt(ARCH_OPT)
    kv_cache_dtype: str | None = opt(KV_CACHE_DTYPE(None))
    models: list[str] = opt(
        typer.Option(
            [],
            "--models",
            metavar="NAME",
            help="Judge tuned-config coverage for these models (default: the recipe's).",
        )
    )


@dataclass(frozen=True)
class ActiveProbes(Group):
    PANEL: ClassVar[str | None] = "Level 2: active probes on this node"
    collectives: list[str] = opt(
        typer.Option(
            [], "--collective", metavar="OP", help="Level 2/3: only these collectives (repeat or a,b)."
        )
    )
    sizes: str | None = opt(
        typer.Option(
            None, "--sizes", metavar="MIN..MAX", help="Level 2/3 sweep, e.g. 1M..1G (default; 16M on CPU)."
        )
    )
    iters: int | None = opt(typer.Option(None, "--iters", metavar="N", help="Timed iterations per size."))
    bars: Path | None = opt(
        typer.Option(None, "--bars", metavar="FILE", help="Bars YAML (default: built in).")
    )
    busbw_baseline: Path | None = opt(
        typer.Option(
            None,
            "--busbw-baseline",
            metavar="FILE",
            help="Level 2: warn under 90 % of this busbw baseline.",
        )
    )
    save_busbw_baseline: Path | None = opt(
        typer.Option(
            None,
            "--save-busbw-baseline",
            metavar="FILE",
            help="Level 2: merge this run's busbw into FILE.",
        )
    )
    sync_repeats: int = opt(typer.Option(5, "--sync-repeats", metavar="N", help="Weight-sync start-ups."))
    sync_bytes: str = opt(
        typer.Option("1G", "--sync-bytes", metavar="SIZE", help="Split weight-sync bucket.")
    )
    cpu_ranks: int = opt(
        typer.Option(2, "--cpu-ranks", metavar="N", help="gloo ranks on a node without GPUs.")
    )
    comm_inits: int = opt(
        typer.Option(
            20, "--comm-inits", metavar="N", help="Level 2: fresh communicators in communicator-churn."
        )
    )
    ipc_handles: int = opt(
        typer.Option(64, "--ipc-handles", metavar="N", help="Level 2: IPC handles per GPU held open at once.")
    )


@dataclass(frozen=True)
class RayCluster(Group):
    PANEL: ClassVar[str | None] = "Level 3: every node of a Ray cluster"
    ray_address: str | None = opt(
        typer.Option(
            None, "--ray-address", metavar="ADDR", help="Run on every alive node of this Ray cluster."
        )
    )
    cluster_timeout: str | None = opt(
        typer.Option(
            None,
            "--cluster-timeout",
            metavar="TIME",
            help="Time limit of a cluster run, e.g. 30m; default: what the chosen probes cost, twice over.",
        )
    )
    culprit_budget: str = opt(
        typer.Option(
            "2m", "--culprit-budget", metavar="TIME", help="Level 3: time the culprit search may take."
        )
    )


@dataclass(frozen=True)
class BurnIn(Group):
    PANEL: ClassVar[str | None] = "Level 4: burn-in"
    burn_in: str = opt(
        typer.Option(
            "10m", "--burn-in", metavar="TIME", help="Level 4: time of sustained load, e.g. 90s or 10m."
        )
    )
    html: Path | None = opt(
        typer.Option(
            None, "--html", metavar="FILE", help="Also write an HTML report (burn-in plots per GPU)."
        )
    )


@dataclass(frozen=True)
class FleetHooks(Group):
    PANEL: ClassVar[str | None] = "Fleet hooks"
    slurm: str | None = opt(
        typer.Option(
            None,
            "--slurm",
            metavar="HOOK",
            help="Run as Slurm's healthcheck, prolog or epilog: drain on failure, resume what it drained.",
        )
    )
    node: str | None = opt(
        typer.Option(
            None,
            "--node",
            metavar="NAME",
            help="--slurm: the node's Slurm name (default $SLURMD_NODENAME).",
        )
    )
    prometheus: Path | None = opt(
        typer.Option(
            None,
            "--prometheus",
            metavar="FILE",
            help="Also write node-exporter textfile metrics (*.prom).",
        )
    )
    history: Path | None = opt(
        typer.Option(
            None,
            "--history",
            metavar="DIR",
            help="Keep this run and compare it with the node's last one.",
        )
    )
    allow_shared_dir: bool = opt(
        typer.Option(
            False,
            "--allow-shared-dir",
            help="--prometheus/--history: accept a folder users other than root can write.",
        )
    )
    breaker_share: float = opt(
        typer.Option(
            0.1,
            "--breaker-share",
            metavar="F",
            help="--slurm: take no node out once this share of its partitions' nodes is out by rocmstack.",
        )
    )
    breaker_max: int | None = opt(
        typer.Option(
            None,
            "--breaker-max",
            metavar="N",
            help="--slurm: nor once N nodes of them are (default: no count cap).",
        )
    )
    breaker_file: Path = opt(
        typer.Option(
            Path("/var/lib/rocmstack/breaker.json"),
            "--breaker-file",
            metavar="FILE",
            help="--slurm: where a tripped circuit breaker is kept (a shared path holds the whole fleet).",
        )
    )
    breaker_reset: bool = opt(
        typer.Option(
            False,
            "--breaker-reset",
            help="Close the circuit breaker at --breaker-file, say what it held, exit.",
        )
    )
    remediate: bool = opt(
        typer.Option(
            False,
            "--remediate",
            help="--slurm: repair a node problem through Slurm (a GPU reset with --gpu-reset-cmd, else "
            "`scontrol reboot ASAP`), then judge it again; a user problem is only drained.",
        )
    )
    remediate_tries: int = opt(
        typer.Option(
            2,
            "--remediate-tries",
            metavar="N",
            help="--remediate: after N repairs that did not help, the node stays drained.",
        )
    )
    gpu_reset_cmd: str | None = opt(
        typer.Option(
            None,
            "--gpu-reset-cmd",
            metavar="CMD",
            help="--remediate: the site's GPU reset command (e.g. 'amd-smi reset -G'), tried before a reboot "
            "when no job is on the node.",
        )
    )


@dataclass(frozen=True)
class Roots(Group):
    """Hidden: what the tests point the doctor at instead of this machine."""

    telemetry_replay: Path | None = opt(typer.Option(None, "--telemetry-replay", hidden=True))
    sysfs_root: Path = opt(typer.Option(Path("/sys"), "--sysfs-root", hidden=True))
    dev_root: Path = opt(typer.Option(Path("/dev"), "--dev-root", hidden=True))
    proc_root: Path = opt(typer.Option(Path("/proc"), "--proc-root", hidden=True))


@dataclass(frozen=True)
class OldSpellings(Group):
    """Hidden: renamed options' previous spellings, kept for one release (rocmstack.options.renamed)."""

    minutes: float | None = opt(MINUTES_OLD)
    timeout_old: str | None = opt(PROBE_TIMEOUT_OLD)
    baseline_old: Path | None = opt(BUSBW_BASELINE_OLD)
    save_baseline_old: Path | None = opt(SAVE_BUSBW_BASELINE_OLD)
    save_baseline_bare: bool = opt(typer.Option(False, BARE_SAVE_BASELINE, hidden=True))


@dataclass(frozen=True)
class DoctorArgs:
    """The doctor's options as given, by group; the order of the fields is --help's."""

    selection: Selection
    output: Output
    depth: Depth
    level1: NodeFacts
    level2: ActiveProbes
    level3: RayCluster
    level4: BurnIn
    fleet: FleetHooks
    roots: Roots
    old: OldSpellings


def groups() -> dict[str, type[Group]]:
    """DoctorArgs' fields -> their groups, in order."""
    return typing.get_type_hints(DoctorArgs)


def signature() -> inspect.Signature:
    """The doctor command's parameters: each group's fields, keyword-only, the option carrying its panel."""
    params = []
    for group in groups().values():
        types = typing.get_type_hints(group)
        for f in dataclasses.fields(group):
            option = f.metadata["option"]
            if group.PANEL is not None:
                # A copy: a shared option (rocmstack.options) keeps no doctor panel in other commands' help.
                option = copy.copy(option)
                option.rich_help_panel = group.PANEL
            params.append(
                inspect.Parameter(
                    f.name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=types[f.name]
                )
            )
    return inspect.Signature(params, return_annotation=None)


def read(given: Mapping[str, Any]) -> DoctorArgs:
    """The command's keyword arguments (one per field of each group) as DoctorArgs."""
    by_group: dict[str, Any] = {
        name: group(**{f.name: given[f.name] for f in dataclasses.fields(group)})
        for name, group in groups().items()
    }
    return DoctorArgs(**by_group)


def help_panels() -> dict[str, tuple[str, ...]]:
    """`doctor --help`'s panels, in order, and the long flags of each (the groups under "Options" left out)."""
    return {
        group.PANEL: tuple(
            decl
            for f in dataclasses.fields(group)
            for decl in f.metadata["option"].param_decls
            if decl.startswith("--")
        )
        for group in groups().values()
        if group.PANEL is not None
    }


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
        if not report.get("passed"):
            raise typer.Exit(int(exit_code(report)))

    @app.command("doctor")
    @taking(signature())
    def doctor(**given: Any) -> None:
        """Check that this node (or every node of a Ray cluster) is ready for RL post-training."""
        run(read(given))


F = TypeVar("F", bound=Callable[..., Any])


def taking(params: inspect.Signature) -> Callable[[F], F]:
    """Give a command that takes ``**given`` these parameters: typer reads them from ``inspect.signature``
    (``__signature__``) and their types from ``typing.get_type_hints`` (``__annotations__``)."""

    def mark(command: F) -> F:
        command.__signature__ = params  # type: ignore[attr-defined]
        hints = {p.name: p.annotation for p in params.parameters.values()}
        command.__annotations__ = {**hints, "return": None}
        return command

    return mark


def run(args: DoctorArgs) -> None:
    """The doctor command once its options are read: check them, run the checks, report, exit."""
    from rocmstack.doctor import hook
    from rocmstack.doctor.runner import select_checks
    from rocmstack.output import check_output_file

    out, fleet = args.output, args.fleet
    breaker, remedy = hook.fleet_settings(
        breaker_share=fleet.breaker_share,
        breaker_max=fleet.breaker_max,
        breaker_file=fleet.breaker_file,
        remediate=fleet.remediate,
        remediate_tries=fleet.remediate_tries,
        gpu_reset_cmd=fleet.gpu_reset_cmd,
    )
    if fleet.breaker_reset:
        hook.reset_and_say(breaker, out.json_out)
        return
    if out.json_out and out.markdown:
        raise InputError("--json and --markdown both given", fix="choose one output format")
    opts, cluster_timeout_s = options(args)
    for path, flag in ((args.level4.html, "--html"), (out.junit, "--junit")):
        if path is not None:
            check_output_file(path, flag)  # before the checks, not after them
    hook.check_hook(fleet.slurm, fleet.node, args.level3.ray_address)
    slurm_hook = None
    if fleet.slurm is not None:
        slurm_hook = hook.start(fleet.slurm, fleet.node, breaker, remedy, out.json_out, opts.budget_s)
    if fleet.prometheus is not None:
        from rocmstack.doctor.prometheus import check_textfile_path

        check_textfile_path(fleet.prometheus, fleet.allow_shared_dir)
    if fleet.history is not None:
        from rocmstack.doctor.history import check_history_dir

        check_history_dir(fleet.history, fleet.allow_shared_dir)
    if fleet.allow_shared_dir and fleet.prometheus is None and fleet.history is None:
        raise InputError("--allow-shared-dir is about the folder of --prometheus or --history", fix="drop it")
    # every check of the level when neither is given; validates ids (--list-checks: every level)
    checks = select_checks(opts.only, opts.skip, None if out.list_checks else opts.level)
    if out.list_checks:
        from rocmstack.doctor.report import print_check_list

        print_check_list(checks, out.json_out)
        return
    scope = None
    if slurm_hook is not None:
        scope = hook.read_gpus(slurm_hook)
        opts = dataclasses.replace(opts, scope=scope)
    report = run_checks(opts, args, cluster_timeout_s, len(checks))
    if fleet.prometheus is not None and slurm_hook is None:  # a hook writes its file once it has acted
        from rocmstack.doctor.prometheus import write_textfile

        write_textfile(fleet.prometheus, report, fleet.allow_shared_dir)
    if args.level4.html is not None:
        from rocmstack.doctor.html import write_html

        write_html(args.level4.html, report)
    if out.junit is not None:
        from rocmstack.doctor.report import render_junit

        try:
            out.junit.write_text(render_junit(report), encoding="utf-8")
        except OSError as exc:
            raise InputError(
                f"--junit {out.junit}: {exc.strerror}", fix="give a writable file path"
            ) from None
    if slurm_hook is not None:
        raise typer.Exit(hook.finish(slurm_hook, scope, report, fleet.prometheus, fleet.allow_shared_dir))
    _print_report(report, out.json_out, out.markdown)
    if not report.get("passed"):
        from rocmstack.doctor.runner import exit_code

        raise typer.Exit(int(exit_code(report)))


def options(args: DoctorArgs) -> tuple[DoctorOptions, float | None]:
    """The doctor's options from the command's (old spellings read, durations parsed, every value checked),
    and the --cluster-timeout in seconds (a cluster run's, no option of a node's run)."""
    from rocmstack.doctor import options as doctor_options
    from rocmstack.doctor.bars import default_baseline_path

    l1, l2, l3, old = args.level1, args.level2, args.level3, args.old
    minutes = renamed(None, old.minutes, "--minutes", "--burn-in")  # N minutes, the old unit
    timeout_flag = "--timeout" if old.timeout_old is not None else "--probe-timeout"
    probe_timeout_s = parse_duration(
        renamed(l1.probe_timeout, old.timeout_old, "--timeout", "--probe-timeout"), timeout_flag
    )
    cluster_timeout_s = (
        parse_duration(l3.cluster_timeout, "--cluster-timeout") if l3.cluster_timeout is not None else None
    )
    culprit_budget_s = parse_duration(l3.culprit_budget, "--culprit-budget")
    baseline = renamed(l2.busbw_baseline, old.baseline_old, "--baseline", "--busbw-baseline")
    save_baseline = renamed(
        l2.save_busbw_baseline, old.save_baseline_old, "--save-baseline", "--save-busbw-baseline"
    )
    if args.fleet.prometheus is not None and l3.ray_address:
        raise InputError(
            "--prometheus keeps this node's own figures", fix="drop --ray-address; run it on each node"
        )
    baseline_file = baseline or default_baseline_path()
    if old.save_baseline_bare:  # the old flag: saved into the file it compares with
        save_baseline = renamed(
            save_baseline, baseline_file, "--save-baseline without FILE", "--save-busbw-baseline FILE"
        )
    opts = doctor_options.validated(
        level=args.depth.level_given,
        sizes=l2.sizes,
        sync_bytes=l2.sync_bytes,
        budget=args.depth.budget,
        burn_in=args.level4.burn_in if minutes is None else None,
        gpu_arch=l1.gpu_arch,
        cluster_address=l3.ray_address,
        collectives=split_ids(l2.collectives),
        iters=l2.iters,
        bars_file=l2.bars,
        baseline_file=baseline_file,
        save_baseline=save_baseline,
        sync_repeats=l2.sync_repeats,
        cpu_ranks=l2.cpu_ranks,
        comm_inits=l2.comm_inits,
        ipc_handles=l2.ipc_handles,
        culprit_budget=culprit_budget_s,
        model_dir=l1.model,
        kv_cache_dtype=l1.kv_cache_dtype,
        models=split_ids(l1.models),
        history_dir=args.fleet.history,
        burnin_minutes=10.0 if minutes is None else minutes,
        telemetry_replay=args.roots.telemetry_replay,
        fast=l1.fast,
        deep=l1.deep,
        expect_gpus=l1.expect_gpus,
        only=split_ids(args.selection.only),
        skip=split_ids(args.selection.skip),
        tensor_parallel=l1.tensor_parallel,
        memory_share=l1.memory_share,
        allow_pids=tuple(l1.allow_pid),
        advisories_dirs=tuple(l1.advisories_dir),
        probe_timeout=probe_timeout_s,
        sysfs_root=args.roots.sysfs_root,
        dev_root=args.roots.dev_root,
        proc_root=args.roots.proc_root,
    )
    return opts, cluster_timeout_s


def run_checks(opts: DoctorOptions, args: DoctorArgs, cluster_timeout_s: float | None, count: int) -> dict:
    """The report of this node's run, or with --ray-address of the cluster's; progress on stderr."""
    from rocmstack.output import progress_lines, stderr

    ray_address = args.level3.ray_address
    if ray_address:
        from rocmstack.doctor.cluster import run_cluster

        # Ray's driver threads print node events on stdout; keep it for the report
        with _stdout_to_stderr(), progress_lines("doctor") as say:
            return run_cluster(opts, ray_address, timeout=cluster_timeout_s, progress=say)
    from rocmstack.doctor.runner import run_doctor

    out = args.output
    interactive = not (out.json_out or out.markdown or args.fleet.slurm) and sys.stderr.isatty()
    if opts.level == 1:  # seconds: no progress lines
        if interactive:
            with stderr().status(f"running {count} checks..."):
                return run_doctor(opts)
        with _stdout_to_stderr():
            return run_doctor(opts)
    with _stdout_to_stderr(), progress_lines("doctor") as say:  # Ray and NCCL may print on stdout
        return run_doctor(opts, progress=say)
