"""The doctor as a Slurm hook (``rocmstack doctor --slurm healthcheck|prolog|epilog``).

On a failure the node is drained with a reason that names the check (``rocmstack: <id>: <one line>``); once
the checks pass again, a node is resumed only if that prefix says rocmstack drained it: a node an admin
drained keeps its state and reason. Slurm reads the hooks differently (slurm.conf(5)): a non-zero Prolog or
Epilog makes slurmd drain the node itself (and requeue the job of a failed Prolog), so those hooks exit 1 on
a failure; the exit code of a HealthCheckProgram is not read, so it exits 0 once it has acted, and non-zero
only when it could not reach slurmctld.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from rocmstack.errors import EngineError, printable

HOOKS = ("healthcheck", "prolog", "epilog")
REASON_PREFIX = "rocmstack: "
REASON_MAX = 200  # slurmctld keeps the whole string; sinfo and squeue cut it, so keep it readable
SCONTROL_TIMEOUT = 20.0
# `scontrol show node -o` ends the reason with " [user@time]"
_REASON_TAIL = re.compile(r"\s*\[[^\]@]*@[^\]]*\]\s*$")


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str  # e.g. IDLE, IDLE+DRAIN, MIXED+DRAIN, DOWN+DRAIN
    reason: str  # without Slurm's " [user@time]" tail; "" when none

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.state.split("+") or self.state.upper().startswith("DRAIN")

    @property
    def drained_by_us(self) -> bool:
        return self.drained and self.reason.startswith(REASON_PREFIX)


@dataclass(frozen=True)
class Outcome:
    action: str  # "drained", "resumed", "kept-drained", "left-admin-drain", "none"
    lines: tuple[str, ...]  # one per failure, as written to syslog and stdout
    exit_code: int


def node_name(given: str | None, env: dict[str, str]) -> str:
    """The Slurm name of this node: --node, else $SLURMD_NODENAME (set in Prolog/Epilog), else the short
    host name (what slurmd registers unless NodeHostName says otherwise)."""
    return given or env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def _scontrol(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("scontrol", path=env.get("PATH"))
    if exe is None:
        raise EngineError("scontrol is not on the PATH", fix="install slurm-client (Debian: slurm-client)")
    try:
        return subprocess.run(
            [exe, *args], capture_output=True, text=True, env=env, timeout=SCONTROL_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        raise EngineError(
            f"scontrol {' '.join(args[:2])} did not answer in {SCONTROL_TIMEOUT:g} s",
            fix="check that slurmctld is up (scontrol ping)",
        ) from None


def _said(run: subprocess.CompletedProcess[str]) -> str:
    """scontrol's last line: its verdict (the lines before say how it got there)."""
    lines = [line.strip() for line in (run.stderr or run.stdout).splitlines() if line.strip()]
    return lines[-1][:200] if lines else f"exit {run.returncode}"


def parse_node(text: str, name: str) -> NodeState:
    """``scontrol show node NAME -o`` (one line of Key=Value; Reason= comes last and holds spaces)."""
    state = re.search(r"(?:^|\s)State=(\S+)", text)
    reason = re.search(r"(?:^|\s)Reason=(.*)$", text.strip())
    return NodeState(
        name,
        state.group(1) if state else "UNKNOWN",
        _REASON_TAIL.sub("", reason.group(1)) if reason else "",
    )


def query(name: str, env: dict[str, str]) -> NodeState:
    run = _scontrol(["show", "node", name, "--oneliner"], env)
    if run.returncode != 0:
        raise EngineError(
            f"scontrol show node {name}: {_said(run)}",
            fix="give the node's Slurm name with --node, and check that slurmctld is up",
        )
    return parse_node(run.stdout, name)


def _update(name: str, env: dict[str, str], *fields: str) -> None:
    run = _scontrol(["update", f"nodename={name}", *fields], env)
    if run.returncode != 0:
        raise EngineError(
            f"scontrol update nodename={name} {fields[0]}: {_said(run)}",
            fix="run the hook as root or SlurmUser (scontrol update needs an operator)",
        )


def failure_lines(report: dict) -> list[str]:
    """One line per failing check: ``rocmstack: <id>: <summary>``, printable and bounded."""
    return [
        printable(f"{REASON_PREFIX}{c['id']}: {c['summary']}")[:REASON_MAX]
        for c in report.get("checks", [])
        if c["status"] in ("fail", "error")
    ]


def act(
    report: dict,
    hook: str,
    name: str,
    env: dict[str, str],
    log: Callable[[str], None],
) -> Outcome:
    """Drain or resume ``name`` by the report's verdict; never touches a drain someone else set."""
    lines = failure_lines(report)
    for line in lines:
        log(line)
    node = query(name, env)
    bad = 1 if hook in ("prolog", "epilog") else 0
    if lines:
        more = f" (+{len(lines) - 1} more)" if len(lines) > 1 else ""
        reason = (lines[0][: REASON_MAX - len(more)] + more).replace("\n", " ")
        if node.drained and not node.drained_by_us:
            log(f"rocmstack: node {name} stays drained by someone else ({node.reason or 'no reason'})")
            return Outcome("left-admin-drain", tuple(lines), bad)
        _update(name, env, "state=drain", f"reason={reason}")
        log(f"rocmstack: drained node {name}: {reason}")
        return Outcome("drained" if not node.drained else "kept-drained", tuple(lines), bad)
    if node.drained_by_us:
        try:
            _update(name, env, "state=resume")
        except EngineError:
            # Another hook on this node (the Epilog after a failed Prolog, a health check) may have resumed
            # it between the query and the update: Slurm then refuses with "Invalid node state specified".
            if query(name, env).drained:
                raise
            log(f"rocmstack: node {name} was resumed meanwhile (checks pass)")
            return Outcome("none", (), 0)
        log(f"rocmstack: resumed node {name} (checks pass; it was drained by rocmstack: {node.reason})")
        return Outcome("resumed", (), 0)
    return Outcome("none", (), 0)


def syslog_writer(hook: str) -> Callable[[str], None]:
    """A line to syslog (LOG_DAEMON, ident rocmstack-<hook>) where the platform has one; no-op otherwise."""
    try:
        import syslog
    except ImportError:  # pragma: no cover - not on Linux
        return lambda _line: None

    def write(line: str) -> None:
        syslog.openlog(f"rocmstack-{hook}", syslog.LOG_PID, syslog.LOG_DAEMON)
        syslog.syslog(syslog.LOG_WARNING, line)

    return write
