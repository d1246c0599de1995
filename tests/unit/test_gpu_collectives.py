"""rocmstack.gpu.collectives: nccl-tests' bandwidth formulas, the size sweep, the transport parser on NCCL/RCCL
logs quoted from public issues (tests/fixtures/doctor/SOURCES.md), and real gloo collectives in two
processes."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest

from rocmstack.gpu.collectives import (
    MIB,
    OPS,
    bus_factor,
    merge_transports,
    parse_size,
    parse_transport,
    size_sweep,
)
from rocmstack.gpu.weight_sync import free_port

ODD = 64 * 1024 + 4  # not a multiple of 2 ranks x 4 bytes: reported as asked, moved rounded down
NCCL = Path(__file__).resolve().parents[1] / "fixtures" / "doctor" / "nccl"


@pytest.mark.parametrize(
    "op,n,factor",
    [
        ("all_reduce", 8, 2 * 7 / 8),
        ("all_reduce", 2, 1.0),
        ("all_gather", 8, 7 / 8),
        ("reduce_scatter", 4, 3 / 4),
        ("broadcast", 8, 1.0),
        ("all_to_all", 2, 0.5),
        ("all_reduce", 1, 0.0),
    ],
)
def test_bus_factor_is_nccl_tests(op, n, factor):
    assert bus_factor(op, n) == pytest.approx(factor)


def test_bus_factor_rejects_unknown():
    with pytest.raises(ValueError, match="unknown collective"):
        bus_factor("allreduce", 2)


@pytest.mark.parametrize(
    "text,value",
    [("1M", MIB), ("1MiB", MIB), ("1g", 1 << 30), ("4096", 4096), ("0.5K", 512), ("8GiB", 8 << 30)],
)
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "1X", "-1M", "M", "0"])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_default_sweep_is_1mib_to_1gib():
    sizes = size_sweep()
    assert sizes[0] == MIB and sizes[-1] == 1 << 30 and len(sizes) == 11


def test_socket_fallback_without_ib():
    t = parse_transport((NCCL / "nccl-1267-no-ib-socket.log").read_text())
    assert t.network == "Socket" and t.ib_missing and t.uses_socket
    assert t.version == "2.19.3+cuda12.3"
    assert t.net_devices == ("[0]ens7:10.128.0.32<0>",)


def test_rccl_ib_with_p2p_channels():
    t = parse_transport((NCCL / "rccl-419-netib-mi-ib.log").read_text())
    assert t.network == "IB" and not t.uses_socket and not t.ib_missing
    assert t.channels == {"P2P": 4}
    assert "mlx5_3:1/IB" in t.net_devices[0]


def test_rccl_channels_over_socket():
    t = parse_transport((NCCL / "rccl-1026-socket-mi250x.log").read_text())
    assert t.channels == {"NET/Socket": 4, "P2P": 4}
    assert t.uses_socket
    assert "NET/Socket x4" in t.summary()


def test_p2p_cumem_only():
    t = parse_transport((NCCL / "nccl-1538-p2p-cumem.log").read_text())
    assert t.kinds == ("P2P",) and not t.uses_socket and t.network is None


def test_no_log_lines():
    t = parse_transport("hello\n")
    assert t.network is None and not t.channels and "unknown" in t.summary()


def test_merge_keeps_socket_visible():
    merged = merge_transports(
        [
            parse_transport((NCCL / "rccl-419-netib-mi-ib.log").read_text()),
            parse_transport((NCCL / "nccl-1267-no-ib-socket.log").read_text()),
        ]
    )
    assert merged.network == "Socket" and merged.channels == {"P2P": 4}


def _rank(rank: int, world: int, port: int, queue) -> None:
    import torch
    import torch.distributed as dist

    from rocmstack.gpu.collectives import sweep

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        res = sweep(
            OPS, [ODD, 256 * 1024], device=torch.device("cpu"), dtype=torch.float32, warmup=1, iters=3
        )
        queue.put((rank, [r.as_dict() for r in res]))
    finally:
        dist.destroy_process_group()


@pytest.mark.timeout(120)
def test_real_gloo_sweep_two_ranks():
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_rank, args=(r, 2, port, queue)) for r in range(2)]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=100) for _ in procs)
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    r0, r1 = results[0], results[1]
    assert [(m["op"], m["nbytes"]) for m in r0] == [(op, n) for op in OPS for n in (ODD, 256 * 1024)]
    for a, b in zip(r0, r1, strict=True):
        assert a["seconds"] == b["seconds"] > 0  # both ranks report the slowest rank's time
        moved = a["nbytes"] // 8 * 8
        assert a["algbw"] == pytest.approx(moved / a["seconds"] / 1e9)
        assert a["busbw"] == pytest.approx(a["algbw"] * bus_factor(a["op"], 2))
