"""The doctor as a Slurm hook (``rocmstack doctor --slurm healthcheck|prolog|epilog``).

On a failure the node is drained with a reason that names whose problem it is and the check
(``[node_problem] rocmstack: <id>: <one line>``, or ``[user_problem]``: rocmstack.doctor.problems). The
hook only ever acts on a node in service (IDLE, MIXED, ALLOCATED) or one it drained itself: a state or reason
someone else set (DOWN, FAIL, a maintenance reservation, a reboot, another drain) is left exactly as it is. A
node rocmstack drained is resumed only when the check named in its reason ran in this run and passed, and
nothing failed; a run that judged nothing (every check skipped) neither drains nor resumes.

Slurm reads the hooks differently (slurm.conf(5)): a non-zero Prolog or Epilog makes slurmd drain the node
itself (and requeue the job of a failed Prolog), so those hooks exit 1 on a failure; the exit code of a
HealthCheckProgram is not read, so it exits 0 once it has acted, and non-zero only when it could not reach
slurmctld.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rocmstack.doctor.model import GpuScope
from rocmstack.errors import EngineError, ExitCode, InputError, printable, quoted
from rocmstack.platform.tools import run_tool

HOOKS = ("healthcheck", "prolog", "epilog")
REASON_PREFIX = "rocmstack: "
REASON_MAX = 200  # slurmctld keeps the whole string; sinfo and squeue cut it, so keep it readable
SCONTROL_TIMEOUT = 20.0  # one call's limit
HOOK_SCONTROL_S = 30.0  # all of a hook's scontrol calls together, when no --budget says otherwise
SCOPE_SCONTROL_S = 10.0  # of which the reads before the checks (the GPUs jobs hold)
# What slurmd sets in a Prolog/Epilog's environment for the job's GPUs (gres_common_prep_set_env in Slurm's
# src/plugins/gres/common/gres_common.c; which vendor variables depends on gres.conf's Flags). They are the
# job's allocation, not the node's configuration: a hook judges the node without them.
JOB_GPU_VARS = (
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "ZE_AFFINITY_MASK",
    "GPU_DEVICE_ORDINAL",
    "SLURM_JOB_GPUS",
)
# State words of a node in service, or one drained (by whoever: the reason tells), as `scontrol show node`
# joins them (IDLE+DRAIN, MIXED+COMPLETING, ALLOCATED+RESERVED). Any other word (DOWN, FAIL, MAINTENANCE,
# REBOOT_REQUESTED, REBOOT_ISSUED, POWERED_DOWN, FUTURE, UNKNOWN, ...) is a state someone else owns.
IN_SERVICE = frozenset(
    {
        "IDLE",
        "MIXED",
        "ALLOCATED",
        "ALLOC",
        "COMPLETING",
        "DRAIN",
        "DRAINING",
        "DRAINED",
        "NOT_RESPONDING",  # a missed ping, for a moment
        "RESERVED",  # in a reservation that is not a maintenance one (that adds MAINTENANCE)
        "PLANNED",
        "CLOUD",
    }
)
JUDGED = ("pass", "warn", "fail", "error")
# `scontrol show node -o` ends the reason with " [user@time]"
_REASON_TAIL = re.compile(r"\s*\[[^\]@]*@[^\]]*\]\s*$")
_REASON_CHECK = re.compile(r"^rocmstack: ([A-Za-z0-9][A-Za-z0-9_.-]*): ")
# "[node_problem] " or "[user_problem] " before the prefix; reasons of earlier releases have none
_REASON_TAG = re.compile(r"^\[(node|user)_problem\] ")
# What a remediation adds to the reason it drains or reboots with; Slurm's own words (" : reboot issued :
# reboot complete") follow it after a reboot. The reason carries the count across the reboot: nothing on the node.
_REMEDY = re.compile(r" \(remediation (\d+) of (\d+): (reboot|GPU reset)\)")
GAVE_UP = " - remediation did not help"
REBOOTING = frozenset({"REBOOT_REQUESTED", "REBOOT_ISSUED"})


def untagged(reason: str) -> str:
    """A reason without its leading problem class."""
    return _REASON_TAG.sub("", reason, count=1)


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str  # e.g. IDLE, IDLE+DRAIN, MIXED+DRAIN, DOWN, IDLE+FAIL, IDLE+MAINTENANCE+RESERVED
    reason: str  # without Slurm's " [user@time]" tail; "" when none

    @property
    def words(self) -> tuple[str, ...]:
        return tuple(w for w in self.state.upper().split("+") if w)

    @property
    def drained(self) -> bool:
        return any(w in ("DRAIN", "DRAINING", "DRAINED") for w in self.words)

    @property
    def drained_by_us(self) -> bool:
        return self.drained and untagged(self.reason).startswith(REASON_PREFIX) and not self.foreign

    @property
    def remediation(self) -> tuple[int, int, str] | None:
        """(try, of, "reboot" or "GPU reset") of the remediation rocmstack's reason names; None when none."""
        if not untagged(self.reason).startswith(REASON_PREFIX):
            return None
        found = _REMEDY.search(self.reason)
        return (int(found.group(1)), int(found.group(2)), found.group(3)) if found else None

    @property
    def rebooting_by_us(self) -> bool:
        """Slurm is rebooting the node for a remediation of rocmstack's (``scontrol reboot`` by a hook)."""
        rem = self.remediation
        return bool(set(self.words) & REBOOTING) and rem is not None and rem[2] == "reboot"

    @property
    def down_after_our_reboot(self) -> bool:
        """Back from rocmstack's reboot and held DOWN (``nextstate=DOWN``) until a check judges it again."""
        rem = self.remediation
        return (
            "DOWN" in self.words
            and not set(self.words) & REBOOTING
            and rem is not None
            and rem[2] == "reboot"
            and set(self.words) <= IN_SERVICE | {"DOWN"}
        )

    @property
    def out_by_us(self) -> bool:
        """Out of service by rocmstack: drained, rebooting or back down from a reboot, by its reason."""
        ours = untagged(self.reason).startswith(REASON_PREFIX)
        return (self.drained and ours) or self.rebooting_by_us or self.down_after_our_reboot

    @property
    def problem(self) -> str | None:
        """The class of a reason rocmstack wrote ("node" or "user"); None for any other, or an untagged old one."""
        found = _REASON_TAG.match(self.reason) if self.drained_by_us else None
        return found.group(1) if found else None

    @property
    def foreign(self) -> tuple[str, ...]:
        """The state words rocmstack never sets and never clears (DOWN, FAIL, MAINTENANCE, REBOOT_...)."""
        return tuple(w for w in self.words if w not in IN_SERVICE) or (() if self.words else ("UNKNOWN",))

    @property
    def drained_for(self) -> str | None:
        """The check whose failure drained the node (``rocmstack: <id>: ...``); None when not ours."""
        ours = self.drained_by_us or self.down_after_our_reboot
        found = _REASON_CHECK.match(untagged(self.reason)) if ours else None
        return found.group(1) if found else None


# Job states whose resources are still held on their nodes (squeue(1)'s JOB STATE CODES): their GPUs are theirs
HOLDING = frozenset(
    {"RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "STOPPED", "SIGNALING", "STAGE_OUT", "RESIZING"}
)
_JOB_ID = re.compile(r"^JobId=(\d+)")
_JOB_STATE = re.compile(r"(?:^|\s)JobState=(\S+)")
# `scontrol show job -d -o`: one group per node set, e.g. "Nodes=gpu[01-02] CPU_IDs=0-3 Mem=0 GRES=gpu:1(IDX:0)"
# (Slurm 21.08 on; before, "GRES_IDX=gpu(IDX:0)")
_JOB_NODES = re.compile(r"(?:^|\s)Nodes=(\S+) CPU_IDs=\S* Mem=\S*(?: GRES(?:_IDX)?=(\S*))?")
# one GRES of a group: name[:type][:count](IDX:0-1,3), the first item of a "gpu:mi300x:2(IDX:0-1),nic:1(IDX:0)"
_GRES_IDX = re.compile(r"(?:^|,)([A-Za-z_][\w]*)(?::[^(,]*)*\(IDX:([0-9,\-]*)\)")
MAX_RANGE = 1 << 16  # a host range longer than any cluster's is taken as written, not expanded
_RANGE_PART = re.compile(r"^(\d+)(?:-(\d+))?$")


@dataclass(frozen=True)
class Job:
    id: str
    state: str
    gpus: tuple[int, ...]  # on this node: the gres indexes Slurm gave it (IDX:), the order of gres.conf


@dataclass(frozen=True)
class Decision:
    action: str  # "drain", "resume", "kept-drained", "left-as-is", "judged-nothing", "none"
    message: str  # the line logged for it; "" for "none"


@dataclass(frozen=True)
class Outcome:
    action: str  # "drained", "resumed", "kept-drained", "left-as-is", "judged-nothing", "none", "held-back"
    lines: tuple[str, ...]  # one per failure, as written to syslog and stdout
    exit_code: int


# Where a tripped breaker is kept: it stays open (no hook takes a node out) until a person resets it.
BREAKER_FILE = Path("/var/lib/rocmstack/breaker.json")


@dataclass(frozen=True)
class Breaker:
    """The fleet's circuit breaker: before a hook takes a node out, the nodes of its partitions that rocmstack
    already has out are counted; past the cap it takes none out and the breaker opens (the file), until
    ``--breaker-reset``. The cap is the smaller of ``max_share`` of the partitions' nodes (at least one node)
    and ``max_nodes``."""

    max_share: float = 0.1
    max_nodes: int | None = None
    file: Path = BREAKER_FILE

    def cap(self, total: int) -> int:
        by_share = max(1, math.floor(self.max_share * total + 1e-9))
        return by_share if self.max_nodes is None else min(by_share, self.max_nodes)


@dataclass(frozen=True)
class Remedy:
    """``--remediate``: a node problem is repaired through Slurm, at most ``tries`` times in a row. With the
    site's ``gpu_reset`` command and no job on the node, a GPU reset first; else ``scontrol reboot ASAP
    nextstate=DOWN`` (slurm.conf's RebootProgram): back from it, the node stays DOWN until the next health check
    finds the check that drained it passing (``nextstate=RESUME`` would put it back in service at slurmd's
    registration, whatever that check says: Slurm 22.05 clears a drain set by slurmd's start-up health check)."""

    tries: int = 2
    gpu_reset: tuple[str, ...] = ()
    timeout: float = 300.0  # the GPU reset command's limit


@dataclass(frozen=True)
class FleetNode:
    state: NodeState
    partitions: tuple[str, ...]


def node_name(given: str | None, env: Mapping[str, str]) -> str:
    """The Slurm name of this node: --node, else $SLURMD_NODENAME (set in Prolog/Epilog), else the short
    host name (what slurmd registers unless NodeHostName says otherwise)."""
    return given or env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def job_allocation(env: Mapping[str, str]) -> dict[str, str]:
    """The job's GPU allocation slurmd put into a hook's environment (JOB_GPU_VARS that are set)."""
    return {k: env[k] for k in JOB_GPU_VARS if k in env}


def judged_nothing(report: dict) -> bool:
    """True when no check reached a verdict (all skipped, e.g. over the --budget)."""
    return not any(c.get("status") in JUDGED for c in report.get("checks", []))


def _scontrol(args: list[str], env: dict[str, str], deadline: float) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("scontrol", path=env.get("PATH"))
    if exe is None:
        raise EngineError("scontrol is not on the PATH", fix="install slurm-client (Debian: slurm-client)")
    what = " ".join(args[:2])
    left = deadline - time.monotonic()
    if left <= 0:
        raise EngineError(
            f"scontrol {what}: no time left of the hook's time limit",
            fix="give the hook a larger --budget (it must leave time to reach slurmctld)",
        )
    limit = min(SCONTROL_TIMEOUT, left)
    # its own session: on a time-out the whole group goes, a wrapper script's children with it
    proc = subprocess.Popen(
        [exe, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise EngineError(
            f"scontrol {what} did not answer in {limit:.3g} s",
            fix="check that slurmctld is up (scontrol ping)",
        ) from None
    return subprocess.CompletedProcess([exe, *args], proc.returncode, out, err)


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


def parse_fleet(text: str) -> list[FleetNode]:
    """Every node of ``scontrol show node -o`` (one line each) with its partitions."""
    out = []
    for line in text.splitlines():
        found = re.match(r"^NodeName=(\S+)", line.strip())
        if not found:
            continue
        parts = re.search(r"(?:^|\s)Partitions=(\S+)", line)
        out.append(
            FleetNode(
                parse_node(line, found.group(1)),
                tuple(p for p in parts.group(1).split(",") if p) if parts else (),
            )
        )
    return out


def out_by_us(fleet: list[FleetNode], name: str) -> tuple[list[str], list[str], int]:
    """(this node's partitions, the other nodes of them rocmstack has taken out, how many nodes they hold)."""
    mine = next((n.partitions for n in fleet if n.state.name == name), ())
    peers = [n for n in fleet if set(n.partitions) & set(mine)] if mine else fleet
    # a node rocmstack drained stays out by rocmstack whatever else happened to it since (DOWN, a reboot)
    out = [n.state.name for n in peers if n.state.name != name and n.state.out_by_us]
    return list(mine), out, len(peers)


def breaker_record(breaker: Breaker) -> dict | None:
    """The open breaker's record, or None when it is closed (no file). An unreadable record counts as open."""
    try:
        text = breaker.file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        return {"opened_by": "?", "why": f"{breaker.file}: {exc.strerror or exc}"}
    try:
        data = json.loads(text)
    except ValueError:
        return {"opened_by": "?", "why": f"{breaker.file} is not a breaker record"}
    return data if isinstance(data, dict) else {"opened_by": "?", "why": "not a breaker record"}


def open_breaker(breaker: Breaker, record: dict) -> None:
    breaker.file.parent.mkdir(parents=True, exist_ok=True)
    tmp = breaker.file.with_name(f".{breaker.file.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, breaker.file)  # a reader sees the whole record or none


def reset_breaker(breaker: Breaker) -> dict | None:
    """Close the breaker: the record it held, or None when it was not open."""
    record = breaker_record(breaker)
    try:
        breaker.file.unlink()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(
            f"--breaker-file {printable(str(breaker.file))}: {exc.strerror or exc}",
            fix="run it as the user the hooks run as (root)",
        ) from None
    return record


def _held_back(name: str, breaker: Breaker, record: dict, reason: str) -> str:
    return (
        f"rocmstack: circuit breaker open ({printable(str(record.get('why', '')))}): node {name} is NOT drained "
        f"for {printable(reason)}; a person resets it with `rocmstack doctor --breaker-reset "
        f"--breaker-file {breaker.file}`"
    )


def query(name: str, env: dict[str, str], deadline: float) -> NodeState:
    run = _scontrol(["show", "node", name, "--oneliner"], env, deadline)
    if run.returncode != 0:
        raise EngineError(
            f"scontrol show node {name}: {_said(run)}",
            fix="give the node's Slurm name with --node, and check that slurmctld is up",
        )
    return parse_node(run.stdout, name)


def _update(name: str, env: dict[str, str], deadline: float, *fields: str) -> None:
    run = _scontrol(["update", f"nodename={name}", *fields], env, deadline)
    if run.returncode != 0:
        raise EngineError(
            f"scontrol update nodename={name} {fields[0]}: {_said(run)}",
            fix="run the hook as root or SlurmUser (scontrol update needs an operator)",
        )


def expand_hostlist(expr: str) -> list[str]:
    """Slurm's host list syntax: "gpu[01-03,07],login1" -> gpu01 gpu02 gpu03 gpu07 login1 (zero padding
    kept; more than one bracket, "r[1-2]n[1-2]", multiplies out)."""
    names: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(expr + ","):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            if expr[start:i]:
                names.extend(_expand_one(expr[start:i]))
            start = i + 1
    return names


def _expand_one(name: str) -> list[str]:
    open_at = name.find("[")
    close_at = name.find("]", open_at)
    if open_at < 0 or close_at < 0:
        return [name]
    head, body, tail = name[:open_at], name[open_at + 1 : close_at], name[close_at + 1 :]
    out: list[str] = []
    for part in body.split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()) or int(hi or lo) - int(lo) > MAX_RANGE:
            return [name]  # not a range we know: the name as written
        for n in range(int(lo), int(hi or lo) + 1):
            out.extend(head + str(n).zfill(len(lo)) + rest for rest in _expand_one(tail))
    return out


def index_list(text: str) -> tuple[int, ...]:
    """ "0-1,3" -> (0, 1, 3): an IDX list, SLURM_JOB_GPUS or a mask of plain indexes; () when not one."""
    out: list[int] = []
    for part in text.split(","):
        found = _RANGE_PART.match(part.strip())
        if not found:
            return ()
        lo, hi = int(found.group(1)), int(found.group(2) or found.group(1))
        out.extend(range(lo, hi + 1))
    return tuple(dict.fromkeys(out))


def parse_jobs(text: str, node: str) -> list[Job]:
    """The jobs of ``scontrol show job -d -o`` that hold resources on ``node``, each with its GPUs there."""
    jobs = []
    for line in text.splitlines():
        job_id, state = _JOB_ID.match(line), _JOB_STATE.search(line)
        if not job_id or not state or state.group(1).upper() not in HOLDING:
            continue
        gpus: list[int] = []
        here = False
        for nodes, gres in _JOB_NODES.findall(line):
            if node not in expand_hostlist(nodes):
                continue
            here = True
            for name, idx in _GRES_IDX.findall(gres or ""):
                if name == "gpu":
                    gpus.extend(index_list(idx))
        if here:
            jobs.append(Job(job_id.group(1), state.group(1).upper(), tuple(dict.fromkeys(gpus))))
    return jobs


def parse_listpids(text: str) -> dict[int, str]:
    """``scontrol listpids``: pid -> job id of every process slurmd's steps track on this node."""
    pids = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0].isdigit() and fields[1].isdigit():
            pids[int(fields[0])] = fields[1]
    return pids


def gres_tracks_gpus(node_text: str) -> bool:
    """Whether Slurm gives out this node's GPUs: a gpu in its Gres= (``scontrol show node -o``)."""
    found = re.search(r"(?:^|\s)Gres=(\S+)", node_text)
    return found is not None and any(g.split(":")[0] == "gpu" for g in found.group(1).split(","))


def read_scope(
    hook: str, name: str, allocation: Mapping[str, str], env: dict[str, str], deadline: float
) -> GpuScope:
    """What this hook may judge, read from Slurm before any check runs: the jobs holding this node's GPUs
    (``scontrol show job -d``), their processes (``scontrol listpids``) and the hook's own job's GPUs."""
    node_run = _scontrol(["show", "node", name, "--oneliner"], env, deadline)
    if node_run.returncode != 0:
        raise EngineError(
            f"scontrol show node {name}: {_said(node_run)}",
            fix="give the node's Slurm name with --node, and check that slurmctld is up",
        )
    tracked = gres_tracks_gpus(node_run.stdout)
    jobs_run = _scontrol(["show", "job", "--details", "--oneliner"], env, deadline)
    if jobs_run.returncode != 0:
        raise EngineError(f"scontrol show job: {_said(jobs_run)}", fix="check that slurmctld is up")
    jobs = parse_jobs(jobs_run.stdout, name)
    # slurmd's own record of each step's processes; a node with no step answers 1 ("No job steps exist")
    pids = parse_listpids(_scontrol(["listpids"], env, deadline).stdout)
    own = env.get("SLURM_JOB_ID") if hook != "healthcheck" else None
    in_use: dict[int, tuple[str, ...]] = {}
    for job in jobs:
        if job.id != own:
            for gpu in job.gpus:
                in_use[gpu] = (*in_use.get(gpu, ()), job.id)
    judged: frozenset[int] | None = None
    if own is not None and tracked:
        given = index_list(allocation.get("SLURM_JOB_GPUS", ""))
        if not given:  # SLURM_JOB_GPUS is set for a job with GPUs; else ask slurmctld
            given = next((j.gpus for j in jobs if j.id == own), ())
        judged = frozenset(given)
    return GpuScope(
        hook=hook,
        job=own,
        judged=judged,
        in_use=in_use,
        job_pids=pids,
        running=frozenset(j.id for j in jobs),
        tracked=tracked,
    )


def scope_deadline(budget_deadline: float | None) -> float:
    """When the reads before the checks must end: the --budget's end, else SCOPE_SCONTROL_S from now."""
    return time.monotonic() + SCOPE_SCONTROL_S if budget_deadline is None else budget_deadline


def scope_report(scope: GpuScope | None) -> dict | None:
    """The report's ``slurm.gpus``: which GPUs the hook judged and which it left to running jobs."""
    if scope is None:
        return None
    return {
        "job": scope.job,
        "judged": None if scope.judged is None else sorted(scope.judged),
        "in_use": {str(gpu): list(jobs) for gpu, jobs in sorted(scope.in_use.items())},
        "running_jobs": sorted(scope.running, key=int),
        "gres_tracks_gpus": scope.tracked,
    }


def scope_lines(scope: GpuScope) -> list[str]:
    """What the hook leaves to others, said once per run (syslog and stdout)."""
    lines = [
        f"rocmstack: GPU {gpu} is in use by {', '.join(f'job {j}' for j in jobs)}: left out of the memory "
        "and active checks"
        for gpu, jobs in sorted(scope.in_use.items())
        if scope.judged is None or gpu in scope.judged
    ]
    if scope.judged is not None:
        which = ", ".join(str(g) for g in sorted(scope.judged)) or "none on this node"
        lines.insert(0, f"rocmstack: judging job {scope.job}'s GPUs only: {which}")
    return lines


def failure_lines(report: dict) -> list[str]:
    """One line per failing check: ``[node_problem] rocmstack: <id>: <summary>``, printable and bounded."""
    return [
        printable(f"[{c.get('problem') or 'node'}_problem] {REASON_PREFIX}{c['id']}: {c['summary']}")[
            :REASON_MAX
        ]
        for c in report.get("checks", [])
        if c["status"] in ("fail", "error")
    ]


def drain_reason(lines: list[str]) -> str:
    more = f" (+{len(lines) - 1} more)" if len(lines) > 1 else ""
    return (lines[0][: REASON_MAX - len(more)] + more).replace("\n", " ")


def _nothing_judged(report: dict, name: str) -> str:
    return (
        f"rocmstack: the run judged nothing ({len(report.get('checks', []))} check(s), none ran): node {name} "
        "is neither drained nor resumed"
    )


def _marked(lines: list[str], marker: str) -> str:
    """The drain reason of ``lines`` with ``marker`` at its end, never cut off by REASON_MAX."""
    base = drain_reason(lines)
    return base[: REASON_MAX - len(marker)] + marker


def decide(report: dict, node: NodeState, remedy: Remedy | None = None, busy: bool = True) -> Decision:
    """What a hook does to ``node`` after this run (pure: the tests read every branch). With ``remedy``, a node
    problem is repaired (a GPU reset when the site gave one and the node is not ``busy``, else a reboot)."""
    name = node.name
    checks = report.get("checks", [])
    if judged_nothing(report):
        return Decision("judged-nothing", _nothing_judged(report, name))
    lines = failure_lines(report)
    if node.rebooting_by_us:
        return Decision(
            "left-as-is",
            f"rocmstack: node {name} is rebooting for rocmstack ({printable(node.reason)}): the health check "
            "after it judges it",
        )
    after = node.down_after_our_reboot
    if not after and (node.foreign or (node.drained and not node.drained_by_us)):
        said = f"reason {quoted(node.reason)}" if node.reason else "no reason"
        return Decision(
            "left-as-is",
            f"rocmstack: node {name} is left as it is: State={printable(node.state)} ({said}) was not set "
            "by rocmstack",
        )
    check = node.drained_for
    status = {c["id"]: c["status"] for c in checks}.get(check or "")
    if lines:
        if check is not None and status in (None, "skip"):
            # its fault may still be there: a new reason would lose the one check that can clear it
            return Decision(
                "kept-drained",
                f"rocmstack: node {name} stays {'down' if after else 'drained'} for {check} (not run in this "
                f"run): {printable(node.reason)}",
            )
        if check is not None:  # the check that drained it stays the one named
            lines = sorted(lines, key=lambda line: not untagged(line).startswith(f"{REASON_PREFIX}{check}: "))
        ours = node.drained_by_us or after
        rem = node.remediation if ours else None
        if ours and GAVE_UP in node.reason:
            return Decision("kept-drained", f"rocmstack: node {name} stays out: {printable(node.reason)}")
        if remedy is not None and lines[0].startswith("[node_problem] "):
            done = rem[0] if rem is not None else 0
            if done >= remedy.tries:
                # the last try's mark stays: back from a reboot the node is DOWN, and the mark says it is ours
                kind = rem[2] if rem is not None else "reboot"
                return Decision(
                    "drain",
                    _marked(lines, f" (remediation {done} of {done}: {kind}){GAVE_UP} ({done} tries)"),
                )
            # a GPU reset first where the site gave one and no job is on the node; a reboot after it, or instead
            reset = remedy.gpu_reset and not busy and not after and (rem is None or rem[2] != "GPU reset")
            kind = "GPU reset" if reset else "reboot"
            return Decision(
                "remediate", _marked(lines, f" (remediation {done + 1} of {remedy.tries}: {kind})")
            )
        if after:  # a user problem now, or no --remediate: it stays down for the check its reason names
            return Decision(
                "kept-drained", f"rocmstack: node {name} stays down for {check}: {printable(node.reason)}"
            )
        return Decision("drain", drain_reason(lines))
    if not (node.drained_by_us or after):
        return Decision("none", "")
    if check is None or status not in ("pass", "warn"):
        return Decision(
            "kept-drained",
            f"rocmstack: node {name} stays {'down' if after else 'drained'}: "
            f"{check or 'the check its reason names'}, which drained it, did not run in this run",
        )
    return Decision(
        "resume",
        # The reason is ours, so it starts with the prefix this line already has: quoted once, not twice.
        f"rocmstack: resumed node {name} ({check} passes; it was "
        f"{'rebooted' if after else 'drained'} for "
        f"{printable(untagged(node.reason).removeprefix(REASON_PREFIX))})",
    )


def check_breaker(
    name: str,
    reason: str,
    breaker: Breaker,
    env: dict[str, str],
    deadline: float,
    *,
    counting_self: bool = False,
) -> str | None:
    """None when ``name`` may be taken out (or, ``counting_self``, stay out); else the line that says why not
    (the breaker is then open)."""
    record = breaker_record(breaker)
    if record is None or counting_self:
        run = _scontrol(["show", "node", "-o"], env, deadline)
        if run.returncode != 0:
            raise EngineError(
                f"scontrol show node failed: {_said(run)}", fix="check that slurmctld is reachable"
            )
        parts, out, total = out_by_us(parse_fleet(run.stdout), name)
        cap = breaker.cap(total)
        if len(out) + 1 <= cap:
            return None
        if record is not None:  # opened meanwhile by another node: its record stands
            return _held_back(name, breaker, record, reason)
        where = f"partition {','.join(parts)}" if parts else "the cluster"
        record = {
            "opened_by": name,
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "why": f"{len(out)} of {total} node(s) of {where} already drained by rocmstack "
            f"({', '.join(out[:8])}{' ...' if len(out) > 8 else ''}), the cap is {cap}",
            "held_back": reason,
        }
        try:
            open_breaker(breaker, record)
        except OSError as exc:  # held back all the same; the next hook counts again
            record["why"] += f"; not kept in {breaker.file}: {exc.strerror or exc}"
    return _held_back(name, breaker, record, reason)


def act(
    report: dict,
    hook: str,
    name: str,
    env: dict[str, str],
    log: Callable[[str], None],
    deadline: float | None = None,
    breaker: Breaker | None = None,
    remedy: Remedy | None = None,
    busy: bool = True,
) -> Outcome:
    """Drain or resume ``name`` by the report's verdict; never touches a state someone else set. Every
    scontrol call ends by ``deadline`` (time.monotonic()), by default HOOK_SCONTROL_S from now. With a
    ``breaker``, a node in service is taken out only while the breaker is closed and the fleet under its cap.
    With a ``remedy``, a node problem is drained and repaired (Remedy); ``busy``: a job is on the node."""
    deadline = time.monotonic() + HOOK_SCONTROL_S - SCOPE_SCONTROL_S if deadline is None else deadline
    lines = failure_lines(report)
    for line in lines:
        log(line)
    bad = 1 if lines and hook in ("prolog", "epilog") else 0
    if judged_nothing(report):
        log(_nothing_judged(report, name))  # no scontrol call: nothing to act on
        return Outcome("judged-nothing", (), 0)
    node = query(name, env, deadline)
    decision = decide(report, node, remedy, busy)
    if decision.action in ("drain", "resume", "remediate"):
        # An admin (or another tool) may have set a state or reason since that read: read it again right
        # before the update, and act only when the same decision still holds on what is there now.
        now = query(name, env, deadline)
        if decision.action == "resume" and not now.out_by_us:
            log(f"rocmstack: node {name} was resumed meanwhile (checks pass)")
            return Outcome("none", (), 0)
        if now != node and decide(report, now, remedy, busy) != decision:
            log(
                f"rocmstack: node {name} changed meanwhile (State={printable(now.state)}, reason "
                f"{quoted(now.reason) if now.reason else 'none'}): left as it is"
            )
            return Outcome("left-as-is", tuple(lines), bad)
    taking_out = decision.action in ("drain", "remediate") and not node.out_by_us
    if taking_out and breaker is not None and not node.drained:
        held = check_breaker(name, decision.message, breaker, env, deadline)
        if held is not None:
            log(held)
            # a Prolog/Epilog that exits non-zero makes slurmd drain the node itself: held back means 0 there
            code = int(ExitCode.BREAKER_OPEN) if hook == "healthcheck" else 0
            return Outcome("held-back", tuple(lines), code)
    if decision.action in ("drain", "remediate"):
        _update(name, env, deadline, "state=drain", f"reason={decision.message}")
        if breaker is not None and taking_out and not node.drained:
            # hooks on other nodes may have drained theirs since the count: counted again, with this one out,
            # the fleet past the cap puts this node back and opens the breaker (the safe side of the race)
            held = check_breaker(name, decision.message, breaker, env, deadline, counting_self=True)
            if held is not None:
                _update(name, env, deadline, "state=resume")
                log(held)
                code = int(ExitCode.BREAKER_OPEN) if hook == "healthcheck" else 0
                return Outcome("held-back", tuple(lines), code)
        if decision.action == "remediate" and remedy is not None:
            return _remediate(name, decision.message, remedy, env, deadline, log, lines, bad)
        log(f"rocmstack: drained node {name}: {decision.message}")
        return Outcome("drained" if not node.out_by_us else "kept-drained", tuple(lines), bad)
    if decision.action == "resume":
        try:
            _update(name, env, deadline, "state=resume")
        except EngineError:
            # Another hook on this node (the Epilog after a failed Prolog, a health check) may have resumed
            # it between the query and the update: Slurm then refuses with "Invalid node state specified".
            if query(name, env, deadline).out_by_us:
                raise
            log(f"rocmstack: node {name} was resumed meanwhile (checks pass)")
            return Outcome("none", (), 0)
        log(decision.message)
        return Outcome("resumed", (), 0)
    if decision.message:
        log(decision.message)
    return Outcome(decision.action, tuple(lines), bad)


def _remediate(
    name: str,
    reason: str,
    remedy: Remedy,
    env: dict[str, str],
    deadline: float,
    log: Callable[[str], None],
    lines: list[str],
    bad: int,
) -> Outcome:
    """The node is drained with ``reason``, which names the remediation: a GPU reset (the site's command, the
    node judged again by the next health check) or, when there is none or it fails, Slurm's reboot."""
    if "GPU reset)" in reason:
        reset = run_tool(list(remedy.gpu_reset), timeout=remedy.timeout)
        if reset.ok:
            log(
                f"rocmstack: drained node {name} and reset its GPUs ({printable(shlex.join(remedy.gpu_reset))}): "
                f"{reason}; the next health check resumes it if the check passes"
            )
            return Outcome("gpu-reset", tuple(lines), bad)
        log(
            f"rocmstack: GPU reset of node {name} failed ({printable(shlex.join(remedy.gpu_reset))}: "
            f"{printable(reset.reason())}): rebooting instead"
        )
        reason = reason.replace(": GPU reset)", ": reboot)")
    # ASAP: Slurm drains it, lets its jobs end, then runs RebootProgram; nextstate=DOWN (Remedy says why)
    run = _scontrol(["reboot", "ASAP", "nextstate=DOWN", f"reason={reason}", name], env, deadline)
    if run.returncode != 0:
        raise EngineError(
            f"scontrol reboot {name} failed: {_said(run)}",
            fix="check RebootProgram in slurm.conf and that the hook runs as root (SlurmdUser)",
        )
    log(f"rocmstack: drained node {name} and asked Slurm to reboot it: {reason}")
    return Outcome("rebooting", tuple(lines), bad)


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
