"""The doctor run as a Slurm hook, around its checks: the fleet flags, what the hook reads before the checks
(the job's allocation, the GPUs running jobs hold) and what it does after them (drain, resume, repair).

``rocmstack doctor --slurm HOOK`` parses its options and calls these in order: ``fleet_settings``,
``check_hook``, ``start``, ``read_gpus``, then ``finish``, whose return is the process's exit code.
rocmstack.doctor.slurm holds the Slurm side itself (scontrol, the drain reasons, the breaker)."""

from __future__ import annotations

import os
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rocmstack.doctor.model import GpuScope
from rocmstack.doctor.slurm import (
    HOOKS,
    Breaker,
    Remedy,
    act,
    breaker_record,
    job_allocation,
    node_name,
    read_scope,
    reset_breaker,
    scope_deadline,
    scope_lines,
    scope_report,
    syslog_writer,
)
from rocmstack.errors import InputError, quoted
from rocmstack.output import print_json


def fleet_settings(
    *,
    breaker_share: float,
    breaker_max: int | None,
    breaker_file: Path,
    remediate: bool,
    remediate_tries: int,
    gpu_reset_cmd: str | None,
) -> tuple[Breaker, Remedy | None]:
    """The circuit breaker and the remedy (None without --remediate) the flags give, or InputError."""
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
    return breaker, Remedy(tries=remediate_tries, gpu_reset=reset_argv) if remediate else None


def reset_and_say(breaker: Breaker, as_json: bool) -> None:
    """``--breaker-reset``: close the breaker and say on stdout what it held."""
    held = reset_breaker(breaker)
    if as_json:
        print_json({"breaker_file": str(breaker.file), "was_open": held is not None, "record": held})
    elif held is None:
        sys.stdout.write(f"rocmstack: the circuit breaker at {breaker.file} was not open\n")
    else:
        sys.stdout.write(
            f"rocmstack: circuit breaker at {breaker.file} reset; it held: {held.get('why', '?')} "
            f"(opened by {held.get('opened_by', '?')} at {held.get('at', '?')})\n"
        )


def check_hook(hook: str | None, node: str | None, ray_address: str | None) -> None:
    """--slurm names a hook and runs on this node; --node goes with it. InputError otherwise."""
    if hook is not None and hook not in HOOKS:
        raise InputError(f"--slurm {quoted(hook)} is not a hook", fix=f"one of {', '.join(HOOKS)}")
    if hook is not None and ray_address:
        raise InputError("--slurm runs on the node itself", fix="drop --ray-address")
    if node is not None and hook is None:
        raise InputError("--node names the Slurm node of --slurm", fix="add --slurm healthcheck")


@dataclass(frozen=True)
class Hook:
    """A hook's run: which hook, the node's name as given (--node), the fleet's breaker, the remedy (None:
    drain only), whether stdout is the JSON report (then its lines go to syslog only), the job's allocation
    slurmd gave it and when its scontrol calls must end (None: the hook's own cap)."""

    name: str
    node: str | None
    breaker: Breaker
    remedy: Remedy | None
    as_json: bool
    allocation: dict[str, str]
    deadline: float | None

    def log(self, line: str) -> None:
        syslog_writer(self.name)(line)
        if not self.as_json:
            sys.stdout.write(line + "\n")


def start(
    name: str,
    node: str | None,
    breaker: Breaker,
    remedy: Remedy | None,
    as_json: bool,
    budget_s: float | None,
) -> Hook:
    """The hook's run from here: its scontrol calls end with the budget, counted from now. Takes the job's
    allocation out of this process's environment (see below)."""
    deadline = None if budget_s is None else time.monotonic() + budget_s
    # slurmd sets the job's GPUs (ROCR_VISIBLE_DEVICES, ...) in a Prolog/Epilog's environment: the
    # job's allocation, not the node's configuration. The probes and Ray's workers inherit this
    # process's environment, so they leave it here, and the report keeps them as the allocation.
    allocation = job_allocation(os.environ)
    for var in allocation:
        del os.environ[var]
    return Hook(name, node, breaker, remedy, as_json, allocation, deadline)


def read_gpus(hook: Hook) -> GpuScope:
    """What this hook may judge (its job's GPUs, the GPUs running jobs hold), read before any check; what
    it leaves to others is said once, to syslog and stdout."""
    env = dict(os.environ)
    scope = read_scope(
        hook.name, node_name(hook.node, env), hook.allocation, env, scope_deadline(hook.deadline)
    )
    for line in scope_lines(scope):
        hook.log(line)
    return scope


def finish(
    hook: Hook,
    scope: GpuScope | None,
    report: dict,
    prometheus: Path | None,
    allow_shared_dir: bool,
) -> int:
    """Act on the report (drain, resume, repair), keep what was done in ``report["slurm"]``, write the
    --prometheus file (a hook writes it once it has acted) and, with --json, the report. The exit code."""
    env = dict(os.environ)
    # a job on the node (or jobs Slurm does not track there): no GPU reset, only Slurm's reboot after it
    busy = scope is None or not scope.tracked or bool(scope.running)
    outcome = act(
        report,
        hook.name,
        node_name(hook.node, env),
        env,
        hook.log,
        hook.deadline,
        hook.breaker,
        hook.remedy,
        busy,
    )
    record = breaker_record(hook.breaker)
    report["slurm"] = {
        "hook": hook.name,
        "action": outcome.action,
        "lines": list(outcome.lines),
        "allocation": hook.allocation,
        "gpus": scope_report(scope),
        "breaker": {"open": record is not None, "file": str(hook.breaker.file), "record": record},
    }
    if prometheus is not None:
        from rocmstack.doctor.prometheus import write_textfile

        write_textfile(prometheus, report, allow_shared_dir)
    if hook.as_json:
        print_json(report)
    sys.stdout.flush()
    return outcome.exit_code
