"""Weight-sync bench: time to push a full HF-named state dict from a trainer process to a rollout engine.

- `ipc`: trainer and rollout share one device (colocated RL, as verl does): the rollout process opens
  the trainer's tensors through CUDA/HIP IPC handles (shared memory on CPU) and copies them into its
  engine in place.
- `dist`: trainer on rank 0, rollout on rank 1, one tensor broadcast at a time over NCCL/RCCL (GPUs) or
  gloo (CPU), then copied into the engine.

The rollout side is the reference engine's real load_hf_state_dict (built through the rollout registry),
and each run checks that the bytes arrived (a checksum of the trainer's weights against the engine's).
"""

from __future__ import annotations

import queue
import statistics
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from rocmstack.gpu.rollout import make_engine
from rocmstack.gpu.shapes import ModelShape, shape_from_config
from rocmstack.gpu.weight_sync import free_port
from rocmstack.status import Status

_START_TIMEOUT_S = 180.0


@dataclass(frozen=True, kw_only=True)
class SyncResult:
    method: str  # ipc | nccl | gloo
    status: str  # pass | skip | error
    reason: str | None = None
    bytes: int = 0
    first_s: float | None = None  # first push: includes opening IPC handles / communicator setup
    median_s: float | None = None
    gb_per_s: float | None = None  # payload bytes / median time
    vs_device_copy: float | None = None  # gb_per_s over the device copy's payload rate
    verified: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def hf_shapes(shape: ModelShape) -> dict[str, tuple[int, ...]]:
    """HF Qwen3 parameter names and shapes, as a trainer's state_dict() yields them."""
    s = shape
    out: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (s.vocab_size, s.hidden_size)}
    for i in range(s.num_layers):
        p = f"model.layers.{i}."
        out |= {
            p + "input_layernorm.weight": (s.hidden_size,),
            p + "self_attn.q_proj.weight": (s.q_size, s.hidden_size),
            p + "self_attn.k_proj.weight": (s.kv_size, s.hidden_size),
            p + "self_attn.v_proj.weight": (s.kv_size, s.hidden_size),
            p + "self_attn.o_proj.weight": (s.hidden_size, s.q_size),
            p + "self_attn.q_norm.weight": (s.head_dim,),
            p + "self_attn.k_norm.weight": (s.head_dim,),
            p + "post_attention_layernorm.weight": (s.hidden_size,),
            p + "mlp.gate_proj.weight": (s.intermediate_size, s.hidden_size),
            p + "mlp.up_proj.weight": (s.intermediate_size, s.hidden_size),
            p + "mlp.down_proj.weight": (s.hidden_size, s.intermediate_size),
        }
    out["model.norm.weight"] = (s.hidden_size,)
    if not s.tie_word_embeddings:
        out["lm_head.weight"] = (s.vocab_size, s.hidden_size)
    return out


def _random_state_dict(shape: ModelShape, device: Any, dtype: Any, seed: int) -> dict[str, Any]:
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    return {
        name: torch.empty(size, device=device, dtype=dtype).normal_(0.0, 0.02, generator=gen)
        for name, size in hf_shapes(shape).items()
    }


def _checksum(engine: Any) -> float:
    # Weights land in fused tensors; the final norm and the last layer's down projection are not fused.
    return float(engine.final_norm.double().sum() + engine.layers[-1].down.double().sum())


def _trainer_checksum(sd: Mapping[str, Any], shape: ModelShape) -> float:
    last = f"model.layers.{shape.num_layers - 1}.mlp.down_proj.weight"
    return float(sd["model.norm.weight"].double().sum() + sd[last].double().sum())


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _receiver(config: dict[str, Any], device: Any, dtype: Any) -> Any:
    """The rollout engine that takes the pushed weights: the reference engine, as the smoke's rollout is."""
    engine, _ = make_engine(
        config, device=device, dtype=dtype, max_batch=1, max_seq_len=8, prefer="reference", fused=None
    )
    return engine


def _ipc_rollout(
    config: dict[str, Any], device_str: str, dtype_name: str, repeats: int, inbox: Any, outbox: Any
) -> None:
    import torch

    try:
        device = torch.device(device_str)
        engine = _receiver(config, device, getattr(torch, dtype_name))
        outbox.put(("ready", None))
        state_dict = inbox.get()  # tensors arrive as IPC handles (GPU) or shared memory (CPU)
        engine.load_hf_state_dict(state_dict)
        _sync(device)
        first_done = time.monotonic()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            engine.load_hf_state_dict(state_dict)
            _sync(device)
            times.append(time.perf_counter() - t0)
        check = _checksum(engine)
        del state_dict
        outbox.put(("done", {"first_done": first_done, "times": times, "check": check}))
    except Exception as exc:
        outbox.put(("error", f"{type(exc).__name__}: {exc}"))


def _result(
    method: str, nbytes: int, first_s: float, times: list[float], copy_bw: float | None, verified: bool
) -> SyncResult:
    med = statistics.median(times)
    gbps = nbytes / med / 1e9
    # The copy bandwidth counts bytes read + written; a copy's payload rate is half of it.
    vs = gbps / (copy_bw / 2 / 1e9) if copy_bw else None
    return SyncResult(
        method=method, status=Status.PASS, bytes=nbytes, first_s=first_s, median_s=med, gb_per_s=gbps,
        vs_device_copy=vs, verified=verified,
    )  # fmt: skip


def _get(box: Any, timeout: float, proc: Any) -> tuple[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            kind, payload = box.get(timeout=1.0)
            return str(kind), payload
        except queue.Empty:
            if not proc.is_alive():
                return ("error", f"worker exited with code {proc.exitcode}")
            if time.monotonic() > deadline:
                return ("error", f"worker gave no answer in {timeout:.0f} s")


def _reap(*procs: Any) -> None:
    for proc in procs:
        proc.join(timeout=30)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=10)


def bench_ipc(
    config: Mapping[str, Any],
    *,
    device: str,
    dtype: str = "bfloat16",
    repeats: int = 5,
    copy_bandwidth: float | None = None,
    timeout_s: float = 300.0,
) -> SyncResult:
    import torch
    import torch.multiprocessing as tmp

    shape = shape_from_config(config)
    dev = torch.device(device)
    state_dict = _random_state_dict(shape, dev, getattr(torch, dtype), seed=1)
    nbytes = sum(t.numel() * t.element_size() for t in state_dict.values())
    ctx = tmp.get_context("spawn")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(
        target=_ipc_rollout, args=(dict(config), str(dev), dtype, repeats, inbox, outbox), daemon=True
    )
    proc.start()
    try:
        kind, payload = _get(outbox, _START_TIMEOUT_S, proc)
        if kind != "ready":
            return SyncResult(method="ipc", status=Status.ERROR, reason=str(payload), bytes=nbytes)
        _sync(dev)
        t0 = time.monotonic()
        inbox.put(state_dict)
        kind, payload = _get(outbox, timeout_s, proc)
        if kind != "done":
            return SyncResult(method="ipc", status=Status.ERROR, reason=str(payload), bytes=nbytes)
        verified = abs(payload["check"] - _trainer_checksum(state_dict, shape)) < 1e-3 * max(
            1.0, abs(payload["check"])
        )
        return _result("ipc", nbytes, payload["first_done"] - t0, payload["times"], copy_bandwidth, verified)
    finally:
        _reap(proc)


def _dist_worker(
    rank: int,
    config: dict[str, Any],
    backend: str,
    device_kind: str,
    dtype_name: str,
    port: int,
    repeats: int,
    outbox: Any,
) -> None:
    import torch
    import torch.distributed as dist

    try:
        device = torch.device(f"cuda:{rank}") if device_kind == "cuda" else torch.device("cpu")
        bind: dict[str, Any] = {}
        if device.type == "cuda":
            torch.cuda.set_device(device)
            bind["device_id"] = device  # NCCL otherwise guesses the rank's GPU (and warns it may hang)
        dist.init_process_group(
            backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, **bind
        )
        dtype = getattr(torch, dtype_name)
        shape = shape_from_config(config)
        engine: Any = None  # the receiving rank's rollout engine
        if rank == 0:
            tensors = _random_state_dict(shape, device, dtype, seed=1)
        else:
            tensors = {n: torch.empty(s, device=device, dtype=dtype) for n, s in hf_shapes(shape).items()}
            engine = _receiver(config, device, dtype)
        times = []
        for _ in range(repeats + 1):  # the first push also sets the communicator up
            dist.barrier()
            _sync(device)
            t0 = time.perf_counter()
            for name in tensors:  # one fixed order on both ranks
                dist.broadcast(tensors[name], src=0)
            if engine is not None:
                engine.load_hf_state_dict(tensors)
            _sync(device)
            times.append(time.perf_counter() - t0)
        trainer_check = torch.tensor(
            [_trainer_checksum(tensors, shape) if rank == 0 else 0.0], dtype=torch.float64, device=device
        )
        dist.broadcast(trainer_check, src=0)
        if engine is not None:
            check = _checksum(engine)
            ok = abs(check - float(trainer_check[0].item())) < 1e-3 * max(1.0, abs(check))
            nbytes = sum(t.numel() * t.element_size() for t in tensors.values())
            outbox.put(("done", {"times": times, "verified": ok, "bytes": nbytes}))
        dist.destroy_process_group()
    except Exception as exc:
        outbox.put(("error", f"rank {rank}: {type(exc).__name__}: {exc}"))


def bench_dist(
    config: Mapping[str, Any],
    *,
    device: str,
    dtype: str = "bfloat16",
    repeats: int = 3,
    copy_bandwidth: float | None = None,
    timeout_s: float = 300.0,
) -> SyncResult:
    """Two processes: rank 0 (trainer) broadcasts to rank 1 (rollout). NCCL/RCCL on GPUs, gloo on CPU."""
    import torch
    import torch.multiprocessing as tmp

    kind = torch.device(device).type
    method = "nccl" if kind == "cuda" else "gloo"
    if kind == "cuda" and torch.cuda.device_count() < 2:
        return SyncResult(
            method=method,
            status=Status.SKIP,
            reason=f"needs 2 GPUs on one host, this machine has {torch.cuda.device_count()}",
        )
    ctx = tmp.get_context("spawn")
    outbox = ctx.Queue()
    port = free_port()
    procs = [
        ctx.Process(
            target=_dist_worker,
            args=(r, dict(config), method, kind, dtype, port, repeats, outbox),
            daemon=True,
        )
        for r in range(2)
    ]
    for p in procs:
        p.start()
    try:
        kind_, payload = _get(outbox, timeout_s, procs[1])
        if kind_ != "done":
            return SyncResult(method=method, status=Status.ERROR, reason=str(payload))
        times = payload["times"]
        return _result(method, payload["bytes"], times[0], times[1:], copy_bandwidth, payload["verified"])
    finally:
        _reap(*procs)
