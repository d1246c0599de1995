"""rocmstack.doctor.model: the options split by level, and their flat spelling (the CLI's keywords, a
cluster run's payload) unchanged by the split."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from rocmstack.doctor.cluster import PORTABLE
from rocmstack.doctor.model import FLAT_NAMES, ActiveOptions, BurninOptions, ClusterOptions, DoctorOptions


def test_each_level_has_its_group_and_the_flat_names_are_the_ones_before_the_split():
    assert [f.name for f in fields(DoctorOptions)][-3:] == ["active", "cluster", "burnin"]
    # the names the CLI, validate and a cluster payload have always used
    assert {"active_timeout", "burnin_minutes", "burnin_gemm_n", "burnin_mem_bytes", "culprit_budget"} <= set(
        FLAT_NAMES
    )
    assert not {"timeout", "minutes", "active", "burnin"} & set(FLAT_NAMES)
    assert set(PORTABLE) <= set(DoctorOptions().flat())  # every name a node is sent still exists


def test_from_flat_and_flat_are_inverse():
    opts = DoctorOptions.from_flat(
        fast=True,
        level=2,
        iters=3,
        active_timeout=5.0,
        bars_file=Path("bars.yaml"),
        culprit_budget=9.0,
        burnin_minutes=2.0,
        telemetry_replay=Path("t.jsonl"),
    )
    assert opts.fast and opts.level == 2
    assert opts.active == ActiveOptions(iters=3, timeout=5.0, bars_file=Path("bars.yaml"))
    assert opts.cluster == ClusterOptions(culprit_budget=9.0)
    assert opts.burnin == BurninOptions(minutes=2.0, telemetry_replay=Path("t.jsonl"))
    flat = opts.flat()
    assert flat["active_timeout"] == 5.0 and flat["burnin_minutes"] == 2.0 and flat["iters"] == 3
    assert DoctorOptions.from_flat(**flat) == opts
    assert DoctorOptions.from_flat(**DoctorOptions().flat()) == DoctorOptions()
