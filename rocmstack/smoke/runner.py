"""The GRPO smoke job: Ray actors, the training loop, metrics and the verdict.

One step: rollout (KV-cache sampling) -> rewards and group advantages (here, in the driver, as verl's
single controller does) -> trainer log-probs (full forward, policy and reference) -> clipped GRPO update
-> weight sync -> sync canary on a fixed probe.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from rocmstack.errors import CheckFailed, Interrupted
from rocmstack.gpu.actors import stop_actors
from rocmstack.gpu.ray_local import private_ray
from rocmstack.gpu.rollout import CATALOGUE, Catalogue
from rocmstack.platform.tools import engine_available
from rocmstack.smoke.config import (
    ENGINE_INIT_STD,
    SmokeOptions,
    engine_for,
    expected_failure,
    model_config,
    served,
)
from rocmstack.smoke.report import SmokeSummary, write_report
from rocmstack.smoke.verdict import as_dicts, decide, decide_engine, reward_window, verdict_of


def _resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise CheckFailed(
            "--device cuda but torch sees no GPU", fix="use --device cpu, or check the GPU runtime"
        )
    return device


def _check_engine(name: str, device: str, catalogue: Catalogue = CATALOGUE) -> None:
    """Before Ray starts: an engine with no CPU engine (SGLang) has a GPU, and the engine is installed here."""
    entry = catalogue.entry(name, flag="--rollout", option=True)
    if entry.no_cpu is not None and device != "cuda":
        raise CheckFailed(
            f"--rollout {name} needs a GPU: {entry.no_cpu}",
            fix=f"use --rollout {engine_for(catalogue, cpu=True)} on CPU",
        )
    if entry.package is not None and (why := engine_available(entry.package)) is not None:
        raise CheckFailed(
            f"--rollout {name}: {why}", fix="run in the image that has it, or use --rollout reference"
        )


# Every actor call has a limit: a stuck collective or a dead GPU must fail the run, not hang it.
CALL_TIMEOUT_S = 600.0
PG_READY_TIMEOUT_S = 120.0  # placing the trainer and the rollout worker


def _get(refs: Any) -> Any:
    import ray
    from ray.exceptions import GetTimeoutError

    try:
        return ray.get(refs, timeout=CALL_TIMEOUT_S)
    except GetTimeoutError:
        raise CheckFailed(
            f"smoke: a Ray actor call did not answer within {CALL_TIMEOUT_S:.0f} s (stuck collective or GPU?)"
        ) from None


@contextmanager
def _ray_session(progress: Any = None) -> Iterator[dict[str, Any]]:
    """Reuse a running Ray (tests share one), else start a private local instance and stop it after."""
    import ray

    if ray.is_initialized():
        yield {"started": False, "init_s": 0.0}
        return
    # Logical CPUs so the actors' bundles fit a 2-core CI box.
    with private_ray(
        "rsmoke-",
        num_cpus=max(4, os.cpu_count() or 1),
        progress=progress,
        log_to_driver=False,
        configure_logging=False,
    ) as info:
        yield {"started": True, **info}


def _max_abs(a: Any, b: Any) -> float:
    return float((a - b).abs().max())


def _rollout_dtype(opts: SmokeOptions, dtype: str) -> str:
    # The logprob-mismatch fault runs the engine in float16 against a float32 trainer.
    return "float16" if opts.inject == "logprob-mismatch" else dtype


def _decide(
    opts: SmokeOptions,
    metrics: list[dict[str, Any]],
    canary: list[Any],
    dtype: str,
    catalogue: Catalogue = CATALOGUE,
) -> list[Any]:
    if not served(opts.rollout, catalogue):
        return decide(metrics, canary, dtype=dtype)
    return decide_engine(metrics, canary, dtype=_rollout_dtype(opts, dtype), bar=opts.logprob_bar)


def _spawn(
    opts: SmokeOptions, device: str, dtype: str, cfg: dict[str, Any], catalogue: Catalogue = CATALOGUE
) -> tuple[Any, Any, Any]:
    """Place the trainer and the rollout worker: one GPU shared (0.5 each) or one GPU each."""
    import ray
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from rocmstack.smoke.actors import RolloutWorker, TrainerWorker

    gpu = device == "cuda"
    if opts.placement == "colocated":
        bundles = [{"GPU": 1, "CPU": 1}] if gpu else [{"CPU": 1}]
        slots = [0, 0]
        share = 0.5
    else:
        bundles = [{"GPU": 1, "CPU": 1}, {"GPU": 1, "CPU": 1}] if gpu else [{"CPU": 1}, {"CPU": 1}]
        slots = [0, 1]
        share = 1.0
    have = ray.cluster_resources().get("GPU", 0.0)
    need = len(bundles)
    if gpu and have < need:
        raise CheckFailed(
            f"--placement {opts.placement} needs {need} GPU(s); Ray sees {have:g}",
            fix="run on a machine with more GPUs, or use --placement colocated",
        )
    pg = placement_group(bundles, strategy="STRICT_PACK")
    actors: list[Any] = []
    try:  # the caller's clean-up only starts once this returns: until then the group is ours to remove
        ray.get(pg.ready(), timeout=PG_READY_TIMEOUT_S)
        payload = dict(
            opts.to_dict(),
            threads=opts.threads or actor_threads(),
        )
        roles = ((TrainerWorker, slots[0], dtype), (RolloutWorker, slots[1], _rollout_dtype(opts, dtype)))
        for cls, slot, actor_dtype in roles:
            strategy = PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=slot)
            resources = {"num_gpus": share, "num_cpus": 0} if gpu else {"num_cpus": share}
            remote = ray.remote(cls).options(scheduling_strategy=strategy, max_concurrency=1, **resources)
            named = {"catalogue": catalogue} if cls is RolloutWorker else {}
            actors.append(remote.remote(cfg, payload, device, actor_dtype, **named))
            if served(opts.rollout, catalogue) and cls is TrainerWorker:
                # The engine counts its device memory from what its process holds before it starts:
                # the trainer's start must not land inside that window.
                _get(actors[0].info.remote())
    except BaseException:
        for actor in actors:
            with suppress(Exception):
                ray.kill(actor)
        ray.util.remove_placement_group(pg)
        raise
    return actors[0], actors[1], pg


def _sync(opts: SmokeOptions, trainer: Any, rollout: Any) -> dict[str, Any]:
    """Ship the trainer's weights to the rollout worker; return bytes, seconds and the version loaded."""
    start = time.perf_counter()
    if opts.placement == "colocated":
        shared = _get(trainer.share_weights.remote())
        version = _get(rollout.load_shared.remote(shared))
        _get(trainer.release_bucket.remote())
        nbytes = shared["nbytes"]
    else:
        sent_ref = trainer.broadcast_weights.remote()
        recv_ref = rollout.receive_broadcast.remote()
        sent, version = _get([sent_ref, recv_ref])
        nbytes = sent["nbytes"]
    seconds = time.perf_counter() - start
    return {"nbytes": nbytes, "seconds": seconds, "version": version}


def actor_threads(cores: int | None = None) -> int:
    """Torch threads per actor: the two actors' share of the cores this process may use, at most 4. OpenMP
    threads beyond that wait for each other at every barrier while another process holds the core."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(4, cores // 2))


def run_grpo_smoke(
    options: SmokeOptions, *, on_step: Any = None, catalogue: Catalogue = CATALOGUE
) -> dict[str, Any]:
    """Run the job and return the summary dict (``summary["passed"]`` is the verdict).

    ``on_step(metrics_row)`` is called after each step (the CLI drives its progress bar with it);
    ``catalogue``: where the --rollout and --decoder names lead.
    """
    opts = options.validated(catalogue)
    t0 = time.perf_counter()
    import ray  # noqa: F401  (here, so startup_s counts the imports)

    from rocmstack.smoke import task

    device = _resolve_device(opts.device)
    dtype = "bfloat16" if device == "cuda" else "float32"
    engine = served(opts.rollout, catalogue)
    if engine:
        _check_engine(opts.rollout, device, catalogue)
    # vLLM's CPU attention has no head_dim 16 (the tiny shape): engine smokes start at small.
    shape = opts.shape if opts.shape != "auto" else ("small" if device == "cuda" or engine else "tiny")
    prompt_len = opts.num_digits + 2
    cfg = model_config(
        shape,
        vocab_size=task.VOCAB_SIZE,
        max_positions=max(64, prompt_len + opts.max_new_tokens + 8),
        init_std=ENGINE_INIT_STD if engine else None,
    )
    metrics: list[dict[str, Any]] = []
    canary: list[dict[str, Any]] = []
    startup_s = time.perf_counter() - t0  # driver imports (torch alone takes seconds on a cold machine)
    where: dict[str, Any] = {"step": 0, "phase": "starting Ray"}  # what Ctrl-C interrupted
    try:
        with _ray_session() as ray_info:
            where["phase"] = "placing the actors"
            summary = _train(
                opts, device, dtype, shape, cfg, prompt_len, metrics, canary, where, t0, on_step, catalogue
            )
    except KeyboardInterrupt:
        raise _interrupted(opts, device, dtype, shape, metrics, canary, where, catalogue) from None
    summary = SmokeSummary.produce(
        {**summary, "startup_s": startup_s, "ray_init_s": ray_info["init_s"]}
    ).wire()
    if opts.report_dir is not None:
        write_report(opts.report_dir, metrics, summary)
    return summary


def _interrupted(
    opts: SmokeOptions,
    device: str,
    dtype: str,
    shape: str,
    metrics: list[dict[str, Any]],
    canary: list[Any],
    where: dict[str, Any],
    catalogue: Catalogue = CATALOGUE,
) -> Interrupted:
    """Ctrl-C: keep the steps that finished (report marked interrupted) and say where the job stopped."""
    criteria = _decide(opts, metrics, canary, dtype, catalogue)
    summary = {
        "passed": False,
        "failed": ["interrupted"],
        "interrupted": {"step": where["step"], "steps": opts.steps, "phase": where["phase"]},
        "criteria": as_dicts(criteria),
        "inject": opts.inject,
        "device": device,
        "dtype": dtype,
        "shape": shape,
        "placement": opts.placement,
        "rollout": opts.rollout,
        "steps": len(metrics),
        "final": _final(metrics),
        "options": opts.to_dict(),
    }
    summary = SmokeSummary.produce(summary).wire()
    kept = ""
    if opts.report_dir is not None:
        write_report(opts.report_dir, metrics, summary)
        kept = f"; {len(metrics)} finished step(s) in {opts.report_dir} (marked interrupted)"
    at = f"step {where['step']}/{opts.steps}, " if where["step"] else ""
    return Interrupted(f"smoke interrupted at {at}{where['phase']}{kept}")


def _train(
    opts: SmokeOptions,
    device: str,
    dtype: str,
    shape: str,
    cfg: dict[str, Any],
    prompt_len: int,
    metrics: list[dict[str, Any]],
    canary: list[Any],
    where: dict[str, Any],
    t0: float,
    on_step: Any,
    catalogue: Catalogue = CATALOGUE,
) -> dict[str, Any]:
    """Place the actors, run the steps (appending to metrics and canary), decide; the summary."""
    import ray
    import torch

    from rocmstack.smoke import grpo, task

    engine = served(opts.rollout, catalogue)
    # With an engine, stale-weights is the engine skipping the load (the rollout worker does it).
    trainer_inject = None if engine and opts.inject == "stale-weights" else opts.inject
    slept = False
    t_init = time.perf_counter()
    trainer, rollout, pg = _spawn(opts, device, dtype, cfg, catalogue)
    try:
        t_info, r_info = _get([trainer.info.remote(), rollout.info.remote()])
        if opts.placement == "split":
            layout = _get(trainer.layout.remote())
            port = _get(trainer.free_port.remote())
            address = f"tcp://{t_info['ip']}:{port}"
            if engine:
                first = trainer.init_engine_group.remote(t_info["ip"], port)
            else:
                first = trainer.init_group.remote(address, 0)
            _get([first, rollout.init_group.remote(address, 1, layout)])
        where["phase"] = "first weight sync"
        first_sync = _sync(opts, trainer, rollout)  # the rollout starts from the trainer's weights
        if opts.inject == "logprob-mismatch":
            _get(trainer.perturb_embedding.remote(2 * ENGINE_INIT_STD))
        model_init_s = time.perf_counter() - t_init
        prev_trainer = _get(trainer.probe_logprobs.remote())
        prev_rollout = _get(rollout.probe_logprobs.remote())
        noise_floor = _max_abs(prev_rollout, prev_trainer)
        gen = torch.Generator().manual_seed(opts.seed)
        for step in range(opts.steps):
            where.update(step=step + 1, phase="rollout")
            t_step = time.perf_counter()
            prompts = task.make_prompts(opts.prompts_per_step, opts.num_digits, gen)
            prompts = prompts.repeat_interleave(opts.group_size, dim=0)
            out = _get(rollout.generate.remote(prompts))
            engine_row = _engine_row(out, after_wake=slept) if engine else {}
            if engine and opts.placement == "colocated":
                where["phase"] = "engine sleep"
                mem = _get(rollout.sleep.remote())
                slept = slept or mem["slept"]
                engine_row.update(_sleep_row(mem))
            responses = out["tokens"]
            mask = task.response_mask(responses)
            rewards = task.rewards(prompts, responses)
            if opts.inject == "zero-reward":
                rewards = torch.zeros_like(rewards)
            advantages = grpo.group_advantages(rewards, opts.group_size)
            seqs = torch.cat([prompts, responses], dim=1)
            where["phase"] = "trainer log-probs"
            lp = _get(trainer.compute_logprobs.remote(seqs, prompt_len, mask))
            diff = (lp["old_logp"] - out["logprobs"]).abs()
            batch = {
                "seqs": seqs,
                "mask": mask,
                "advantages": advantages,
                "old_logp": lp["old_logp"],
                "ref_logp": lp["ref_logp"],
            }
            where["phase"] = "policy update"
            tr = _get(trainer.train.remote(batch, prompt_len, trainer_inject))
            where["phase"] = "weight sync"
            if opts.inject == "skip-sync":
                if engine:
                    _get(rollout.wake.remote())
                sync = {"nbytes": 0, "seconds": 0.0, "version": first_sync["version"]}
            else:
                sync = _sync(opts, trainer, rollout)
            where["phase"] = "sync canary"
            now_trainer, now_rollout = _get(
                [trainer.probe_logprobs.remote(), rollout.probe_logprobs.remote()]
            )
            canary.append(
                {
                    "step": step,
                    "trainer_change": _max_abs(now_trainer, prev_trainer),
                    "rollout_change": _max_abs(now_rollout, prev_rollout),
                    "rollout_vs_trainer": _max_abs(now_rollout, now_trainer),
                    "rollout_vs_prev_trainer": _max_abs(now_rollout, prev_trainer),
                    "noise_floor": noise_floor,
                }
            )
            prev_trainer, prev_rollout = now_trainer, now_rollout
            resp_tokens = float(mask.sum())
            row = {
                "step": step,
                "raw_reward_mean": float(rewards.mean()),
                "raw_reward_std": float(rewards.std()),
                "zero_std_group_frac": grpo.zero_std_fraction(rewards, opts.group_size),
                "response_length_mean": float(mask.sum(dim=1).mean()),
                "entropy": lp["entropy"],
                "kl": lp["kl"],
                "loss": tr["loss"],
                "grad_norm": tr["grad_norm"],
                "clip_frac": tr["clip_frac"],
                "skipped_updates": tr["skipped_updates"],
                "train_rollout_logprob_abs_diff_mean": float(grpo.masked_mean(diff, mask)),
                "train_rollout_logprob_abs_diff_max": float((diff * mask).max()),
                "tokens_per_gpu_per_sec": resp_tokens / out["time_s"],  # the rollout runs on one GPU
                "time_rollout_s": out["time_s"],
                "time_logprobs_s": lp["time_s"],
                "time_train_s": tr["time_s"],
                "time_sync_s": sync["seconds"],
                "sync_bytes": sync["nbytes"],
                "sync_gb_per_s": sync["nbytes"] / sync["seconds"] / 1e9 if sync["seconds"] > 0 else 0.0,
                "weight_version": sync["version"],
                **{f"canary_{k}": v for k, v in canary[-1].items() if k not in ("step", "noise_floor")},
                **engine_row,
            }
            row["time_step_s"] = time.perf_counter() - t_step
            metrics.append(row)
            if on_step is not None:
                on_step(row)
        where.update(phase="verdict")
        criteria = _decide(opts, metrics, canary, dtype, catalogue)
        time_to_verdict = time.perf_counter() - t0
    finally:
        where["phase"] += " (stopping the actors)"
        for actor in (trainer, rollout):
            with suppress(Exception):
                ray.get(actor.shutdown.remote(), timeout=30)
        stop_actors([trainer, rollout])
        ray.util.remove_placement_group(pg)
    passed, failed = verdict_of(criteria)
    expected = expected_failure(opts.rollout, opts.inject, catalogue)
    summary = {
        "passed": passed,
        "failed": failed,
        "criteria": as_dicts(criteria),
        "inject": opts.inject,
        "expected_failure": expected,
        "inject_caught": (expected in failed) if expected else None,
        "device": device,
        "dtype": dtype,
        "shape": shape,
        "placement": opts.placement,
        "rollout": opts.rollout,
        "rollout_dtype": _rollout_dtype(opts, dtype),
        "logprob_bar": opts.logprob_bar if engine else None,
        "engine": r_info["engine"],
        "params": t_info["params"],
        "trainer_visible_devices": t_info["visible"],
        "rollout_visible_devices": r_info["visible"],
        "same_device": t_info["uuid"] == r_info["uuid"],
        "steps": opts.steps,
        "interrupted": None,
        "time_to_verdict_s": time_to_verdict,
        "model_init_s": model_init_s,
        "first_sync_s": first_sync["seconds"],
        "canary_noise_floor": noise_floor,
        "final": _final(metrics),
        "options": opts.to_dict(),
    }
    return summary


def _engine_row(out: dict[str, Any], *, after_wake: bool) -> dict[str, Any]:
    """What the wake check needs of a generation: distinct tokens and whether every log-prob is finite."""
    import torch

    return {
        "gen_after_wake": after_wake,
        "gen_distinct_tokens": int(torch.unique(out["tokens"]).numel()),
        "gen_logprobs_finite": bool(torch.isfinite(out["logprobs"]).all()),
    }


def _sleep_row(mem: dict[str, Any]) -> dict[str, Any]:
    """The engine's memory around a sleep, as the driver counts it (None where it cannot be measured)."""
    row: dict[str, Any] = {
        "sleep_memory_source": mem["source"],
        "time_sleep_s": mem["time_s"],
        "engine_memory_bytes": None,
        "sleep_freed_bytes": None,
        "sleep_freed_frac": None,
    }
    if mem["slept"] and None not in (mem["baseline"], mem["awake"], mem["asleep"]):
        held = mem["awake"] - mem["baseline"]  # the engine's share: the process held baseline before it
        freed = mem["awake"] - mem["asleep"]
        row.update(
            engine_memory_bytes=held,
            sleep_freed_bytes=freed,
            sleep_freed_frac=freed / held if held > 0 else None,
        )
    elif not mem["slept"]:
        row["sleep_memory_source"] = f"the engine does not sleep here ({mem['source']})"
    return row


def _final(metrics: list[dict[str, Any]]) -> dict[str, float]:
    """Means over the run of the figures a reader wants first."""
    keys = (
        "raw_reward_mean",
        "zero_std_group_frac",
        "response_length_mean",
        "entropy",
        "kl",
        "grad_norm",
        "clip_frac",
        "train_rollout_logprob_abs_diff_mean",
        "train_rollout_logprob_abs_diff_max",
        "tokens_per_gpu_per_sec",
        "time_rollout_s",
        "time_logprobs_s",
        "time_train_s",
        "time_sync_s",
        "sync_gb_per_s",
        "time_step_s",
    )
    out: dict[str, float] = {}
    for key in keys:
        values = [m[key] for m in metrics if isinstance(m[key], (int, float)) and math.isfinite(m[key])]
        out[f"{key}_avg"] = sum(values) / len(values) if values else float("nan")
    w = reward_window(len(metrics))
    out["reward_first_window"] = (
        sum(m["raw_reward_mean"] for m in metrics[:w]) / w if metrics else float("nan")
    )
    out["reward_last_window"] = (
        sum(m["raw_reward_mean"] for m in metrics[-w:]) / w if metrics else float("nan")
    )
    out["sync_bytes"] = float(metrics[-1]["sync_bytes"]) if metrics else 0.0
    return out
