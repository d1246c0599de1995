"""RDMA facts from sysfs (/sys/class/infiniband) and ``ibv_devinfo``: devices, ports, GID tables. No judging."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
IPV4_MAPPED = re.compile(r"^0000:0000:0000:0000:0000:ffff:([0-9a-f]{4}):([0-9a-f]{4})$")
# driver prefix of the kernel device name -> rdma-core provider (libibverbs/lib<name>-rdmav*.so)
PROVIDERS = {
    "mlx5": "mlx5",
    "mlx4": "mlx4",
    "bnxt_re": "bnxt_re",
    "ionic": "ionic",
    "irdma": "irdma",
    "rxe": "rxe",
    "siw": "siw",
    "efa": "efa",
    "hns": "hns",
    "erdma": "erdma",
    "mana": "mana",
    "qedr": "qedr",
}


@dataclass(frozen=True)
class Gid:
    index: int
    gid: str
    type: str | None  # "RoCE v2", "IB/RoCE v1"
    ndev: str | None

    @property
    def ipv4(self) -> str | None:
        m = IPV4_MAPPED.match(self.gid)
        if not m:
            return None
        raw = bytes.fromhex(m.group(1) + m.group(2))
        return ".".join(str(b) for b in raw)


@dataclass(frozen=True)
class Port:
    device: str
    number: int
    state: str  # "4: ACTIVE"
    link_layer: str  # "InfiniBand" | "Ethernet"
    rate: str  # "400 Gb/sec (4X NDR)"
    gids: tuple[Gid, ...] = field(default_factory=tuple)

    @property
    def active(self) -> bool:
        return self.state.endswith("ACTIVE")

    def roce_v2_ipv4(self) -> list[Gid]:
        return [g for g in self.gids if g.type == "RoCE v2" and g.ipv4]


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def devices(sysfs_root: Path) -> list[str]:
    try:
        return sorted(p.name for p in (sysfs_root / "class" / "infiniband").iterdir())
    except OSError:
        return []


def ports(sysfs_root: Path) -> list[Port]:
    out = []
    for dev in devices(sysfs_root):
        base = sysfs_root / "class" / "infiniband" / dev / "ports"
        try:
            numbers = sorted(int(p.name) for p in base.iterdir() if p.name.isdigit())
        except OSError:
            continue
        for n in numbers:
            pdir = base / str(n)
            gids = []
            try:
                indices = sorted(int(p.name) for p in (pdir / "gids").iterdir() if p.name.isdigit())
            except OSError:
                indices = []
            for i in indices:
                gid = (_read(pdir / "gids" / str(i)) or ZERO_GID).lower()
                if gid == ZERO_GID:
                    continue
                gids.append(
                    Gid(
                        i,
                        gid,
                        _read(pdir / "gid_attrs" / "types" / str(i)),
                        _read(pdir / "gid_attrs" / "ndevs" / str(i)),
                    )
                )
            out.append(
                Port(
                    dev,
                    n,
                    _read(pdir / "state") or "?",
                    _read(pdir / "link_layer") or "?",
                    _read(pdir / "rate") or "?",
                    tuple(gids),
                )
            )
    return out


def provider_for(device: str) -> str | None:
    for prefix in sorted(PROVIDERS, key=len, reverse=True):
        if device.startswith(prefix):
            return PROVIDERS[prefix]
    return None


_HCA = re.compile(r"^hca_id:\s*(\S+)", re.MULTILINE)
_PORT = re.compile(r"^\s*port:\s*(\d+)\s*$")
_STATE = re.compile(r"^\s*state:\s*(\S+)")
_LINK = re.compile(r"^\s*link_layer:\s*(\S+)")


@dataclass(frozen=True)
class DevinfoPort:
    device: str
    number: int
    state: str  # "PORT_ACTIVE"
    link_layer: str | None


def parse_ibv_devinfo(text: str) -> list[DevinfoPort]:
    """``ibv_devinfo`` output -> its ports (an empty list for "No IB devices found")."""
    out: list[DevinfoPort] = []
    dev, port, state, link = None, None, None, None

    def flush() -> None:
        if dev is not None and port is not None and state is not None:
            out.append(DevinfoPort(dev, port, state, link))

    for line in text.splitlines():
        if m := _HCA.match(line):
            flush()
            dev, port, state, link = m.group(1), None, None, None
        elif m := _PORT.match(line):
            flush()
            port, state, link = int(m.group(1)), None, None
        elif (m := _STATE.match(line)) and port is not None:
            state = m.group(1)
        elif (m := _LINK.match(line)) and port is not None:
            link = m.group(1)
    flush()
    return out
