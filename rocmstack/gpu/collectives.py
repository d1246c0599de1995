"""Collective bandwidth through torch.distributed (NCCL/RCCL on GPUs, gloo on CPU), measured the way
nccl-tests measures it, and the transport the library chose, read from its own ``NCCL_DEBUG=INFO`` log.

The caller owns the process group (one rank per GPU, any launcher); every function here that runs a
collective must be called by every rank of the group with the same arguments.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported where a collective runs: parsing logs and formulas need none
    import torch

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")
MIB = 1 << 20
GIB = 1 << 30
DEFAULT_MIN_BYTES = MIB
DEFAULT_MAX_BYTES = GIB


def bus_factor(op: str, ranks: int) -> float:
    """busbw = algbw x factor, the factors of nccl-tests (doc/PERFORMANCE.md,
    https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md#bus-bandwidth: AllReduce 2(n-1)/n,
    ReduceScatter and AllGather (n-1)/n, Broadcast 1; AllToAll (n-1)/n as in src/alltoall.cu). They make
    busbw comparable to the hardware's link speed whatever the rank count."""
    if ranks < 1:
        raise ValueError(f"ranks must be >= 1, got {ranks}")
    n = ranks
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if op == "broadcast":
        return 1.0
    raise ValueError(f"unknown collective {op!r}; known: {', '.join(OPS)}")


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$", re.IGNORECASE)
_UNIT = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """'1M', '512MiB', '1G', '4096' -> bytes (binary units, as nccl-tests' -b/-e)."""
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"not a size: {text!r} (e.g. 1M, 256MiB, 1G)")
    value = float(m.group(1)) * _UNIT[m.group(2).upper()]
    if value < 1:
        raise ValueError(f"size {text!r} is below one byte")
    return int(value)


def size_sweep(lo: int = DEFAULT_MIN_BYTES, hi: int = DEFAULT_MAX_BYTES, factor: int = 2) -> list[int]:
    """lo, lo*factor, ... up to hi inclusive (nccl-tests' -b lo -e hi -f factor)."""
    if lo < 1 or hi < lo or factor < 2:
        raise ValueError(f"bad sweep {lo}..{hi} x{factor}: need 1 <= lo <= hi and factor >= 2")
    sizes, s = [], lo
    while s <= hi:
        sizes.append(s)
        s *= factor
    return sizes


@dataclass(frozen=True)
class Measurement:
    """One collective at one size. ``nbytes`` is nccl-tests' "size" as asked for: the whole buffer
    (all_reduce, broadcast: the tensor; all_gather: the gathered output; reduce_scatter: the input; all_to_all:
    what one rank sends); the buffer is rounded down to a multiple of the rank count, and algbw uses what was
    really moved. ``seconds`` is per iteration, the slowest rank's. GB/s are 1e9 bytes/s."""

    op: str
    nbytes: int
    ranks: int
    seconds: float
    algbw: float
    busbw: float
    dtype: str

    def as_dict(self) -> dict:
        return asdict(self)


def join_group(device: torch.device, rank: int, world: int, addr: str, port: int, timeout_s: float) -> None:
    """This rank's default process group over ``tcp://addr:port``: NCCL/RCCL on a GPU, made at once on
    ``device`` (not at the first collective, where NCCL would guess the rank's GPU), gloo on CPU."""
    import datetime as dt

    import torch
    import torch.distributed as dist

    kwargs: dict[str, Any] = {}
    if device.type == "cuda":
        torch.cuda.set_device(device)
        kwargs["device_id"] = device
    dist.init_process_group(
        "nccl" if device.type == "cuda" else "gloo",
        init_method=f"tcp://{addr}:{port}",
        rank=rank,
        world_size=world,
        timeout=dt.timedelta(seconds=timeout_s),
        **kwargs,
    )


def _buffers(
    op: str, nbytes: int, ranks: int, dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor | None, int]:
    import torch

    elem = torch.empty((), dtype=dtype).element_size()
    count = max(ranks, (nbytes // elem) // ranks * ranks)  # divisible by the rank count
    big = torch.ones(count, dtype=dtype, device=device)
    if op in ("all_reduce", "broadcast"):
        return big, None, count * elem
    small = torch.ones(count // ranks, dtype=dtype, device=device)
    if op == "all_gather":
        return small, big, count * elem
    if op == "reduce_scatter":
        return big, small, count * elem
    if op == "all_to_all":
        return big, torch.empty_like(big), count * elem
    raise ValueError(f"unknown collective {op!r}; known: {', '.join(OPS)}")


def _launch(op: str, a: torch.Tensor, b: torch.Tensor | None, group: Any, src: int) -> None:
    import torch.distributed as dist

    if op == "all_reduce":
        dist.all_reduce(a, group=group)
    elif op == "broadcast":
        dist.broadcast(a, src=src, group=group)
    elif op == "all_gather":
        dist.all_gather_into_tensor(b, a, group=group)
    elif op == "reduce_scatter":
        dist.reduce_scatter_tensor(b, a, group=group)
    else:
        dist.all_to_all_single(b, a, group=group)


def _sync(device: torch.device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(
    op: str,
    nbytes: int,
    *,
    device: torch.device,
    dtype: torch.dtype,
    warmup: int = 5,
    iters: int = 20,
    group: Any = None,
) -> Measurement:
    """Warm up, then time ``iters`` back-to-back launches between two device synchronisations (the loop a
    user would write); every rank reports the slowest rank's time."""
    import torch
    import torch.distributed as dist

    if warmup < 0 or iters < 1:
        raise ValueError(f"warmup {warmup} must be >= 0 and iters {iters} >= 1")
    ranks = dist.get_world_size(group)
    src = dist.get_global_rank(group, 0) if group is not None else 0
    a, b, size = _buffers(op, nbytes, ranks, dtype, device)
    for _ in range(warmup):
        _launch(op, a, b, group, src)
    _sync(device)
    dist.barrier(group=group, device_ids=[device.index] if device.type == "cuda" else None)
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(iters):
        _launch(op, a, b, group, src)
    _sync(device)
    elapsed = (time.perf_counter() - t0) / iters
    slowest = torch.tensor([elapsed], dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=group)
    seconds = float(slowest.item())
    algbw = size / seconds / 1e9
    del a, b
    return Measurement(
        op, nbytes, ranks, seconds, algbw, algbw * bus_factor(op, ranks), str(dtype).removeprefix("torch.")
    )


def sweep(
    ops: Iterable[str],
    sizes: Iterable[int],
    *,
    device: torch.device,
    dtype: torch.dtype,
    warmup: int = 5,
    iters: int = 20,
    group: Any = None,
) -> list[Measurement]:
    out = []
    for op in ops:
        if op not in OPS:
            raise ValueError(f"unknown collective {op!r}; known: {', '.join(OPS)}")
        for nbytes in sizes:
            out.append(
                measure(op, nbytes, device=device, dtype=dtype, warmup=warmup, iters=iters, group=group)
            )
    return out


def debug_env(log_dir: str) -> dict[str, str]:
    """Variables that make NCCL/RCCL write their init and network log, one file per process (``%h`` host,
    ``%p`` pid, expanded by the library). Set them before the first communicator is created."""
    return {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,NET",
        "NCCL_DEBUG_FILE": f"{log_dir}/nccl.%h.%p.log",
    }


# "NET/IB : Using [0]mlx5_0:1/IB ; OOB ..." / "NET/Socket : Using [0]ens3:172.31.10.182<0>"
_NET_USING = re.compile(r"NCCL INFO NET/(IB|Socket)\s*:\s*Using\s+(.*)$")
_NET_NONE = re.compile(r"NCCL INFO NET/IB\s*:\s*No device found")
_USING_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")
# "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read", "... [send] via NET/Socket/0", "... via SHM/direct/direct"
_VIA = re.compile(r"NCCL INFO Channel \d+(?:/\d+)? : .*?\bvia (\S+)")
_VERSION = re.compile(r"NCCL version (\S+)")
_RCCL = re.compile(r"\bRCCL version (\S+)")


@dataclass(frozen=True)
class Transport:
    """What the library used: its network plug-in choice and the kind of every channel it connected."""

    network: str | None  # "IB" or "Socket": the network the library picked (None: never said)
    net_devices: tuple[str, ...] = ()  # what followed "NET/<net> : Using"
    ib_missing: bool = False  # "NET/IB : No device found."
    channels: dict[str, int] = field(
        default_factory=dict
    )  # "P2P", "SHM", "NET/IB", "NET/Socket", ... -> count
    version: str | None = None

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(sorted(self.channels))

    @property
    def uses_socket(self) -> bool:
        return "NET/Socket" in self.channels or (not self.channels and self.network == "Socket")

    def summary(self) -> str:
        if self.channels:
            return ", ".join(f"{k} x{v}" for k, v in sorted(self.channels.items()))
        if self.network:
            return f"network {self.network} (no channel lines)"
        return "unknown (no NCCL/RCCL log lines)"

    def as_dict(self) -> dict:
        return {**asdict(self), "kinds": list(self.kinds), "uses_socket": self.uses_socket}


def _channel_kind(via: str) -> str:
    parts = via.split("/")
    if parts[0] == "NET" and len(parts) > 1:
        return f"NET/{parts[1]}"
    return parts[0]  # P2P, SHM, COLLNET, NVLS...


def parse_transport(text: str) -> Transport:
    network = None
    devices: list[str] = []
    ib_missing = False
    channels: dict[str, int] = {}
    version = None
    for line in text.splitlines():
        if m := _NET_USING.search(line):
            if m.group(1) == "IB" or network is None:
                network = m.group(1)
            dev = m.group(2).strip()
            if dev not in devices:
                devices.append(dev)
        elif _NET_NONE.search(line):
            ib_missing = True
        elif m := _USING_NETWORK.search(line):
            network = m.group(1)
        elif m := _VIA.search(line):
            kind = _channel_kind(m.group(1))
            channels[kind] = channels.get(kind, 0) + 1
        if version is None and (m := _RCCL.search(line) or _VERSION.search(line)):
            version = m.group(1)
    # "Using network X" is the final choice; a NET/IB device list seen while Socket was chosen does not count.
    return Transport(network, tuple(devices), ib_missing, channels, version)


def merge_transports(items: Iterable[Transport]) -> Transport:
    items = list(items)
    channels: dict[str, int] = {}
    devices: list[str] = []
    for t in items:
        for k, v in t.channels.items():
            channels[k] = channels.get(k, 0) + v
        devices += [d for d in t.net_devices if d not in devices]
    networks = {t.network for t in items if t.network}
    network = "Socket" if "Socket" in networks else next(iter(networks), None)
    version = next((t.version for t in items if t.version), None)
    return Transport(network, tuple(devices), any(t.ib_missing for t in items), channels, version)
