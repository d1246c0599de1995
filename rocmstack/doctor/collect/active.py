"""Level 2: active probes on this node through Ray, the way an RL job uses the node.

One actor per GPU in a STRICT_PACK placement group (on a node without GPUs: ``cpu_ranks`` CPU actors and
gloo), so every actor gets the device mask Ray gives a real trainer or rollout worker. These probes, and
those of rocmstack.doctor.collect.layouts (masks per actor, communicator churn, many IPC handles):

- collectives: a size sweep of every collective (rocmstack.gpu.collectives), plus each bar's size; NCCL/RCCL
  write their INIT/NET log to a private directory, which says which transport they chose.
- gpu-health: HBM copy bandwidth and bf16 GEMM rate on every GPU at once (rocmstack.gpu.health).
- weight-sync: a trainer and a rollout actor per GPU (a fraction of the GPU each: colocated, Ray gives both
  the same mask) exchange a CUDA/HIP IPC handle; a trainer and a rollout on two different GPUs (split) broadcast a
  bucket over a two-rank group; both check a checksum. Repeated ``sync_repeats`` times from fresh processes,
  since the start-up is where masks go wrong.

Results are plain dicts (``snapshot.active``); rocmstack.doctor.checks.fabric judges them.
"""

from __future__ import annotations

import datetime as dt
import glob
import os
import shutil
import socket
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocmstack.doctor.bars import Bars, baseline_key, load_bars, load_baseline, save_baseline
from rocmstack.doctor.collect import memory_return
from rocmstack.doctor.collect.layouts import LAYOUT_PROBES, run_layouts
from rocmstack.doctor.model import DoctorOptions
from rocmstack.errors import EngineError
from rocmstack.gpu.actors import stop_actors
from rocmstack.gpu.collectives import (  # torch-free at import
    OPS,
    debug_env,
    join_group,
    measure,
    parse_transport,
    size_sweep,
    sweep,
)
from rocmstack.gpu.custom_allreduce import run_ranks
from rocmstack.gpu.health import measure_health
from rocmstack.gpu.outcome import error_line, guarded
from rocmstack.gpu.ray_local import private_ray
from rocmstack.gpu.weight_sync import (
    checksum,
    device_uuid,
    free_port,
    open_shared_tensor,
    pattern,
    remove_shared_file,
    share_tensor,
    shared_file,
    use_file_system_sharing,
)
from rocmstack.platform.tools import current_python

if TYPE_CHECKING:
    import torch

ACTIVE_PROBES = (
    frozenset({"collectives", "custom-allreduce", "gpu-health", "weight-sync", memory_return.PROBE})
    | LAYOUT_PROBES
)
MASK_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


def _masks() -> dict[str, str]:
    return {k: os.environ[k] for k in MASK_VARS if k in os.environ}


def _device() -> torch.device:
    import torch

    return torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")


def _device_id(device: Any) -> str:

    return device_uuid(device)


class RankWorker:
    """One rank of the collective probes (a Ray actor)."""

    def __init__(self, log_dir: str | None) -> None:
        if log_dir:
            os.makedirs(log_dir, exist_ok=True)  # on another node the driver's directory does not exist
            os.environ.update(debug_env(log_dir))
        self.log_dir = log_dir
        self.device = _device()

    def info(self) -> dict:
        import ray
        import torch

        name = torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else "cpu"
        return {
            "host": socket.gethostname(),
            "ip": ray.util.get_node_ip_address(),
            "node_id": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(),
            "device": _device_id(self.device),
            "name": name,
            "masks": _masks(),
        }

    def free_port(self) -> int:

        return free_port()

    def init_group(self, rank: int, world: int, addr: str, port: int, timeout_s: float) -> None:
        join_group(self.device, rank, world, addr, port, timeout_s)

    def dtype_name(self) -> str:
        return "bfloat16" if self.device.type == "cuda" else "float32"

    def sweep(self, ops: list[str], sizes: list[int], warmup: int, iters: int) -> list[dict]:
        import torch

        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        return [
            m.as_dict()
            for m in sweep(ops, sizes, device=self.device, dtype=dtype, warmup=warmup, iters=iters)
        ]

    def subset(self, members: list[int], op: str, nbytes: int, warmup: int, iters: int) -> dict:
        """The collective among ``members`` only (global ranks); only members are called."""
        import torch
        import torch.distributed as dist

        group = dist.new_group(members, use_local_synchronization=True)
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        try:
            return measure(
                op, nbytes, device=self.device, dtype=dtype, warmup=warmup, iters=iters, group=group
            ).as_dict()
        finally:
            dist.destroy_process_group(group)

    def transport(self) -> dict:

        if not self.log_dir:
            return parse_transport("").as_dict()
        text = ""
        for path in glob.glob(os.path.join(self.log_dir, f"nccl.*.{os.getpid()}.log")):
            with open(path, encoding="utf-8", errors="replace") as fh:
                text += fh.read()
        return parse_transport(text).as_dict()

    def health(self, hbm_bytes: int, gemm_n: int) -> dict:

        out = measure_health(self.device, hbm_bytes, gemm_n).as_dict()
        out["uuid"] = _device_id(self.device)
        return out

    def close(self) -> None:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


class SyncPeer:
    """A trainer or rollout process of the weight-sync probe (a Ray actor)."""

    def __init__(self) -> None:

        self.device = _device()
        if self.device.type == "cpu":
            use_file_system_sharing()
        self._keep: Any = None

    def info(self) -> dict:
        import ray

        return {
            "pid": os.getpid(),
            "device": _device_id(self.device),
            "masks": _masks(),
            "ray_gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "ip": ray.util.get_node_ip_address(),
        }

    def export(self, nbytes: int) -> dict:

        try:
            self._keep = pattern(nbytes, self.device)
            handle = share_tensor(self._keep)
            return {
                "handle": handle,
                "checksum": checksum(self._keep),
                "shm_file": shared_file(self._keep),
                **self.info(),
            }
        except Exception as exc:
            return {"error": error_line(exc), **self.info()}

    def release(self) -> None:
        """Let go of the exported tensor: with the importer done, torch frees it (on CPU: unlinks its file)."""
        self._keep = None

    def import_(self, handle: bytes, expected: int) -> dict:

        try:
            t = open_shared_tensor(handle)
            got = checksum(t)
            where = _device_id(t.device)
            del t
            return {"ok": got == expected, "checksum": got, "tensor_device": where, **self.info()}
        except Exception as exc:
            return {"ok": False, "error": error_line(exc), **self.info()}

    def free_port(self) -> int:

        return free_port()

    def broadcast(self, rank: int, addr: str, port: int, nbytes: int, timeout_s: float) -> dict:
        import torch
        import torch.distributed as dist

        backend = "nccl" if self.device.type == "cuda" else "gloo"
        try:
            if self.device.type == "cuda":
                torch.cuda.set_device(self.device)
            dist.init_process_group(
                backend,
                init_method=f"tcp://{addr}:{port}",
                rank=rank,
                world_size=2,
                timeout=dt.timedelta(seconds=timeout_s),
            )
            t = pattern(nbytes, self.device)
            expected = checksum(t)
            if rank == 1:
                t.zero_()
            dist.barrier()
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            t0 = time.perf_counter()
            dist.broadcast(t, src=0)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            seconds = time.perf_counter() - t0
            got = checksum(t)
            return {
                "ok": got == expected,
                "seconds": seconds,
                "gbs": t.numel() / seconds / 1e9,
                "nbytes": t.numel(),
                **self.info(),
            }
        except Exception as exc:
            return {"ok": False, "error": error_line(exc), **self.info()}
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()


# The mask a private Ray reads at its start for the GPUs it may hand out (Ray's accelerator managers)
RAY_MASK = {"nvidia": "CUDA_VISIBLE_DEVICES", "amd": "HIP_VISIBLE_DEVICES"}


@contextmanager
def _only_gpus(gpus: tuple[str, tuple[int, ...]] | None) -> Iterator[None]:
    """Ray started inside sees only these GPUs; the environment is as it was afterwards."""
    if gpus is None or gpus[0] not in RAY_MASK:
        yield
        return
    var = RAY_MASK[gpus[0]]
    saved = os.environ.get(var)
    os.environ[var] = ",".join(str(i) for i in gpus[1])
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = saved


@contextmanager
def _ray_for(opts: DoctorOptions, progress: Callable[[str], None]) -> Iterator[None]:
    """Ray to run the probes on: the one this process already has, the cluster at --ray-address, or a
    private local instance started (and stopped, its folder removed) here."""
    import ray

    if ray.is_initialized():
        yield
        return
    kwargs: dict[str, Any] = {"logging_level": "ERROR", "log_to_driver": False}
    if opts.active.ray_address:
        ray.init(address=opts.active.ray_address, **kwargs)
        try:
            yield
        finally:
            ray.shutdown()
        return

    cpus = max(os.cpu_count() or 1, opts.active.cpu_ranks + 2)
    with private_ray("rdoctor-", num_cpus=cpus, progress=progress, **kwargs):
        yield


def sweep_sizes(opts: DoctorOptions, gpu: bool) -> list[int]:
    lo = opts.active.min_bytes or (1 << 20)
    hi = opts.active.max_bytes or ((1 << 30) if gpu else (16 << 20))
    return size_sweep(lo, hi)


def this_node(ray: Any) -> tuple[str, int]:
    """This process's Ray node and its GPUs (the node's own, not the cluster's)."""
    node_id = ray.get_runtime_context().get_node_id()
    node: dict = next((n for n in ray.nodes() if n.get("NodeID") == node_id), {})
    return node_id, int(node.get("Resources", {}).get("GPU", 0))


@dataclass(frozen=True)
class Swept:
    rows: list[dict]
    warmup: int
    iters: int


def group_sweep(opts: DoctorOptions, actors: list, infos: list[dict], gpu: bool, applicable: list) -> Swept:
    """One process group over ``actors`` (rank 0 hosts the rendezvous), the size sweep of every collective,
    and each applicable bar's own size when the sweep missed it. Level 2 and level 3 both measure this way."""
    import ray

    ranks = len(actors)
    port = ray.get(actors[0].free_port.remote())
    ray.get(
        [
            a.init_group.remote(i, ranks, infos[0]["ip"], port, opts.active.timeout)
            for i, a in enumerate(actors)
        ],
        timeout=opts.active.timeout,
    )
    ops = list(opts.active.collectives or OPS)
    warmup = opts.active.warmup if opts.active.warmup is not None else (5 if gpu else 1)
    iters = opts.active.iters if opts.active.iters is not None else (20 if gpu else 3)

    def sweep(ops: list[str], sizes: list[int]) -> list[dict]:
        rows: list[dict] = ray.get(
            [a.sweep.remote(ops, sizes, warmup, iters) for a in actors], timeout=opts.active.timeout
        )[0]
        return rows

    rows = sweep(ops, sweep_sizes(opts, gpu))
    for bar in applicable:
        if not any(r["op"] == bar.op and r["nbytes"] == bar.nbytes for r in rows):
            rows += sweep([bar.op], [bar.nbytes])
    return Swept(rows, warmup, iters)


def run_active(
    opts: DoctorOptions,
    wanted: frozenset[str],
    progress: Callable[[str], None] = lambda _m: None,
    gpus: tuple[str, tuple[int, ...]] | None = None,
) -> dict:
    """Run the wanted probes; never raises for what it finds (an error lands in the result). ``gpus``
    (vendor, physical indexes): the only GPUs a private Ray may hand the probes (a Slurm hook's free ones)."""
    try:
        import ray  # noqa: F401  (level 2 needs it: say so before anything starts)
    except ImportError as exc:
        return {
            "error": f"level 2 needs Ray in this environment ({exc})",
            "fix": "pip install 'ray[default]'",
        }
    bars = load_bars(opts.active.bars_file)
    out: dict[str, Any] = {"wanted": sorted(wanted)}
    t0 = time.monotonic()
    progress(_plan(opts, wanted))
    # the memory loops run in processes of their own while Ray starts; collected before any Ray probe
    loops = memory_return.start(opts, gpus, progress) if memory_return.PROBE in wanted else None
    try:
        rest = wanted - {memory_return.PROBE}
        with _only_gpus(gpus), _ray_for(opts, progress) if rest else nullcontext():
            out["ready_s"] = round(time.monotonic() - t0, 2)  # Ray's start, while the memory loops run
            if loops is not None:
                out["memory_return"] = memory_return.finish(loops, opts)
                loops = None
                out["memory_return_s"] = round(time.monotonic() - t0, 2)
            if rest:
                out.update(_run(opts, rest, bars, progress))
    except EngineError:
        raise  # no private Ray could start: one line, exit 4
    except Exception as exc:  # the probes' own failures are caught inside; this is Ray itself failing
        out["error"] = error_line(exc)
        out["traceback"] = traceback.format_exc()[-2000:]
    finally:
        if loops is not None:  # Ray never came up: the loops still answer
            out["memory_return"] = memory_return.finish(loops, opts)
    out["seconds"] = round(time.monotonic() - t0, 2)
    return out


# Measured on a 2-core x86-64 VM without GPU (2026-12-01, Ray 2.60.0, load average 7-9 from other jobs):
# `doctor --level 2 --expect-gpus 0` took 352 s (5 collectives x 5 sizes over gloo, 5 weight-sync start-ups).
CPU_LEVEL2_S = 352.0


def _plan(opts: DoctorOptions, wanted: frozenset[str]) -> str:
    """What level 2 will run, said before it starts; on a node without GPUs, how long that took here."""
    parts = ["a private Ray start" if not opts.active.ray_address else f"Ray at {opts.active.ray_address}"]
    if "collectives" in wanted:
        parts.append(
            f"{len(opts.active.collectives or OPS)} collective(s) x {len(sweep_sizes(opts, False))} size(s)"
        )
    if "weight-sync" in wanted:
        parts.append(f"{opts.active.sync_repeats} weight-sync start-up(s)")
    if "communicator-churn" in wanted:
        parts.append(f"{opts.active.comm_inits} communicator init(s)")
    if "ipc-many-handles" in wanted:
        parts.append(f"{opts.active.ipc_handles} IPC handles per GPU")
    line = "level 2: " + ", ".join(parts)
    if _gpus_visible():
        return line
    return (
        f"{line}; without GPUs, the whole of level 2 took {CPU_LEVEL2_S / 60:.0f} min on a loaded 2-core VM"
    )


def _gpus_visible() -> bool:
    return memory_return.gpus_here()


def _run(opts: DoctorOptions, wanted: frozenset[str], bars: Bars, progress: Callable[[str], None]) -> dict:
    import ray

    # NODE_ID_LABEL_KEY: the label Ray gives every node, its id (Ray >= 2.58, the recipes' pin, has it)
    from ray.util.placement_group import NODE_ID_LABEL_KEY, placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    node_id, node_gpus = this_node(ray)
    gpu = node_gpus > 0
    ranks = node_gpus if gpu else opts.active.cpu_ranks
    bundles = [{"GPU": 1.0, "CPU": 0.01} if gpu else {"CPU": 0.01} for _ in range(ranks)]
    # Pinned to this node: on a cluster (--ray-address, or level 3 running level 2 on every node) STRICT_PACK
    # alone may pack the ranks onto any node with room.
    pg = placement_group(
        bundles, strategy="STRICT_PACK", bundle_label_selector=[{NODE_ID_LABEL_KEY: node_id} for _ in bundles]
    )
    try:
        ray.get(pg.ready(), timeout=opts.active.timeout)
    except Exception:
        remove_placement_group(pg)
        raise
    out: dict[str, Any] = {"mode": "gpu" if gpu else "cpu", "ranks": ranks, "node_id": node_id}
    phases: dict[str, float] = {}  # seconds per probe, as the report shows them

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        t = time.monotonic()
        try:
            return fn()
        finally:
            phases[name] = round(time.monotonic() - t, 2)

    def where(i: int) -> PlacementGroupSchedulingStrategy:
        return PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i)

    log_dir = tempfile.mkdtemp(prefix="rocmstack-nccl-") if gpu else None
    try:
        if wanted & {"collectives", "gpu-health"}:
            t_ranks = time.monotonic()
            rank_cls = ray.remote(RankWorker)
            actors = [
                rank_cls.options(
                    num_gpus=1 if gpu else 0, num_cpus=0, max_restarts=0, scheduling_strategy=where(i)
                ).remote(log_dir)
                for i in range(ranks)
            ]
            try:
                infos = ray.get([a.info.remote() for a in actors], timeout=opts.active.timeout)
                out["ranks_info"] = infos
                name = infos[0]["name"]
                out["gpu_name"] = name
                if gpu and "gpu-health" in wanted:
                    progress(f"level 2: HBM copy and bf16 GEMM on {ranks} GPU(s)")
                    out["health"] = guarded(
                        lambda: ray.get(
                            [a.health.remote(opts.active.hbm_bytes, opts.active.gemm_n) for a in actors],
                            timeout=opts.active.timeout,
                        )
                    )
                    hb = bars.for_health(name)
                    out["health_bar"] = None if hb is None else vars(hb)
                if "collectives" in wanted:
                    if ranks < 2:
                        out["collectives"] = {
                            "skipped": f"{ranks} GPU on this node: no peer to run a collective with"
                        }
                    else:
                        out["collectives"] = guarded(
                            lambda: _collectives(opts, bars, actors, infos, gpu, progress)
                        )
            finally:
                stop_actors(actors)
                phases["ranks"] = round(time.monotonic() - t_ranks, 2)  # their start, health, collectives
        # On GPUs the weight sync and the layout probes run at once, half of each GPU each: both judge
        # correctness, not speed, and most of their time is actors starting (a 1-GPU H200 spent 12 s and
        # 31 s on them one after the other).
        both = gpu and "weight-sync" in wanted and bool(wanted & LAYOUT_PROBES)
        share = 0.5 if both else 1.0

        def sync() -> Any:
            return timed(
                "weight-sync", lambda: guarded(lambda: _weight_sync(opts, ranks, gpu, where, progress, share))
            )

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rocmstack-weight-sync") as pool:
            pending = pool.submit(sync) if both else None
            if "weight-sync" in wanted and pending is None:
                out["weight_sync"] = sync()
            out.update(
                timed("layouts", lambda: run_layouts(opts, wanted, ranks, gpu, where, progress, share))
            )
            if pending is not None:
                out["weight_sync"] = pending.result()
        if "custom-allreduce" in wanted:  # processes of its own, outside Ray, on whole GPUs
            out["custom_allreduce"] = timed(
                "custom-allreduce", lambda: guarded(lambda: _custom_allreduce(opts, ranks, gpu, progress))
            )
        out["phases"] = phases
    finally:
        remove_placement_group(pg)
        if log_dir:
            shutil.rmtree(log_dir, ignore_errors=True)
    return out


def _custom_allreduce(opts: DoctorOptions, ranks: int, gpu: bool, progress: Callable[[str], None]) -> dict:
    """The engine's custom all-reduce against NCCL/RCCL (gloo on CPU), one process per rank of this node."""

    if ranks < 2:
        return {"skipped": f"{ranks} GPU on this node: no custom all-reduce runs on one"}
    progress(f"level 2: the engine's custom all-reduce against the reference on {ranks} rank(s), under load")
    with tempfile.TemporaryDirectory(prefix="rocmstack-allreduce-") as tmp:
        results = run_ranks(
            ranks,
            device="gpu" if gpu else "cpu",
            python=opts.python or current_python(),
            work_dir=Path(tmp),
            repeats=opts.active.allreduce_repeats,
            timeout=opts.active.timeout,
            env=opts.environ(),
        )
    return {"results": results}


def _collectives(
    opts: DoctorOptions,
    bars: Bars,
    actors: list,
    infos: list[dict],
    gpu: bool,
    progress: Callable[[str], None],
) -> dict:
    import ray

    ranks = len(actors)
    name = infos[0]["name"]
    progress(
        f"level 2: {'NCCL/RCCL' if gpu else 'gloo'} group of {ranks} ranks,"
        f" {len(opts.active.collectives or OPS)} collective(s) x {len(sweep_sizes(opts, gpu))} size(s)"
    )
    applicable = bars.for_collectives(name, ranks)
    swept = group_sweep(opts, actors, infos, gpu, applicable)
    rows, warmup, iters = swept.rows, swept.warmup, swept.iters
    transports = ray.get([a.transport.remote() for a in actors], timeout=opts.active.timeout) if gpu else []
    ray.get([a.close.remote() for a in actors], timeout=opts.active.timeout)
    baseline_path = opts.active.baseline_file
    prior = load_baseline(baseline_path) if baseline_path else {}
    current = {baseline_key(r["op"], r["nbytes"], ranks, name): r["busbw"] for r in rows}
    if opts.active.save_baseline is not None:  # merged, as `bench rollout --save-baseline` merges its rows
        save_baseline(
            opts.active.save_baseline,
            {**load_baseline(opts.active.save_baseline), **current},
            {"gpu": name, "ranks": ranks, "saved_at": dt.datetime.now(dt.UTC).isoformat()},
        )
    return {
        "gpu": name,
        "ranks": ranks,
        "backend": "nccl" if gpu else "gloo",
        "warmup": warmup,
        "iters": iters,
        "rows": rows,
        "bars": [vars(b) for b in applicable],
        "transports": transports,
        "baseline": {k: prior[k] for k in current if k in prior},
        "baseline_file": str(baseline_path) if baseline_path else None,
        "baseline_saved": opts.active.save_baseline is not None,
        "baseline_saved_to": str(opts.active.save_baseline)
        if opts.active.save_baseline is not None
        else None,
    }


def _weight_sync(
    opts: DoctorOptions,
    ranks: int,
    gpu: bool,
    where: Callable[[int], Any],
    progress: Callable[[str], None],
    gpu_share: float = 1.0,
) -> dict:
    import ray

    peer = ray.remote(SyncPeer)
    repeats = opts.active.sync_repeats
    # On GPUs every round's pair starts at once (a fraction of the GPU each, colocated, the same mask from Ray):
    # the start-ups are what is tested, and they overlap instead of queueing. Without GPUs (CPU actors on a
    # small machine) one round at a time.
    share = {"num_gpus": gpu_share / (2 * repeats)} if gpu else {}

    def start_pairs() -> list[tuple[int, Any, Any]]:
        return [
            (
                i,
                peer.options(num_cpus=0, max_restarts=0, scheduling_strategy=where(i), **share).remote(),
                peer.options(num_cpus=0, max_restarts=0, scheduling_strategy=where(i), **share).remote(),
            )
            for i in range(ranks)
        ]

    started = [start_pairs() for _ in range(repeats)] if gpu else []
    try:
        return _sync_rounds(opts, ranks, gpu, started, start_pairs, progress)
    finally:  # the rounds stop their own actors; these are any a failure left unstarted
        stop_actors([a for pairs in started for _, t, ro in pairs for a in (t, ro)])


def _sync_rounds(
    opts: DoctorOptions,
    ranks: int,
    gpu: bool,
    started: list[list[tuple[int, Any, Any]]],
    start_pairs: Callable[[], list[tuple[int, Any, Any]]],
    progress: Callable[[str], None],
) -> dict:
    import ray

    repeats = opts.active.sync_repeats
    rounds = []
    t0 = time.monotonic()
    for r in range(repeats):
        # The rounds are alike: the ones done say how long the rest will take.
        left = (time.monotonic() - t0) / r * (repeats - r) if r else None
        progress(
            f"level 2: weight sync start-up {r + 1}/{repeats}"
            + (f" (about {left:.0f} s left)" if left is not None else "")
        )
        round_: dict[str, Any] = {"colocated": [], "split": None}
        pairs = started[r] if gpu else start_pairs()
        made = [a for _, t, ro in pairs for a in (t, ro)]
        files = []  # CPU: the shared-memory files behind the exports, removed once their holders are gone
        try:
            for i, trainer, rollout in pairs:
                exp = ray.get(trainer.export.remote(opts.active.ipc_bytes), timeout=opts.active.timeout)
                if exp.get("shm_file"):
                    files.append(exp["shm_file"])
                entry: dict[str, Any] = {
                    "bundle": i,
                    "trainer": {k: v for k, v in exp.items() if k not in ("handle", "shm_file")},
                }
                if "error" in exp:
                    entry.update(ok=False, error=f"export: {exp['error']}")
                else:
                    imp = ray.get(
                        rollout.import_.remote(exp["handle"], exp["checksum"]), timeout=opts.active.timeout
                    )
                    entry["rollout"] = imp
                    entry["ok"] = bool(imp.get("ok")) and imp.get("tensor_device") == exp["device"]
                    if "error" in imp:
                        entry["error"] = f"import: {imp['error']}"
                    elif not imp.get("ok"):
                        entry["error"] = "checksum differs after import"
                    elif imp.get("tensor_device") != exp["device"]:
                        entry["error"] = (
                            f"imported on {imp.get('tensor_device')}, exported on {exp['device']}"
                        )
                    ray.get(trainer.release.remote(), timeout=opts.active.timeout)
                round_["colocated"].append(entry)
            if ranks >= 2:
                (_, trainer, _), (_, _, rollout) = pairs[0], pairs[1]
                port = ray.get(trainer.free_port.remote())
                ip = ray.get(trainer.info.remote())["ip"]
                res = ray.get(
                    [
                        trainer.broadcast.remote(0, ip, port, opts.active.sync_bytes, opts.active.timeout),
                        rollout.broadcast.remote(1, ip, port, opts.active.sync_bytes, opts.active.timeout),
                    ],
                    timeout=opts.active.timeout,
                )
                round_["split"] = {
                    "trainer": res[0],
                    "rollout": res[1],
                    "ok": bool(res[0].get("ok") and res[1].get("ok")),
                }
        except Exception as exc:
            round_["error"] = error_line(exc)
        finally:
            stop_actors(made)
            for path in files:  # left only if the rollout never opened it; the actors ran here (pinned)
                remove_shared_file(path)
        rounds.append(round_)
    return {
        "rounds": rounds,
        "repeats": repeats,
        "ipc_bytes": opts.active.ipc_bytes,
        "sync_bytes": opts.active.sync_bytes,
        "ranks": ranks,
    }
