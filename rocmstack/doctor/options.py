"""The doctor's options as every command that runs the doctor builds them (doctor, checkpoint, validate):
one ``validated()``, so each gets the same checks before any probe runs. Above the checks and the budget,
whose data (known models, checkpoint formats, levels) it checks the values against."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from rocmstack.advisories.load import load_all
from rocmstack.doctor.bars import load_bars
from rocmstack.doctor.budget import default_level
from rocmstack.doctor.checks.checkpoint import data
from rocmstack.doctor.checks.tuned import check_model_names
from rocmstack.doctor.model import DoctorOptions
from rocmstack.errors import InputError, quoted
from rocmstack.gpu.collectives import OPS, parse_size
from rocmstack.options import parse_duration
from rocmstack.platform.probes._emit import ancestors


def validated(
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
    opts = DoctorOptions.from_flat(**fields)
    if opts.probe_timeout <= 0:
        raise InputError(
            f"--probe-timeout {opts.probe_timeout:g}s must be positive", fix="e.g. --probe-timeout 30s"
        )
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
    for pid in opts.allow_pids:
        _check_allow_pid(pid, opts.proc_root)
    if opts.advisories_dirs:
        load_all(opts.advisories_dirs)  # a bad advisory of the lab's is one line now, not a check's error
    if opts.fast and opts.deep:
        raise InputError("--fast and --deep both given", fix="--deep initialises torch's runtime; drop one")
    for op in opts.active.collectives:
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
        ("--sync-repeats", opts.active.sync_repeats),
        ("--cpu-ranks", opts.active.cpu_ranks),
        ("--comm-inits", opts.active.comm_inits),
        ("--ipc-handles", opts.active.ipc_handles),
        ("--iters", opts.active.iters or 1),
    ):
        if num < 1:
            raise InputError(f"{name} {num} must be >= 1", fix=f"e.g. {name} 2")
    if opts.active.bars_file is not None:
        load_bars(opts.active.bars_file)  # a bad file fails here, before any work
    budget_s = opts.budget_s if budget is None else parse_duration(budget, "--budget")
    minutes = opts.burnin.minutes if burn_in is None else parse_duration(burn_in, "--burn-in") / 60
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
    if opts.burnin.telemetry_replay is not None and not opts.burnin.telemetry_replay.is_file():
        raise InputError(
            f"--telemetry-replay {opts.burnin.telemetry_replay}: no such file", fix="give a recorded timeline"
        )
    if opts.active.save_baseline is not None:
        _check_save_baseline(opts.active.save_baseline, level, cluster_address)
    if level == 3 and not cluster_address:
        raise InputError("--level 3 runs across a Ray cluster", fix="add --ray-address HOST:PORT (or auto)")
    if opts.cluster.culprit_budget <= 0:
        raise InputError(
            f"--culprit-budget {opts.cluster.culprit_budget} must be positive",
            fix="e.g. --culprit-budget 2m",
        )
    archs = _checkpoint_archs(opts.model_dir, gpu_arch, opts.kv_cache_dtype, model_flag) or opts.gpu_archs
    if opts.models:
        check_model_names(opts.models, "--models")
    active = opts.active
    if sizes is not None:
        active = replace(active, min_bytes=lo, max_bytes=hi)
    return replace(
        opts,
        level=level,
        budget_s=budget_s,
        gpu_archs=archs,
        active=replace(active, sync_bytes=sync),
        burnin=replace(opts.burnin, minutes=minutes),
    )


def _check_allow_pid(pid: int, proc_root: Path) -> None:
    """--allow-pid excuses a process and everything started under it: never one that excuses every process."""
    if pid <= 0:
        raise InputError(f"--allow-pid {pid} is not a process id", fix="give the job's own process id (>= 2)")
    if pid == 1:
        raise InputError(
            "--allow-pid 1 is init: every process descends from it, so it would excuse every holder",
            fix="give the job's own process id (the engine's, or its launcher's)",
        )
    if pid in ancestors(os.getpid(), str(proc_root)):
        raise InputError(
            f"--allow-pid {pid} is an ancestor of this doctor: it would excuse every process started beside "
            "it, whoever holds the GPUs",
            fix="give the job's own process id (the engine's, or its launcher's)",
        )


def _check_save_baseline(path: Path, level: int, cluster_address: str | None) -> None:
    """Before any work: the busbw it saves is level 2's on this node, into a file that can be written."""
    if level < 2:
        raise InputError("--save-busbw-baseline saves level 2's busbw", fix="add --level 2")
    if cluster_address:
        raise InputError(
            "--save-busbw-baseline keeps this node's own busbw", fix="drop --ray-address; run it on each node"
        )
    if path.is_dir():
        raise InputError(f"--save-busbw-baseline {quoted(path)}: is a folder", fix="name a file")
    # the save writes beside the file and renames it over: the nearest folder that exists must be writable
    folder = next(p for p in path.absolute().parents if p.exists())  # the ones below it are made
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(
            f"--save-busbw-baseline {quoted(path)}: {quoted(folder)} is not writable",
            fix="name a file you can write",
        )


def _checkpoint_archs(
    model: Path | None, gpu_arch: str | None, kv_cache_dtype: str | None, model_flag: str
) -> tuple[str, ...]:
    """Check the checkpoint preflight's options (exit 2 on a bad one); the archs as a tuple."""
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
