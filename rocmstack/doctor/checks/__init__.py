"""All doctor checks, in report order. One module per concern; ids are stable (CI filters on them)."""

from __future__ import annotations

from rocmstack.doctor.checks import (
    advisories,
    amdsmi,
    burnin,
    caches,
    checkpoint,
    cluster,
    envlint,
    fabric,
    gpus,
    history,
    host,
    identity,
    image,
    layouts,
    loads,
    memory,
    memory_return,
    network,
    packages,
    ras,
    runtime,
    system,
    tuned,
    visibility,
)
from rocmstack.doctor.model import Check

ALL_CHECKS: tuple[Check, ...] = (
    *gpus.CHECKS,
    *memory.CHECKS,
    *amdsmi.CHECKS,
    *visibility.CHECKS,
    *system.CHECKS,
    *network.CHECKS,
    *host.CHECKS,
    *envlint.CHECKS,
    *packages.CHECKS,
    *runtime.CHECKS,
    *advisories.CHECKS,
    *image.CHECKS,
    *caches.CHECKS,
    *checkpoint.CHECKS,
    *tuned.CHECKS,
    *identity.CHECKS,
    *loads.CHECKS,
    *fabric.CHECKS,
    *layouts.CHECKS,
    *memory_return.CHECKS,
    *burnin.CHECKS,
    *cluster.CHECKS,
    *history.CHECKS,
    *ras.CHECKS,
)
BY_ID = {c.id: c for c in ALL_CHECKS}
assert len(BY_ID) == len(ALL_CHECKS), "duplicate check id"
