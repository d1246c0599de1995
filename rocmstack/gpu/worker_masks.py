"""Each worker's own view of the GPUs in a job's first step, and the judge of those views.

Every Python process of the job records itself (rocmstack/gpu/maskhook/sitecustomize.py): its masks, Ray's
identity for it, the device count torch reports and the physical GPU (PCI address) behind its current device.
No framework cooperation is needed: ``job_env`` puts the hook folder first on the job's PYTHONPATH, so Ray's
workers, an engine's multiprocessing workers and torchrun's ranks all load it; where the workers' PYTHONPATH
cannot be changed, ``ray_runtime_env`` gives the job's runtime_env a ``worker_process_setup_hook`` that
installs the same recorder (Ray honours that hook only in the job's runtime_env, ray.init's or a job
submission's, and a worker whose hook fails to import exits: rocmstack must be installed in every worker's
Python).

``judge`` reads the records against the allocation and returns one line per mismatch, naming the worker (Ray
actor name and class, torchrun rank, or command line, and pid). The processes judged are those that imported
torch (a worker whose masks leave it no GPU never starts a GPU runtime, so "started one" would miss exactly
the broken ones); launchers and agents that never import torch are not, their children are. The rules:

(a) masks: on AMD, CUDA_VISIBLE_DEVICES set without HIP_VISIBLE_DEVICES, and HIP and CUDA masks that
    disagree. HIP_VISIBLE_DEVICES alone is not a mismatch: it is what Ray itself leaves in every AMD GPU
    actor (ray/_private/accelerators/amd_gpu.py sets HIP_VISIBLE_DEVICES and nothing else).
(b) count: the devices torch counts must be those the process should see: a Ray actor that Ray masks (Ray
    gave it GPU ids and RAY_EXPERIMENTAL_NOSET_* for the vendor's mask is off) sees as many as Ray gave it
    (1 for num_gpus=1 or a fraction); a process that runs with the job's own masks is a whole-node process and
    sees the job's allocation on this node; any other process sees what its masks select
    (rocmstack.platform.masks.mask_view). A CPU build of torch counts 0, recorded and judged as such.
(c) sharing: two GPU workers on one physical GPU are a mismatch unless one started the other (the nearest
    ancestor that holds a GPU: a trainer and the engine worker it launched), Ray put both there (the same
    Ray GPU ids: fractional num_gpus, as colocated trainer and rollout actors are placed), or both carry the
    same ROCMSTACK_COLOCATE_GROUP (a launcher's mark, inherited by their children). A GPU worker is one Ray
    gave GPUs or a launcher gave a rank (RANK), or a process either started. Others that touch a GPU (the
    driver, verl's TaskRunner and its vLLM server actor, which Ray gives no GPU: verl 0.9.1 on an H200) are
    recorded and not counted: where they run is their framework's design. ``share`` raises the number of
    independent workers per GPU for a colocated job that marks nothing.
(d) remapping: ROCR_VISIBLE_DEVICES filters before HIP_VISIBLE_DEVICES indexes what it left, so a mask applied
    again on top of another names devices that are not there or more than are left (mask_view's problems, in
    the doctor's words); and a Ray-masked actor whose runtime started with a mask other than the one Ray set
    (its GPU ids) had the mask remapped on top of Ray's.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocmstack.platform.masks import MASK_VARS, mask_view, tokens

MASKS_DIR_ENV = "ROCMSTACK_MASKS_DIR"
COLOCATE_ENV = "ROCMSTACK_COLOCATE_GROUP"
SETUP_HOOK = "rocmstack.gpu.worker_masks.ray_setup_hook"
# As rocmstack.doctor.checks.visibility reads Ray's switches.
TRUTHY = ("1", "true", "yes", "on")
MAX_COMMAND = 80


def hook_dir() -> Path:
    """The folder to put first on a job's PYTHONPATH."""
    return Path(__file__).resolve().parent / "maskhook"


def job_env(masks_dir: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with the hook folder first on PYTHONPATH and the records' folder set.
    It must come first: ``site`` imports the first sitecustomize on sys.path, and this one runs the next."""
    out = dict(os.environ if env is None else env)
    rest = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(hook_dir())]
    out["PYTHONPATH"] = os.pathsep.join([str(hook_dir()), *rest])
    out[MASKS_DIR_ENV] = os.path.abspath(masks_dir)  # the job's processes do not share one working folder
    return out


def ray_runtime_env(
    masks_dir: str | os.PathLike[str], env_vars: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A job-level runtime_env (``ray.init(runtime_env=...)`` or ``ray job submit --runtime-env-json``) whose
    workers record themselves without the hook on their PYTHONPATH."""
    return {
        "env_vars": {MASKS_DIR_ENV: os.path.abspath(masks_dir), **(env_vars or {})},
        "worker_process_setup_hook": SETUP_HOOK,
    }


def ray_setup_hook() -> None:
    """Ray's worker_process_setup_hook: the recorder of the hook folder, in a worker that did not load it as
    its sitecustomize. Never raises (a hook that raises makes Ray stop the worker)."""
    try:
        from rocmstack.gpu.maskhook import sitecustomize as recorder

        recorder.install()
    except Exception:
        pass


# --- records -----------------------------------------------------------------------------------------------


def _str_map(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("not a mapping")
    return {str(k): str(v) for k, v in value.items()}


@dataclass(frozen=True)
class WorkerRecord:
    """One process, as it recorded itself."""

    path: str
    node: str
    pid: int
    ppid: int
    start_ns: int
    ancestors: tuple[int, ...]
    argv: tuple[str, ...]
    env: Mapping[str, str]  # at its last record
    env_init: Mapping[str, str] | None  # when its GPU runtime started
    title: str | None
    ray: Mapping[str, Any] | None
    torch: Mapping[str, Any] | None
    forked: bool
    error: str | None

    @classmethod
    def from_json(cls, data: Any, path: str) -> WorkerRecord:
        if not isinstance(data, dict) or data.get("v") != 1:
            raise ValueError("not a version 1 record")
        return cls(
            path=path,
            node=str(data["node"]),
            pid=int(data["pid"]),
            ppid=int(data["ppid"]),
            start_ns=int(data["start_ns"]),
            ancestors=tuple(int(p) for p in data.get("ancestors") or ()),
            argv=tuple(str(a) for a in data.get("argv") or ()),
            env=_str_map(data.get("env")),
            env_init=None if data.get("env_init") is None else _str_map(data["env_init"]),
            title=data.get("title"),
            ray=data.get("ray") if isinstance(data.get("ray"), dict) else None,
            torch=data.get("torch") if isinstance(data.get("torch"), dict) else None,
            forked=bool(data.get("forked")),
            error=data.get("error"),
        )

    @property
    def runtime_env(self) -> Mapping[str, str]:
        """The variables its GPU runtime started with, else those of its last record."""
        return self.env if self.env_init is None else self.env_init

    @property
    def masks(self) -> dict[str, str]:
        return {k: self.env[k] for k in MASK_VARS if k in self.env}

    @property
    def runtime_masks(self) -> dict[str, str]:
        env = self.runtime_env
        return {k: env[k] for k in MASK_VARS if k in env}

    @property
    def count(self) -> int | None:
        value = None if self.torch is None else self.torch.get("count")
        return value if isinstance(value, int) else None

    @property
    def device(self) -> int | None:
        value = None if self.torch is None else self.torch.get("device")
        return value if isinstance(value, int) else None

    @property
    def gpu(self) -> str | None:
        """The physical GPU behind its current device: PCI address, else UUID."""
        if self.torch is None or self.device is None:
            return None
        return self.torch.get("pci") or self.torch.get("uuid") or None

    @property
    def gpu_ids(self) -> tuple[str, ...]:
        return tuple(str(i) for i in (self.ray or {}).get("gpu_ids") or ())

    @property
    def rank(self) -> str | None:
        return self.env.get("RANK")

    @property
    def colocate(self) -> str | None:
        return self.env.get(COLOCATE_ENV) or None

    @property
    def name(self) -> str:
        where = f"pid {self.pid}"
        if self.ray and self.ray.get("actor_id"):
            cls = self.ray.get("class")
            label = self.ray.get("actor_name") or cls or str(self.ray["actor_id"])[:12]
            return (
                f"Ray actor {label} ({cls}, {where})"
                if cls and cls != label
                else f"Ray actor {label} ({where})"
            )
        if self.title and self.title.startswith("ray::"):
            return f"Ray worker {self.title[5:]} ({where})"
        command = _command(self.argv)
        if self.rank is not None:
            local = self.env.get("LOCAL_RANK")
            rank = f"rank {self.rank}" + (f" (local {local})" if local not in (None, self.rank) else "")
            return f"{rank} `{command}` ({where})"
        return f"`{command}` ({where})"


def _command(argv: tuple[str, ...]) -> str:
    if not argv:
        return "?"
    first = os.path.basename(argv[0])
    words = ["python" if first.startswith("python") else first, *argv[1:]]
    text = " ".join(" ".join(words).split())
    return text if len(text) <= MAX_COMMAND else text[: MAX_COMMAND - 3] + "..."


@dataclass(frozen=True)
class RecordSet:
    records: tuple[WorkerRecord, ...]
    unreadable: tuple[str, ...]  # "file: why"


def read_records(folder: str | os.PathLike[str]) -> RecordSet:
    """The records in ``folder``, oldest first per node; temporaries (``.*.tmp``) are skipped and files that
    do not parse are listed, not raised."""
    root = Path(folder)
    try:
        paths = sorted(p for p in root.iterdir() if p.suffix == ".json" and not p.name.startswith("."))
    except FileNotFoundError:
        return RecordSet((), (f"{root}: no such folder",))
    except OSError as exc:
        return RecordSet((), (f"{root}: {exc.strerror or exc}",))
    records, unreadable = [], []
    for path in paths:
        try:
            records.append(WorkerRecord.from_json(json.loads(path.read_text(encoding="utf-8")), str(path)))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            unreadable.append(f"{path.name}: {exc}")
    records.sort(key=lambda r: (r.node, r.start_ns, r.pid))
    return RecordSet(tuple(records), tuple(unreadable))


# --- the judge ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mismatch:
    node: str
    pid: int
    worker: str
    rule: str  # masks | count | shared | remapped
    line: str

    def __str__(self) -> str:
        return self.line


@dataclass(frozen=True)
class MaskVerdict:
    judged: int
    mismatches: tuple[Mismatch, ...]

    @property
    def ok(self) -> bool:
        return not self.mismatches

    @property
    def lines(self) -> tuple[str, ...]:
        return tuple(m.line for m in self.mismatches)


def _masks(env: Mapping[str, str]) -> str:
    shown = [f"{k}={env[k]}" for k in MASK_VARS if k in env]
    return ", ".join(shown) or "no mask"


def _vendor_var(vendor: str) -> str:
    return "HIP_VISIBLE_DEVICES" if vendor == "amd" else "CUDA_VISIBLE_DEVICES"


def _ray_masked(record: WorkerRecord, vendor: str) -> bool:
    """Ray gave it GPUs and set its mask (the NOSET switch of the vendor's mask is off)."""
    noset = f"RAY_EXPERIMENTAL_NOSET_{_vendor_var(vendor)}"
    return bool(record.gpu_ids) and record.runtime_env.get(noset, "").lower() not in TRUTHY


def _mask_lines(r: WorkerRecord, vendor: str, physical: int) -> list[tuple[str, str]]:
    env = r.runtime_env
    out: list[tuple[str, str]] = []
    hip, cuda = env.get("HIP_VISIBLE_DEVICES"), env.get("CUDA_VISIBLE_DEVICES")
    # The HIP runtime takes HIP_VISIBLE_DEVICES when it is non-empty and falls back to CUDA_VISIBLE_DEVICES
    # (ROCm clr, rocclr/device/rocm/rocdevice.cpp, Device::init: `HIP_VISIBLE_DEVICES[0] != '\0' ?
    # HIP_VISIBLE_DEVICES : CUDA_VISIBLE_DEVICES`); torch counts the same way (torch/cuda/__init__.py,
    # _parse_visible_devices: HIP first). CUDA_ takes over only where HIP_ is unset, so CUDA_ alone works
    # for this process, while Ray on AMD reads and writes HIP_VISIBLE_DEVICES only.
    if vendor == "amd" and cuda and not hip:
        out.append(
            (
                "masks",
                f"{r.name}: CUDA_VISIBLE_DEVICES={cuda} is set without HIP_VISIBLE_DEVICES: the HIP runtime "
                "and torch fall back to it, but Ray reads and sets only HIP_VISIBLE_DEVICES on AMD, so a mask "
                "Ray sets lands beside this one and the two disagree",
            )
        )
    out += [("masks", f"{r.name}: {p}") for p in mask_view(vendor, physical, env).problems]
    if _ray_masked(r, vendor):
        var = _vendor_var(vendor)
        ids = ",".join(r.gpu_ids)
        got = env.get(var)
        if got is None or tokens(got) != list(r.gpu_ids):
            ran = "its GPU runtime started with" if r.env_init is not None else "it ran with"
            out.append(
                (
                    "remapped",
                    f"{r.name}: Ray set {var}={ids} for it (its GPU ids), {ran} "
                    f"{var}={'unset' if got is None else got}: the mask was remapped on top of Ray's",
                )
            )
    return out


def _count_line(
    r: WorkerRecord, vendor: str, allocation: int, physical: int, job_masks: Mapping[str, str]
) -> str | None:
    count = r.count
    if count is None:
        return None
    env = r.runtime_env
    cpu = " (torch is a CPU build)" if r.torch and r.torch.get("build") == "cpu" else ""
    if _ray_masked(r, vendor):
        if count != len(r.gpu_ids):  # the doctor's actor-masks words
            return (
                f"{r.name}: Ray gave it GPU {','.join(r.gpu_ids)} but torch sees {count} device(s) "
                f"({_masks(env)}){cpu}"
            )
        return None
    if r.runtime_masks == dict(job_masks):
        if count != allocation:
            return (
                f"{r.name} counts {count} GPU(s), but it runs with the job's masks ({_masks(env)}) and the "
                f"job was given {allocation} on this node{cpu}"
            )
        return None
    expected = mask_view(vendor, physical, env).visible_count
    if expected is not None and count != expected:
        return f"{r.name} counts {count} GPU(s), but its masks ({_masks(env)}) select {expected}{cpu}"
    return None


def _share_lines(workers: list[WorkerRecord], share: int) -> list[Mismatch]:
    holders = {(r.node, r.pid): r for r in workers if r.gpu is not None}

    def parent(r: WorkerRecord) -> WorkerRecord | None:
        return next((holders[(r.node, p)] for p in r.ancestors if (r.node, p) in holders), None)

    def key(r: WorkerRecord) -> tuple[str, ...] | None:
        if r.colocate:
            return ("mark", r.colocate)
        root, seen = r, {r.pid}
        while (up := parent(root)) is not None and up.pid not in seen:
            root, seen = up, seen | {up.pid}
        if root.colocate:
            return ("mark", root.colocate)
        if root.gpu_ids:
            return ("ray", *root.gpu_ids)
        if root.rank is not None:
            return ("rank", str(root.pid))
        # given no GPU by Ray nor a rank by a launcher (a driver or a helper that touched the GPU, a server a
        # framework starts beside its trainer, as verl its vLLM rollout): where it runs is its framework's
        # design, recorded but not counted as a second user
        return None

    by_gpu: dict[tuple[str, str], dict[tuple[str, ...], WorkerRecord]] = defaultdict(dict)
    for r in holders.values():
        k = key(r)
        if k is not None:
            by_gpu[(r.node, str(r.gpu))].setdefault(k, r)
    out = []
    for (node, gpu), users in by_gpu.items():
        if len(users) <= max(1, share):
            continue
        firsts = list(users.values())
        names = ", ".join(u.name for u in firsts[:-1]) + f" and {firsts[-1].name}"
        if all(k[0] == "ray" for k in users):
            why = "Ray gave them different GPUs, the masks did not follow"
        else:
            why = (
                "none of them started the other, Ray did not place them together, and they are not marked "
                f"colocated ({COLOCATE_ENV})"
                + (f"; this job allows {share} user(s) per GPU" if share > 1 else "")
            )
        line = f"{names} {'both use' if len(firsts) == 2 else 'all use'} GPU {gpu}: {why}"
        out.append(Mismatch(node, firsts[-1].pid, firsts[-1].name, "shared", line))
    return out


def judge(
    records: Iterable[WorkerRecord],
    *,
    vendor: str,
    allocation: int,
    physical: int | None = None,
    job_env: Mapping[str, str] | None = None,
    share: int = 1,
) -> MaskVerdict:
    """Judge the records of the processes that imported torch (module docstring: the rules).

    ``allocation``: the GPUs the job was given on the node; ``physical``: the devices a process without any
    mask can reach (the node's count on bare metal, default ``allocation``, as in a container given only
    those); ``job_env``: the environment the job was started with (its masks make a whole-node process);
    ``share``: independent users allowed per GPU."""
    workers = [r for r in records if r.torch is not None]
    pool = allocation if physical is None else physical
    job_masks = {k: v for k, v in (job_env or {}).items() if k in MASK_VARS}
    mismatches: list[Mismatch] = []
    for r in workers:
        for rule, line in _mask_lines(r, vendor, pool):
            mismatches.append(Mismatch(r.node, r.pid, r.name, rule, line))
        count = _count_line(r, vendor, allocation, pool, job_masks)
        if count is not None:
            mismatches.append(Mismatch(r.node, r.pid, r.name, "count", count))
    mismatches += _share_lines(workers, share)
    return MaskVerdict(len(workers), tuple(mismatches))
