"""The culprit search as an algorithm (the real thing, over a real Ray cluster with a starved node, is in
tests/integration/test_doctor_level3.py), and the cluster checks over its results."""

from __future__ import annotations

import itertools

from rocmstack.doctor.checks import cluster
from rocmstack.doctor.collect.crossnode import find_culprit
from rocmstack.doctor.model import DoctorOptions
from rocmstack.status import Status


def links(slow_node=None, slow_link=None, fast=10.0):
    def measure(subset):
        if slow_node in subset:
            return 1.0
        if slow_link and set(slow_link) <= set(subset):
            return 2.0
        return fast

    return measure


def test_pairs_name_the_slow_node():
    out = find_culprit(["a", "b", "c", "d"], links(slow_node="c"))
    assert out["node"] == "c" and out["complete"] and len(out["steps"]) == 6


def test_a_slow_link_without_a_slow_node():
    out = find_culprit(["a", "b", "c", "d"], links(slow_link=("b", "d")))
    assert out["node"] is None and out["link"] == {"nodes": ["b", "d"], "busbw": 2.0}


def test_halves_first_on_a_large_cluster():
    nodes = [f"n{i}" for i in range(32)]
    out = find_culprit(nodes, links(slow_node="n21"))
    assert out["node"] == "n21"
    assert len(out["steps"]) < len(list(itertools.combinations(nodes, 2)))
    assert len(out["steps"][0]["nodes"]) == 16


def test_budget_stops_the_search():
    ticks = iter(range(0, 1000, 10))
    out = find_culprit(["a", "b", "c", "d"], links(slow_node="a"), budget_s=25, clock=lambda: next(ticks))
    assert not out["complete"] and len(out["steps"]) < 6


def node(label, **facts):
    base = {"rocm_version": "6.4.1", "amdgpu_driver": "6.12.12", "nvidia_driver": None, "gpu_vbios": None,
            "NCCL_IB_GID_INDEX": "3", "roce_v2_gid_index": [3], "rdma_devices": ["mlx5_0"]}  # fmt: skip
    return {"label": label, "report": {"facts": {**base, **facts}}}


def test_consistency():
    opts = DoctorOptions()
    same = {"nodes": [node("a"), node("b")]}
    assert cluster.consistency(same, opts).status == Status.PASS
    diff = {"nodes": [node("a"), node("b", rocm_version="6.3.0"), node("c")]}
    result = cluster.consistency(diff, opts)
    assert (
        result.status == Status.FAIL and result.summary == "rocm_version differs: 6.3.0 on b; 6.4.1 on a, c"
    )


def test_collectives_report_the_culprit_first():
    cn = {
        "ranks": 3,
        "gpu": "cpu",
        "backend": "gloo",
        "rows": [{"op": "all_reduce", "nbytes": 4 << 20, "busbw": 0.05}],
        "bars": [{"op": "all_reduce", "nbytes": 4 << 20, "min_busbw": 1.0, "source": "test"}],
        "misses": [
            {
                "bar": {"op": "all_reduce", "nbytes": 4 << 20, "min_busbw": 1.0, "source": "test"},
                "busbw": 0.05,
            }
        ],
        "culprit": find_culprit(["x:1", "y:2", "z:3"], links(slow_node="y:2")),
    }
    result = cluster.collectives({"nodes": [], "crossnode": cn}, DoctorOptions())
    assert result.status == Status.FAIL and result.summary.startswith("culprit: node y:2")
