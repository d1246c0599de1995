"""Level 2: probes run in the process layouts RL frameworks use, inside real Ray actors, because what
breaks jobs in the field differs between the trainer, its Ray actors and the engine's worker processes.

- actor-masks: per GPU, an actor Ray masks (``num_gpus`` a fraction, as colocated trainer and rollout
  workers are started) and one it does not (``RAY_EXPERIMENTAL_NOSET_*``, as verl and vime start theirs on
  ROCm), plus a ``num_gpus=0`` actor. Each reports its masks, Ray's GPU ids and the devices torch sees by
  UUID, and so does an engine worker it spawns. Then an IPC weight-sync handle crosses the two masks both
  ways: opened at the importer's own index of the exporter's GPU (found by UUID, as verl and SGLang do), and,
  for the masked importer, also as torch opens it (at the exporter's index), which on a GPU other than the
  first is the "invalid device ordinal" of the field reports.
- communicator-churn: ``comm_inits`` fresh NCCL/RCCL communicators (gloo on CPU) over the trainer actors,
  each alive beside a second one over other processes on a subset of the same GPUs (the colocated rollout),
  both running an all-reduce, then both torn down. Launch failures in the field come a few in tens.
- ipc-many-handles: per GPU, ``ipc_handles`` buffers exported at once and held open by another process,
  each rewritten ``ipc_rounds`` times by the exporter and checksummed by the importer.

Results are plain dicts (``snapshot.active``); rocmstack.doctor.checks.layouts judges them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rocmstack.doctor.model import DoctorOptions
from rocmstack.gpu.actors import stop_actors
from rocmstack.gpu.collectives import join_group
from rocmstack.gpu.outcome import error_line, guarded
from rocmstack.gpu.process_view import child_view, device_uuids, local_index, view
from rocmstack.gpu.weight_sync import (
    checksum,
    device_uuid,
    free_port,
    open_remappable,
    open_shared_tensor,
    pattern,
    remove_shared_file,
    share_tensor,
    share_tensor_remappable,
    shared_file,
    use_file_system_sharing,
)

LAYOUT_PROBES = frozenset({"actor-masks", "communicator-churn", "ipc-many-handles"})
NOSET = {
    "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1",
    "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES": "1",
}
# A communicator round that has not finished in this long is a hang, counted as a failure.
ROUND_TIMEOUT_S = 60.0
# Failures after which the churn stops: enough to judge, and a hang costs a round's timeout each time.
CHURN_STOP_AFTER = 3


def _open(open_: Callable[[], Any], expected: int) -> dict:
    try:
        t = open_()
        got = checksum(t)
        where = device_uuid(t.device)
        del t
        return {"ok": got == expected, "checksum": got, "uuid": where}
    except Exception as exc:
        return {"ok": False, "error": error_line(exc)}


class LayoutPeer:
    """One process of a layout probe (a Ray actor)."""

    def __init__(self) -> None:
        import torch

        self.gpu = torch.cuda.is_available()
        if not self.gpu:
            use_file_system_sharing()
        self.index = self._own_index()
        self._keep: list[Any] = []
        self._opened: list[Any] = []

    def _own_index(self) -> int:
        import ray

        ids = [str(g) for g in ray.get_gpu_ids()]
        if not self.gpu or not ids:
            return 0
        index = local_index(ids[0], dict(os.environ))
        return 0 if index is None else index

    def _device(self) -> Any:
        import torch

        return torch.device("cuda", self.index) if self.gpu else torch.device("cpu")

    def view(self, with_worker: bool) -> dict:
        import ray

        out = view(self.index if self.gpu else None)
        out["ray_gpu_ids"] = [str(g) for g in ray.get_gpu_ids()]
        out["index"] = self.index
        if with_worker:
            out["worker"] = child_view(self.index if self.gpu else None)
        return out

    # IPC across masks -------------------------------------------------------------------------------------

    def export(self, nbytes: int) -> dict:

        try:
            device = self._device()
            t = pattern(nbytes, device)
            self._keep = [t]
            return {
                "handle": share_tensor_remappable(t),
                "checksum": checksum(t),
                "uuid": device_uuid(device),
                "index": self.index,
            }
        except Exception as exc:
            return {"error": error_line(exc)}

    def import_(self, handle: bytes, expected: int, uuid: str, plain: bool) -> dict:
        """Open ``handle`` at this process's index of GPU ``uuid``; with ``plain``, first as torch opens
        it (the exporter's index): a plain open that fails leaves nothing behind, one that works lands on
        this process's only GPU, which is the exporter's."""
        out: dict[str, Any] = {}
        if plain:
            out["plain"] = _open(lambda: open_remappable(handle), expected)
        seen = device_uuids() if self.gpu else [uuid]
        if uuid not in seen:
            out["remapped"] = {"ok": False, "error": f"GPU {uuid} is not among this process's {seen}"}
            return out
        index = seen.index(uuid) if self.gpu else None
        out["remapped"] = _open(lambda: open_remappable(handle, index), expected)
        return out

    def release(self) -> None:
        self._keep = []
        self._opened = []

    # Many handles ---------------------------------------------------------------------------------------

    def export_many(self, count: int, nbytes: int) -> dict:

        try:
            self._keep = [self._filled(nbytes, 0, k) for k in range(count)]
            return {
                "pid": os.getpid(),
                "gpu": self.gpu,
                "handles": [share_tensor(t) for t in self._keep],
                "files": [f for f in (shared_file(t) for t in self._keep) if f],
            }
        except Exception as exc:
            return {"error": error_line(exc)}

    def _filled(self, nbytes: int, round_: int, k: int) -> Any:

        return pattern(nbytes, self._device()).add_((round_ * 7 + k) % 256)

    def rewrite(self, round_: int) -> list[int]:
        """Write round ``round_``'s contents into every exported buffer in place; their checksums."""
        import torch

        for k, t in enumerate(self._keep):
            t.copy_(self._filled(t.numel(), round_, k))
        if self.gpu:
            torch.cuda.synchronize(self._device())
        return [checksum(t) for t in self._keep]

    def open_many(self, handles: list[bytes]) -> dict:

        try:
            self._opened = [open_shared_tensor(h) for h in handles]
            return {"opened": len(self._opened)}
        except Exception as exc:
            return {"opened": len(self._opened), "error": error_line(exc)}

    def check_many(self, expected: list[int]) -> list[int]:
        """The handles whose contents differ from ``expected`` (all held open since ``open_many``)."""

        return [
            k for k, (t, want) in enumerate(zip(self._opened, expected, strict=True)) if checksum(t) != want
        ]

    # Communicators --------------------------------------------------------------------------------------

    def free_port(self) -> int:
        return free_port()

    def ip(self) -> str:
        import ray

        return str(ray.util.get_node_ip_address())

    def communicate(self, rank: int, world: int, addr: str, port: int, timeout_s: float) -> dict:
        """A fresh process group: init, one all-reduce whose sum is known, teardown."""
        import torch
        import torch.distributed as dist

        t0 = time.perf_counter()
        backend = "nccl" if self.gpu else "gloo"
        device = self._device()
        try:
            join_group(device, rank, world, addr, port, timeout_s)
            init_s = time.perf_counter() - t0
            x = torch.full((1024,), float(rank + 1), device=device)
            dist.all_reduce(x)
            want = world * (world + 1) / 2
            ok = bool((x == want).all().item())
            return {
                "ok": ok,
                "backend": backend,
                "init_s": init_s,
                **({} if ok else {"error": f"sum {x[0].item()} != {want}"}),
            }
        except Exception as exc:  # NCCL/RCCL put the CUDA/HIP cause on a later line ("Last error: ...")
            return {"ok": False, "error": error_line(exc), "detail": str(exc)[-2000:]}
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()


def run_layouts(
    opts: DoctorOptions,
    wanted: frozenset[str],
    ranks: int,
    gpu: bool,
    where: Callable[[int], Any],
    progress: Callable[[str], None],
    gpu_share: float = 1.0,
) -> dict:
    """The wanted layout probes over ``ranks`` placement-group bundles (one GPU each, or CPU).

    On GPUs the probes run at once, ``gpu_share`` of each bundle's GPU split between their actors (six per
    GPU at most): they judge what each process sees and whether handles and communicators work, not speed,
    and apart they spent most of their time starting actors one probe after the other. Without GPUs (CPU
    actors on a small machine) one after the other.
    """
    probes = [
        (key, fn)
        for probe, key, fn in (
            ("actor-masks", "actor_masks", actor_masks),
            ("communicator-churn", "communicator_churn", communicator_churn),
            ("ipc-many-handles", "ipc_many_handles", ipc_many_handles),
        )
        if probe in wanted
    ]
    share = gpu_share / (2 * len(probes)) if probes else gpu_share

    def one(fn: Callable[..., dict]) -> Any:
        return guarded(lambda: fn(opts, ranks, gpu, where, progress, share))

    if not gpu or len(probes) < 2:
        return {key: one(fn) for key, fn in probes}
    with ThreadPoolExecutor(max_workers=len(probes), thread_name_prefix="rocmstack-layouts") as pool:
        running = {key: pool.submit(one, fn) for key, fn in probes}
        return {key: f.result() for key, f in running.items()}


def _peers(
    n: int, gpu: bool, where: Callable[[int], Any], share: float, env: dict[str, str] | None = None
) -> list:
    import ray

    peer = ray.remote(LayoutPeer)
    extra: dict[str, Any] = {"num_gpus": share} if gpu else {}
    if env:
        extra["runtime_env"] = {"env_vars": env}
    return [
        peer.options(num_cpus=0, max_restarts=0, scheduling_strategy=where(i), **extra).remote()
        for i in range(n)
    ]


def actor_masks(
    opts: DoctorOptions,
    ranks: int,
    gpu: bool,
    where: Callable[[int], Any],
    progress: Callable[[str], None],
    share: float = 0.5,
) -> dict:
    import ray

    if not gpu:
        return {"skipped": "no GPU on this node: Ray sets no device masks"}
    progress(f"level 2: masks in Ray actors and their engine workers, IPC across masks on {ranks} GPU(s)")
    masked = _peers(ranks, gpu, where, share)
    whole = _peers(ranks, gpu, where, share, NOSET)
    zero = (
        ray.remote(LayoutPeer)
        .options(num_cpus=0, num_gpus=0, max_restarts=0, scheduling_strategy=where(0))
        .remote()
    )
    made = [*masked, *whole, zero]
    t = opts.active.timeout
    try:
        views = ray.get(
            [a.view.remote(True) for a in masked]
            + [a.view.remote(True) for a in whole]
            + [zero.view.remote(False)],
            timeout=t,
        )
        out: dict[str, Any] = {
            "ranks": ranks,
            "masked": views[:ranks],
            "whole": views[ranks : 2 * ranks],
            "zero": views[-1],
            "ipc": [],
        }
        blind = [i for i, v in enumerate(out["masked"] + out["whole"]) if not v.get("count")]
        if blind:  # a CPU tensor would cross instead: nothing about GPU IPC would be judged
            out["ipc_skipped"] = f"{len(blind)} of the GPU actors see no GPU (actor-masks says why)"
            return out
        for i in range(ranks):
            # masked -> whole (a rollout that sees the node imports a masked trainer's bucket), and back
            for src, dst, plain, direction in (
                (masked[i], whole[i], False, "masked-to-whole"),
                (whole[i], masked[i], True, "whole-to-masked"),
            ):
                exp = ray.get(src.export.remote(opts.active.ipc_bytes), timeout=t)
                row: dict[str, Any] = {"bundle": i, "direction": direction}
                if "error" in exp:
                    row["export_error"] = exp["error"]
                else:
                    row.update(uuid=exp["uuid"], index=exp["index"])
                    row.update(
                        ray.get(
                            dst.import_.remote(exp["handle"], exp["checksum"], exp["uuid"], plain), timeout=t
                        )
                    )
                ray.get([src.release.remote(), dst.release.remote()], timeout=t)
                out["ipc"].append(row)
        return out
    finally:
        stop_actors(made)


def communicator_churn(
    opts: DoctorOptions,
    ranks: int,
    gpu: bool,
    where: Callable[[int], Any],
    progress: Callable[[str], None],
    share: float = 0.5,
) -> dict:
    import ray

    sub = max(1, ranks // 2)  # the rollout's communicator: the first half of the GPUs (one of one)
    trainers = _peers(ranks, gpu, where, share)
    rollouts = _peers(sub, gpu, where, share)
    t_round = min(opts.active.timeout, ROUND_TIMEOUT_S)
    rounds: list[dict] = []
    t0 = time.monotonic()
    try:
        addr = ray.get(trainers[0].ip.remote(), timeout=opts.active.timeout)
        for r in range(opts.active.comm_inits):
            left = (time.monotonic() - t0) / r * (opts.active.comm_inits - r) if r else None
            progress(
                f"level 2: communicator {r + 1}/{opts.active.comm_inits} over {ranks} rank(s) beside one over {sub}"
                + (f" (about {left:.0f} s left)" if left is not None else "")
            )
            pa, pb = ray.get(
                [trainers[0].free_port.remote(), rollouts[0].free_port.remote()], timeout=t_round
            )
            refs = [a.communicate.remote(i, ranks, addr, pa, t_round) for i, a in enumerate(trainers)]
            refs += [a.communicate.remote(i, sub, addr, pb, t_round) for i, a in enumerate(rollouts)]
            s = time.monotonic()
            try:
                res = ray.get(refs, timeout=t_round + 15)
            except (
                ray.exceptions.RayActorError
            ) as exc:  # a rank's process died (RCCL aborts on a fatal error)
                res = [
                    {"ok": False, "error": "a rank's process died", "detail": str(exc)[-2000:], "died": True}
                ]
            except Exception as exc:  # a rank that never returned: the round hung
                res = [
                    {
                        "ok": False,
                        "error": f"no answer in {t_round + 15:.0f} s ({error_line(exc)})",
                        "hung": True,
                    }
                ]
            rounds.append(
                {
                    "ok": all(x.get("ok") for x in res),
                    "seconds": round(time.monotonic() - s, 3),
                    "trainer": res[:ranks],
                    "rollout": res[ranks:],
                }
            )
            if sum(not x["ok"] for x in rounds) >= CHURN_STOP_AFTER:
                break
            if res[0].get("died") or res[0].get("hung"):
                break  # the actors are gone, or still stuck in the last round: new rounds would only queue
    finally:
        stop_actors([*trainers, *rollouts])
    return {
        "ranks": ranks,
        "subset": sub,
        # what the ranks really used: on a node whose GPUs Ray counts but torch cannot open, gloo
        "backend": sorted(
            {x["backend"] for r in rounds for x in (*r["trainer"], *r["rollout"]) if "backend" in x}
        )
        or ["nccl" if gpu else "gloo"],
        "asked": opts.active.comm_inits,
        "rounds": rounds,
        "seconds": round(time.monotonic() - t0, 2),
    }


def ipc_many_handles(
    opts: DoctorOptions,
    ranks: int,
    gpu: bool,
    where: Callable[[int], Any],
    progress: Callable[[str], None],
    share: float = 0.5,
) -> dict:
    import ray

    count, nbytes, rounds = opts.active.ipc_handles, opts.active.ipc_handle_bytes, opts.active.ipc_rounds
    progress(f"level 2: {count} IPC handles per GPU held open across processes, {rounds} rewrite(s) each")
    exporters = _peers(ranks, gpu, where, share)
    importers = _peers(ranks, gpu, where, share)
    t = opts.active.timeout
    files: list[str] = []
    out: dict[str, Any] = {"ranks": ranks, "handles": count, "nbytes": nbytes, "rounds": rounds, "gpus": []}
    t0 = time.monotonic()
    try:
        exported = ray.get([e.export_many.remote(count, nbytes) for e in exporters], timeout=t)
        for exp in exported:
            files += exp.get("files", [])
        opened = ray.get(
            [
                imp.open_many.remote(exp.get("handles", []))
                for imp, exp in zip(importers, exported, strict=True)
            ],
            timeout=t,
        )
        for i, (exp, op) in enumerate(zip(exported, opened, strict=True)):
            row: dict[str, Any] = {
                "bundle": i,
                "exporter_pid": exp.get("pid"),
                "opened": op.get("opened", 0),
                "mismatches": [],
            }
            if "error" in exp:
                row["error"] = f"export: {exp['error']}"
            elif gpu and not exp.get("gpu"):  # CPU tensors would cross: no GPU IPC would be judged
                row["error"] = "the exporting actor sees no GPU (actor-masks says why)"
            elif "error" in op:
                row["error"] = f"open of handle {op['opened'] + 1}: {op['error']}"
            out["gpus"].append(row)
        for r in range(1, rounds + 1):
            live = [i for i, row in enumerate(out["gpus"]) if "error" not in row]
            sums = ray.get([exporters[i].rewrite.remote(r) for i in live], timeout=t)
            bad = ray.get(
                [importers[i].check_many.remote(s) for i, s in zip(live, sums, strict=True)], timeout=t
            )
            for i, ks in zip(live, bad, strict=True):
                out["gpus"][i]["mismatches"] += [{"round": r, "handle": k} for k in ks]
        ray.get([a.release.remote() for a in [*importers, *exporters]], timeout=t)
    finally:
        stop_actors([*importers, *exporters])
        for path in files:
            remove_shared_file(path)
    out["seconds"] = round(time.monotonic() - t0, 2)
    return out
