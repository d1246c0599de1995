"""The doctor's value types: options in, one result per check out. Plain frozen dataclasses."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocmstack.contract import image_root
from rocmstack.status import Status

if TYPE_CHECKING:
    from rocmstack.platform.snapshot import Snapshot

SCHEMA = "rocmstack.doctor/2"  # bump the suffix on any incompatible change of the JSON report
# Read too (older images and nodes write it): its verdict was ``ok`` (and a cluster node's state "ok").
EARLIER = "rocmstack.doctor/1"


def verdict_renamed(record: Mapping[str, Any]) -> dict[str, Any]:
    """RECORD (a report, a node's facts, a history line) of schema 1 with its verdict ``ok`` as ``passed``."""
    return {("passed" if k == "ok" else k): v for k, v in record.items()}


@dataclass(frozen=True)
class Result:
    status: Status
    summary: str
    details: tuple[str, ...] = ()
    fix: str | None = None
    data: Mapping[str, Any] | None = None  # measured figures a machine reads (Prometheus, --history)
    # whose problem a failure is, where the finding decides it: "node" (a repair of the node: reset, reboot)
    # or "user" (what a job or its image left or set); None: the check's own class (problems.yaml)
    problem: str | None = None


def passed(summary: str, *details: str) -> Result:
    return Result(Status.PASS, summary, tuple(details))


def warned(summary: str, *details: str, fix: str | None = None, problem: str | None = None) -> Result:
    return Result(Status.WARN, summary, tuple(details), fix, problem=problem)


def failed(summary: str, *details: str, fix: str | None = None, problem: str | None = None) -> Result:
    return Result(Status.FAIL, summary, tuple(details), fix, problem=problem)


def skipped(summary: str, *details: str) -> Result:
    return Result(Status.SKIP, summary, tuple(details))


def errored(summary: str, *details: str, fix: str | None = None) -> Result:
    return Result(Status.ERROR, summary, tuple(details), fix)


def probe_problem(snap: Snapshot, name: str, label: str, *, fix: str) -> Result | None:
    """A skip when probe ``name`` did not run, an error when it crashed; None when its data is there."""
    result = snap.probes.get(name)
    if result is None:
        return skipped(f"{label} probe not run: {snap.not_run.get(name, 'not requested')}")
    if result.data is None:
        return errored(result.reason(), fix=fix)
    return None


@dataclass(frozen=True)
class Check:
    """One check: a stable id (never renamed: CI filters on it), a group, a pure function of a snapshot."""

    id: str
    group: str
    title: str
    run: Callable[[Any, DoctorOptions], Result]  # a Snapshot (scope "node") or the cluster data ("cluster")
    source: str  # where the failure mode is documented
    needs: frozenset[str] = (
        frozenset()
    )  # probes ("torch", "ray", "vllm", "amdsmi", "nvml"), "tools"/"partition", active probes (level 2)
    level: int = (
        1  # the least --level that runs it: 1 static, 2 active on this node, 3 the cluster, 4 burn-in
    )
    scope: str = "node"  # "cluster": run once by the cluster driver over every node's report (level 3)


@dataclass(frozen=True)
class GpuScope:
    """The GPUs a Slurm hook may judge, read from Slurm before any check runs (rocmstack.doctor.slurm).

    A busy node is a fleet's normal state: a GPU a running job was given, or one a running job's process
    holds, is that job's, and no check judges it nor probes it. The Prolog judges only its job's GPUs, the
    Epilog only the GPUs of the job that ended (whose processes left on them are leftovers)."""

    hook: str  # "healthcheck", "prolog" or "epilog"
    job: str | None = None  # the Prolog's or Epilog's job
    # the GPUs (physical index) this run judges; None: every GPU but those in use (the health check)
    judged: frozenset[int] | None = None
    # GPU -> the running jobs Slurm gave it; pid -> the running job it belongs to
    in_use: Mapping[int, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    job_pids: Mapping[int, str] = dataclasses.field(default_factory=dict)
    running: frozenset[str] = frozenset()  # the jobs running (or completing) on this node
    tracked: bool = True  # Slurm gives out this node's GPUs (a gpu gres): a job's GPUs are known

    def judges(self, gpu: int) -> bool:
        # a Prolog's or Epilog's job's own GPUs are judged whoever holds them; a health check leaves jobs theirs
        return gpu in self.judged if self.judged is not None else gpu not in self.in_use

    def why_not(self, gpu: int) -> str:
        """Why GPU ``gpu`` is not judged (only when ``judges`` is False)."""
        if gpu in self.in_use:
            return f"in use by {jobs_text(self.in_use[gpu])}"
        return f"not job {self.job}'s GPU" if self.job else "not this job's GPU"


def jobs_text(jobs: tuple[str, ...]) -> str:
    if not jobs:
        return "a Slurm job"
    return ("job " if len(jobs) == 1 else "jobs ") + ", ".join(jobs)


@dataclass(frozen=True)
class ActiveOptions:
    """Level 2: the active probes on this node (collectives, weight sync, HBM and GEMM, the Ray layouts)."""

    ray_address: str | None = None  # None starts a private local Ray instance
    collectives: tuple[str, ...] = ()  # default: every collective
    min_bytes: int | None = None  # sweep from (default 1 MiB)
    max_bytes: int | None = None  # sweep to (default 1 GiB on GPUs, 16 MiB with gloo on CPU)
    warmup: int | None = None
    iters: int | None = None
    bars_file: Path | None = None  # default: rocmstack/doctor/bars.yaml
    baseline_file: Path | None = None
    save_baseline: Path | None = None  # merge this run's busbw into this file
    sync_repeats: int = 5
    sync_bytes: int = 1 << 30  # split weight-sync broadcast
    ipc_bytes: int = 256 << 20  # colocated weight-sync IPC bucket
    comm_inits: int = 20  # communicator-churn: fresh communicators (ROCm/rocm-systems#8178: 3 failed in ~40)
    ipc_handles: int = 64  # ipc-many-handles: buffers per GPU held open at once across processes
    ipc_handle_bytes: int = 4 << 20
    ipc_rounds: int = 5  # rewrites of every buffer, each checksummed by the importer
    cpu_ranks: int = 2  # ranks of the gloo probes (and burn-in stand-ins) on a node without GPUs
    hbm_bytes: int = 1 << 30
    gemm_n: int = 8192
    timeout: float = 300.0  # each Ray call of the probes
    allreduce_repeats: int = 20  # custom all-reduce numerics: repeats of every size
    return_bytes: int = 256 << 20  # memory-return: what each cycle allocates
    return_cycles: int = 5  # memory-return: cycles per loop (a colocated job OOMs after 8-10 leaky steps)
    return_timeout: float = 120.0  # memory-return: each loop's process, start and cycles


@dataclass(frozen=True)
class ClusterOptions:
    """Level 3: what runs across the nodes of a Ray cluster."""

    culprit_budget: float = 120.0  # seconds the culprit search may take


@dataclass(frozen=True)
class BurninOptions:
    """Level 4: the burn-in (rocmstack.doctor.collect.burnin)."""

    minutes: float = 10.0
    gemm_n: int | None = None  # default 8192 on a GPU, 256 on a CPU stand-in
    mem_bytes: int | None = None  # pattern test per device: default 4 GiB on a GPU, 16 MiB on CPU
    telemetry_replay: Path | None = None  # recorded telemetry played back instead of amdsmi/NVML


# The flat spelling of each level's field (the CLI's keywords, a cluster run's payload): a group's field
# under its own name, but for the prefixed ones below.
_GROUPS = {"active": ActiveOptions, "cluster": ClusterOptions, "burnin": BurninOptions}
_FLAT_RENAMED = {
    ("active", "timeout"): "active_timeout",
    ("burnin", "minutes"): "burnin_minutes",
    ("burnin", "gemm_n"): "burnin_gemm_n",
    ("burnin", "mem_bytes"): "burnin_mem_bytes",
}
FLAT_NAMES: Mapping[str, tuple[str, str]] = {
    _FLAT_RENAMED.get((group, f.name), f.name): (group, f.name)
    for group, cls in _GROUPS.items()
    for f in fields(cls)
}


@dataclass(frozen=True)
class DoctorOptions:
    """Level 1 (this node's facts) and the run itself at the top; each higher level's options in its group."""

    fast: bool = False
    deep: bool = False  # also initialise the GPU runtime in the torch probe (seconds more)
    expect_gpus: int | None = None
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    tensor_parallel: int | None = None
    memory_share: float = 0.9  # share of each GPU's memory the job's engine takes (vLLM's default 0.9)
    allow_pids: tuple[int, ...] = ()  # processes whose GPU memory is the job's own (--allow-pid)
    probe_timeout: float = 30.0
    tool_timeout: float = 10.0
    python: str | None = None  # interpreter whose environment is checked (default: this one)
    env: Mapping[str, str] | None = None  # default: os.environ
    sysfs_root: Path = Path("/sys")
    dev_root: Path = Path("/dev")
    proc_root: Path = Path("/proc")
    image_root: Path | None = None  # default: $ROCMSTACK_ROOT or /opt/rocmstack
    # checkpoint preflight (--model): the folder, the archs to judge it for (default: this node's GPUs)
    # and the engine's KV-cache dtype setting
    model_dir: Path | None = None
    gpu_archs: tuple[str, ...] = ()
    kv_cache_dtype: str | None = None
    models: tuple[str, ...] = ()  # tuned-config coverage: model names (default: the image recipe's models:)
    level: int = 1
    budget_s: float | None = None  # --budget: only the checks whose cost fits (rocmstack.doctor.budget)
    history_dir: Path | None = None  # --history: this node's earlier runs (rocmstack.doctor.history)
    scope: GpuScope | None = None  # a Slurm hook's: the GPUs it may judge (None: every GPU, outside Slurm)
    advisories_dirs: tuple[Path, ...] = ()  # a lab's own advisories, after the shipped ones
    active: ActiveOptions = ActiveOptions()
    cluster: ClusterOptions = ClusterOptions()
    burnin: BurninOptions = BurninOptions()

    @classmethod
    def from_flat(cls, **flat: Any) -> DoctorOptions:
        """The options from flat keywords, as the CLI and a cluster run's payload spell them."""
        groups: dict[str, dict[str, Any]] = {group: {} for group in _GROUPS}
        top = {}
        for name, value in flat.items():
            if name in FLAT_NAMES:
                group, field = FLAT_NAMES[name]
                groups[group][field] = value
            else:
                top[name] = value
        return cls(**top, **{group: _GROUPS[group](**kw) for group, kw in groups.items()})

    def flat(self) -> dict[str, Any]:
        """Every option under its flat name (``from_flat``'s inverse)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _GROUPS}
        for name, (group, field) in FLAT_NAMES.items():
            out[name] = getattr(getattr(self, group), field)
        return out

    def environ(self) -> dict[str, str]:
        return dict(self.env if self.env is not None else os.environ)

    def resolved_image_root(self) -> Path:
        if self.image_root is not None:
            return self.image_root
        return image_root(self.environ())
