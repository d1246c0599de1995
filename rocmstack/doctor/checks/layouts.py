"""Judges of the layout probes (rocmstack.doctor.collect.layouts): masks as each process of the job sees them,
IPC across differing masks, communicators made again and again, and many IPC handles at once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rocmstack.doctor.checks.fabric import active_data, human_bytes
from rocmstack.doctor.checks.visibility import TRUTHY
from rocmstack.doctor.model import Check, DoctorOptions, Result, failed, passed, skipped, warned
from rocmstack.platform.masks import MASK_VARS, mask_view
from rocmstack.platform.snapshot import Snapshot

MASK_FIX = (
    "Let Ray set one mask per actor and keep HIP_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES equal (or set "
    "both RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES=1 and RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES=1 and "
    "pick devices by Ray's GPU ids); do not export a mask in the image or a .bashrc that actors inherit"
)

# What a failed communicator says, the cause it points to, and where it was reported.
COMM_CAUSES = (
    (
        "invalid device pointer",
        "the P2P transport's IPC import (cudaIpcOpenMemHandle) failed",
        "https://github.com/ROCm/rocm-systems/issues/8178",
    ),
    (
        "hipipcgetmemhandle",
        "a buffer could not be exported over IPC (expandable segments?)",
        "https://github.com/vllm-project/vllm/issues/42609",
    ),
    (
        "invalid argument",
        "a HIP/CUDA call was refused during set-up",
        "https://github.com/ROCm/rccl/issues/1454",
    ),
    (
        "no socket interface",
        "the library found no network interface for its bootstrap (NCCL_SOCKET_IFNAME names none here?)",
        "",
    ),
    ("process died", "a rank's process died: RCCL/NCCL abort the process on a fatal error", ""),
    ("timed out", "a rank never joined: a hang at init", ""),
    ("timeout", "a rank never joined: a hang at init", ""),
    ("no answer", "a rank never returned: a hang", ""),
)


def _masks(env: Mapping[str, str]) -> str:
    shown = [f"{k}={env[k]}" for k in MASK_VARS if k in env]
    return ", ".join(shown) or "no mask"


def _uuids(view: Mapping[str, Any]) -> list[str]:
    return [d["uuid"] for d in view.get("devices", []) if d.get("uuid")]


def _short(uuid: str) -> str:
    return uuid[:13] if len(uuid) > 13 else uuid


def _view_problems(who: str, view: Mapping[str, Any], vendor: str, physical: int) -> list[str]:
    """What is wrong in one process's own view: an error, a device it counts but cannot use, masks that
    disagree, and an engine worker that sees other GPUs than its parent."""
    out = []
    env = view.get("env", {})
    if "error" in view:
        out.append(f"{who}: {view['error']} ({_masks(env)})")
    for d in view.get("devices", []):
        if d.get("ok") is False:
            out.append(f"{who}: device {d['index']} is counted but cannot be used: {d.get('error')}")
    out += [f"{who}: {p}" for p in mask_view(vendor, physical, env).problems]
    worker = view.get("worker")
    if worker is not None:
        if "error" in worker:
            out.append(f"{who}'s engine worker: {worker['error']}")
        elif _uuids(worker) != _uuids(view):
            out.append(
                f"{who}'s engine worker sees {[_short(u) for u in _uuids(worker)]} "
                f"({_masks(worker.get('env', {}))}), the actor {[_short(u) for u in _uuids(view)]}: "
                "the worker's mask differs from the one Ray set for the actor"
            )
        else:
            out += [
                f"{who}'s engine worker: device {d['index']} cannot be used: {d.get('error')}"
                for d in worker.get("devices", [])
                if d.get("ok") is False
            ]
    return out


def _noset(env: Mapping[str, str], vendor: str) -> bool:
    """Ray leaves this actor's mask alone: the NOSET variable of the mask Ray would set is on."""
    names = ("HIP",) if vendor == "amd" else ("CUDA",) if vendor == "nvidia" else ("HIP", "CUDA")
    return any(env.get(f"RAY_EXPERIMENTAL_NOSET_{n}_VISIBLE_DEVICES", "").lower() in TRUTHY for n in names)


def _whole_problems(who: str, view: Mapping[str, Any], ranks: int) -> list[str]:
    """An actor Ray does not mask must see the node, and Ray's GPU id must name one of its devices."""
    seen = _uuids(view)
    if len(seen) < ranks:
        return [
            f"{who} sees {len(seen)} of this node's {ranks} GPU(s) ({_masks(view.get('env', {}))}): "
            "Ray masked it anyway, or a mask it inherited hides GPUs"
        ]
    if view.get("index", 0) >= len(seen):
        return [f"{who}: Ray's GPU id names index {view.get('index')}, beyond the {len(seen)} it sees"]
    return []


def actor_masks(snap: Snapshot, opts: DoctorOptions) -> Result:
    data, problem = active_data(snap, "actor_masks")
    if problem:
        return problem
    vendor, ranks = snap.vendor(), data["ranks"]
    # masks index the node's devices, not the ones Ray was left with (an inherited CUDA_VISIBLE_DEVICES=4,5)
    physical = snap.physical_count() or ranks
    problems: list[str] = []
    used: dict[str, int] = {}  # the GPU each bundle's Ray-assigned worker uses -> the bundle
    for i, view in enumerate(data["masked"]):
        unmasked = _noset(view.get("env", {}), vendor)
        who = f"GPU bundle {i}, {'' if unmasked else 'Ray-masked '}actor (num_gpus=0.5)"
        problems += _view_problems(who, view, vendor, physical)
        if unmasked:  # the image sets RAY_EXPERIMENTAL_NOSET_*: Ray leaves the mask alone, as for whole
            problems += _whole_problems(who, view, ranks)
            continue
        ids, seen = view.get("ray_gpu_ids", []), _uuids(view)
        if len(seen) != len(ids):
            problems.append(
                f"{who}: Ray gave it GPU {','.join(ids) or 'none'} but torch sees {len(seen)} device(s) "
                f"({_masks(view.get('env', {}))})"
            )
        if seen:
            if seen[0] in used:
                problems.append(
                    f"{who} and bundle {used[seen[0]]} both use GPU {_short(seen[0])}: Ray gave them "
                    "different GPUs, the masks did not follow"
                )
            used.setdefault(seen[0], i)
    for i, view in enumerate(data["whole"]):
        who = f"GPU bundle {i}, unmasked actor (RAY_EXPERIMENTAL_NOSET_*)"
        problems += _view_problems(who, view, vendor, physical)
        problems += _whole_problems(who, view, ranks)
    if problems:
        return failed(
            f"{len(problems)} process(es) see GPUs other than Ray gave them", *problems, fix=MASK_FIX
        )
    noset = all(_noset(m.get("env", {}), vendor) for m in data["masked"])
    detail = [
        f"bundle {i}: {'actor' if noset else 'Ray-masked actor'} {_masks(m.get('env', {}))} -> "
        f"{_short(_uuids(m)[min(m.get('index', 0), len(_uuids(m)) - 1) if noset else 0])}; its engine worker "
        f"the same; unmasked actor sees {len(_uuids(w))} GPU(s), its engine worker the same"
        for i, (m, w) in enumerate(zip(data["masked"], data["whole"], strict=True))
        if _uuids(m)
    ]
    zero = data["zero"]
    if not _uuids(zero):
        return warned(
            f"actors started with num_gpus=0 see no GPU ({_masks(zero.get('env', {}))}): Ray sets an empty mask "
            "for them, so a framework worker started that way that uses the GPU fails",
            *detail,
            fix="Unset RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO or set it to 0, or give such workers a GPU share",
        )
    how = (
        "the environment sets RAY_EXPERIMENTAL_NOSET_*: every actor and its engine worker see the node, and "
        "Ray's GPU id names one of their devices"
        if noset
        else "every Ray-masked actor and its engine worker see the one GPU Ray gave them; unmasked actors see all"
    )
    return passed(f"{ranks} GPU(s): {how}; num_gpus=0 actors see {len(_uuids(zero))}", *detail)


def weight_sync_masks(snap: Snapshot, opts: DoctorOptions) -> Result:
    data, problem = active_data(snap, "actor_masks")
    if problem:
        return problem
    if "ipc_skipped" in data:
        return skipped(f"no IPC handle was tried: {data['ipc_skipped']}")
    rows = data["ipc"]
    if not rows:
        return failed(
            "no IPC handle crossed the masks: the probe judged nothing", fix="see the report's details"
        )
    failures, notes = [], []
    for row in rows:
        where = f"GPU bundle {row['bundle']}, {row['direction']}"
        if "export_error" in row:
            failures.append(f"{where}: export failed: {row['export_error']}")
            continue
        rem = row.get("remapped", {})
        if not rem.get("ok"):
            failures.append(
                f"{where}: the handle of GPU {_short(row['uuid'])} (exporter's index {row['index']}) opened at the "
                f"importer's own index of that GPU: {rem.get('error') or 'checksum differs'}"
            )
        elif rem.get("uuid") != row["uuid"]:
            failures.append(
                f"{where}: opened on GPU {_short(rem.get('uuid', '?'))}, exported on {_short(row['uuid'])}"
            )
        plain = row.get("plain")
        if plain is not None:
            landed = plain.get("error") or (
                "the same GPU, checksum equal" if plain.get("ok") else "another GPU or other bytes"
            )
            notes.append(f"{where}: opened as torch opens it (the exporter's index {row['index']}): {landed}")
    if failures:
        return failed(
            f"{len(failures)} of {len(rows)} IPC handle(s) failed across Ray-masked and unmasked processes",
            *failures,
            *notes,
            fix="Open IPC handles at the importer's index of the exporter's GPU, found by UUID (as verl and SGLang "
            "do); on AMD check that HIP IPC works between processes with different HIP_VISIBLE_DEVICES",
        )
    if all(row.get("index", 0) == 0 for row in rows if "export_error" not in row):
        notes.append(
            "every exporter used device index 0: a handle made on another index was not tried (one GPU here)"
        )
    return passed(
        f"{len(rows)} IPC handle(s) crossed between Ray-masked and unmasked actors, both ways, opened by UUID, "
        "checksums equal",
        *notes,
    )


def _last_error(detail: str) -> str:
    """The CUDA/HIP cause NCCL and RCCL print after 'Last error:' (torch keeps it on the next line)."""
    _, sep, rest = detail.partition("Last error:")
    return rest.strip().splitlines()[0].strip() if sep and rest.strip() else ""


def _cause(text: str) -> str:
    low = text.lower()
    for needle, cause, source in COMM_CAUSES:
        if needle in low:
            return f"{cause}" + (f"; reported in {source}" if source else "")
    return "unclassified"


def _backend(data: Mapping[str, Any]) -> str:
    used = data["backend"]
    return "/".join(used) if isinstance(used, list) else str(used)


def communicator_churn(snap: Snapshot, opts: DoctorOptions) -> Result:
    data, problem = active_data(snap, "communicator_churn")
    if problem:
        return problem
    rounds = data["rounds"]
    if not rounds:
        return failed("no communicator was made: the probe judged nothing", fix="see the report's details")
    failures = []
    for n, rnd in enumerate(rounds, 1):
        for group, size in (("trainer", data["ranks"]), ("rollout", data["subset"])):
            for rank, res in enumerate(rnd.get(group, [])):
                if not res.get("ok"):
                    text = f"{res.get('error', '')} {res.get('detail', '')}"
                    last = _last_error(res.get("detail", ""))
                    failures.append(
                        f"init {n}, {group} communicator ({size} rank(s)) rank {rank}: {res.get('error')}"
                        + (f"; last error: {last}" if last else "")
                        + f" [{_cause(text)}]"
                    )
    bad = sum(not r["ok"] for r in rounds)
    made = f"{len(rounds)} of {data['asked']} asked" if len(rounds) < data["asked"] else f"{len(rounds)}"
    if failures:
        return failed(
            f"{bad} of {made} communicator round(s) failed ({_backend(data)})",
            *failures,
            fix="Run with NCCL_DEBUG=INFO for the library's reason; an intermittent IPC failure at init points "
            "to the driver/ROCm version (see the cited report); a hang to a rank that never joined",
        )
    inits = sorted(x["init_s"] for r in rounds for x in (*r["trainer"], *r["rollout"]) if "init_s" in x)
    return passed(
        f"{len(rounds)} fresh {_backend(data)} communicator(s) over {data['ranks']} rank(s), each alive beside "
        f"one over {data['subset']} in other processes: every all-reduce right",
        f"init median {inits[len(inits) // 2]:.2f} s, slowest {inits[-1]:.2f} s; {data['seconds']} s in all"
        if inits
        else f"{data['seconds']} s in all",
    )


def ipc_many_handles(snap: Snapshot, opts: DoctorOptions) -> Result:
    data, problem = active_data(snap, "ipc_many_handles")
    if problem:
        return problem
    gpus = data["gpus"]
    if not gpus:
        return failed("no GPU's handles were tried: the probe judged nothing", fix="see the report's details")
    failures = []
    for row in gpus:
        if "error" in row:
            failures.append(
                f"bundle {row['bundle']}: {row['error']} ({row['opened']} of {data['handles']} open)"
            )
        for m in row["mismatches"][:5]:
            failures.append(
                f"bundle {row['bundle']}: handle {m['handle']} read other bytes after rewrite {m['round']}"
            )
        if len(row["mismatches"]) > 5:
            failures.append(f"bundle {row['bundle']}: {len(row['mismatches']) - 5} more mismatches")
    if failures:
        return failed(
            f"IPC at scale failed on {len({f.split(':')[0] for f in failures})} bundle(s): "
            f"{data['handles']} handles of {human_bytes(data['nbytes'])} per GPU",
            *failures,
            fix="Keep fewer IPC handles open per process (bucket the weights into fewer, larger buffers); on AMD "
            "check vm.max_map_count and the ROCm version against the cited report",
        )
    return passed(
        f"{data['handles']} IPC handles of {human_bytes(data['nbytes'])} per GPU on {len(gpus)} bundle(s) held open "
        f"by another process, {data['rounds']} rewrites each: every checksum equal",
        f"{data['seconds']} s",
    )


CHECKS = (
    Check(
        "actor-masks",
        "visibility",
        "Masks as Ray actors and their engine workers see them",
        actor_masks,
        "https://github.com/vllm-project/vllm/issues/12572",
        frozenset({"actor-masks"}),
        level=2,
    ),
    Check(
        "weight-sync-masks",
        "fabric",
        "IPC weight sync between processes with different masks",
        weight_sync_masks,
        "https://github.com/vllm-project/vime/issues/418",
        frozenset({"actor-masks"}),
        level=2,
    ),
    Check(
        "communicator-churn",
        "fabric",
        "Many fresh communicators, each beside a second one",
        communicator_churn,
        "https://github.com/ROCm/rocm-systems/issues/8178",
        frozenset({"communicator-churn"}),
        level=2,
    ),
    Check(
        "ipc-many-handles",
        "fabric",
        "Many IPC handles per GPU open at once, rewritten and checksummed",
        ipc_many_handles,
        "https://github.com/microsoft/mscclpp/pull/819",
        frozenset({"ipc-many-handles"}),
        level=2,
    ),
)
