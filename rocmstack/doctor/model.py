"""The doctor's value types: options in, one result per check out. Plain frozen dataclasses."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocmstack.contract import image_root

if TYPE_CHECKING:
    from rocmstack.platform.snapshot import Snapshot

SCHEMA = "rocmstack.doctor/1"  # bump the suffix on any incompatible change of the JSON report


class Status(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"


FAILING = (Status.FAIL, Status.ERROR)


@dataclass(frozen=True)
class Result:
    status: Status
    summary: str
    details: tuple[str, ...] = ()
    fix: str | None = None
    data: Mapping[str, Any] | None = None  # measured figures a machine reads (Prometheus, --history)


def passed(summary: str, *details: str) -> Result:
    return Result(Status.PASS, summary, tuple(details))


def warned(summary: str, *details: str, fix: str | None = None) -> Result:
    return Result(Status.WARN, summary, tuple(details), fix)


def failed(summary: str, *details: str, fix: str | None = None) -> Result:
    return Result(Status.FAIL, summary, tuple(details), fix)


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
class DoctorOptions:
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
    # --level 2/3 (active probes through Ray)
    level: int = 1
    ray_address: str | None = None  # level 2: None starts a private local Ray instance
    collectives: tuple[str, ...] = ()  # default: every collective
    min_bytes: int | None = None  # sweep from (default 1 MiB)
    max_bytes: int | None = None  # sweep to (default 1 GiB on GPUs, 16 MiB with gloo on CPU)
    warmup: int | None = None
    iters: int | None = None
    bars_file: Path | None = None  # default: rocmstack/doctor/bars.yaml
    baseline_file: Path | None = None
    save_baseline: bool = False
    sync_repeats: int = 5
    sync_bytes: int = 1 << 30  # split weight-sync broadcast
    ipc_bytes: int = 256 << 20  # colocated weight-sync IPC bucket
    comm_inits: int = 20  # communicator-churn: fresh communicators (ROCm/rocm-systems#8178: 3 failed in ~40)
    ipc_handles: int = 64  # ipc-many-handles: buffers per GPU held open at once across processes
    ipc_handle_bytes: int = 4 << 20
    ipc_rounds: int = 5  # rewrites of every buffer, each checksummed by the importer
    cpu_ranks: int = 2  # ranks of the gloo probes on a node without GPUs
    hbm_bytes: int = 1 << 30
    gemm_n: int = 8192
    active_timeout: float = 300.0
    allreduce_repeats: int = 20  # custom all-reduce numerics: repeats of every size
    culprit_budget: float = 120.0  # level 3: seconds the culprit search may take
    budget_s: float | None = None  # --budget: only the checks whose cost fits (rocmstack.doctor.budget)
    history_dir: Path | None = None  # --history: this node's earlier runs (rocmstack.doctor.history)
    # --level 4, the burn-in (rocmstack.doctor.collect.burnin)
    burnin_minutes: float = 10.0
    burnin_gemm_n: int | None = None  # default 8192 on a GPU, 256 on a CPU stand-in
    burnin_mem_bytes: int | None = None  # pattern test per device: default 4 GiB on a GPU, 16 MiB on CPU
    telemetry_replay: Path | None = None  # recorded telemetry played back instead of amdsmi/NVML

    @classmethod
    def validated(
        cls,
        *,
        level: int | None = None,
        sizes: str | None = None,
        sync_bytes: str = "1G",
        budget: str | None = None,
        burn_in: str | None = None,
        gpu_arch: str | None = None,
        cluster_address: str | None = None,
        model_flag: str = "--model",
        **fields: Any,
    ) -> DoctorOptions:
        """The options from a command's values, or InputError (exit 2) naming the bad option.

        Every command that runs the doctor (doctor, checkpoint, validate) builds them here, so each
        gets the same checks before any probe runs. The raw texts are parsed here too: ``sizes``
        (MIN..MAX), ``sync_bytes``, the durations ``budget`` and ``burn_in`` (90s, 10m) and ``gpu_arch``
        (a ';'- or ','-list);
        ``level`` None is the default for the budget; ``cluster_address`` is --ray-address (a cluster
        run; each node then runs on its own, so it is no field)."""
        from rocmstack.errors import InputError

        opts = cls(**fields)
        if opts.probe_timeout <= 0:
            raise InputError(f"--timeout {opts.probe_timeout} must be positive", fix="e.g. --timeout 30")
        if opts.expect_gpus is not None and opts.expect_gpus < 0:
            raise InputError(
                f"--expect-gpus {opts.expect_gpus} is negative", fix="give the number of GPUs, e.g. 8"
            )
        if opts.tensor_parallel is not None and opts.tensor_parallel < 1:
            raise InputError(
                f"--tensor-parallel {opts.tensor_parallel} must be >= 1", fix="e.g. --tensor-parallel 2"
            )
        if not 0 < opts.memory_share <= 1:
            raise InputError(
                f"--memory-share {opts.memory_share} is outside (0, 1]", fix="e.g. --memory-share 0.85"
            )
        if opts.fast and opts.deep:
            raise InputError(
                "--fast and --deep both given", fix="--deep initialises torch's runtime; drop one"
            )
        from rocmstack.errors import quoted
        from rocmstack.gpu.collectives import OPS, parse_size

        for op in opts.collectives:
            if op not in OPS:
                raise InputError(f"--collective {quoted(op)} is unknown", fix=f"one of {', '.join(OPS)}")
        lo = hi = None
        try:
            if sizes is not None:
                first, sep, last = sizes.partition("..")
                if not sep:
                    raise ValueError("no '..'")
                lo, hi = parse_size(first), parse_size(last)
                if hi < lo:
                    raise ValueError("MAX below MIN")
            sync = parse_size(sync_bytes)
        except ValueError as exc:
            raise InputError(
                f"bad size {quoted(sizes if sizes else sync_bytes)}: {exc}", fix="e.g. --sizes 1M..1G"
            ) from None
        for name, num in (
            ("--sync-repeats", opts.sync_repeats),
            ("--cpu-ranks", opts.cpu_ranks),
            ("--comm-inits", opts.comm_inits),
            ("--ipc-handles", opts.ipc_handles),
            ("--iters", opts.iters or 1),
        ):
            if num < 1:
                raise InputError(f"{name} {num} must be >= 1", fix=f"e.g. {name} 2")
        if opts.bars_file is not None:
            from rocmstack.doctor.bars import load_bars

            load_bars(opts.bars_file)  # a bad file fails here, before any work
        from rocmstack.doctor.budget import default_level
        from rocmstack.options import parse_duration

        budget_s = opts.budget_s if budget is None else parse_duration(budget, "--budget")
        minutes = opts.burnin_minutes if burn_in is None else parse_duration(burn_in, "--burn-in") / 60
        if opts.history_dir is not None and cluster_address:
            raise InputError(
                "--history keeps this node's own figures", fix="drop --ray-address; run it on each node"
            )
        if budget_s is not None and cluster_address:
            raise InputError("--budget times this node's own run", fix="drop --ray-address (or --budget)")
        level = default_level(level, budget_s)
        if level == 4 and cluster_address:
            raise InputError("--level 4 (the burn-in) runs on this node", fix="drop --ray-address")
        if minutes <= 0:
            raise InputError(f"--burn-in {minutes:g}m must be positive", fix="e.g. --burn-in 10m")
        if opts.telemetry_replay is not None and not opts.telemetry_replay.is_file():
            raise InputError(
                f"--telemetry-replay {opts.telemetry_replay}: no such file", fix="give a recorded timeline"
            )
        if level == 3 and not cluster_address:
            raise InputError(
                "--level 3 runs across a Ray cluster", fix="add --ray-address HOST:PORT (or auto)"
            )
        if opts.culprit_budget <= 0:
            raise InputError(
                f"--culprit-budget {opts.culprit_budget} must be positive", fix="e.g. --culprit-budget 120"
            )
        archs = _checkpoint_archs(opts.model_dir, gpu_arch, opts.kv_cache_dtype, model_flag) or opts.gpu_archs
        if opts.models:
            from rocmstack.doctor.checks.tuned import check_model_names

            check_model_names(opts.models, "--models")
        return replace(
            opts,
            level=level,
            min_bytes=lo if sizes is not None else opts.min_bytes,
            max_bytes=hi if sizes is not None else opts.max_bytes,
            sync_bytes=sync,
            budget_s=budget_s,
            gpu_archs=archs,
            burnin_minutes=minutes,
        )

    def environ(self) -> dict[str, str]:
        return dict(self.env if self.env is not None else os.environ)

    def resolved_image_root(self) -> Path:
        if self.image_root is not None:
            return self.image_root
        return image_root(self.environ())


def _checkpoint_archs(
    model: Path | None, gpu_arch: str | None, kv_cache_dtype: str | None, model_flag: str
) -> tuple[str, ...]:
    """Check the checkpoint preflight's options (exit 2 on a bad one); the archs as a tuple."""
    from rocmstack.doctor.checks.checkpoint import data
    from rocmstack.errors import InputError, quoted

    if model is not None and not model.is_dir():
        raise InputError(
            f"{model_flag} {quoted(model)} is not a folder",
            fix="give the model folder (config.json, *.safetensors)",
        )
    archs = tuple(a.strip() for a in (gpu_arch or "").replace(",", ";").split(";") if a.strip())
    for arch in archs:
        if arch not in data()["fp8"]:
            raise InputError(
                f"--gpu-arch {quoted(arch)}: the checkpoint preflight knows {', '.join(data()['fp8'])}",
                fix="e.g. --gpu-arch gfx950",
            )
    if kv_cache_dtype is not None and kv_cache_dtype not in data()["kv_cache"]:
        raise InputError(
            f"--kv-cache-dtype {quoted(kv_cache_dtype)} is not a KV-cache dtype the engines take",
            fix=f"one of {', '.join(data()['kv_cache'])}",
        )
    return archs
