"""The memory-return loops' processes (rocmstack.gpu.memory_return): started, collected, and named when they die,
with real child processes (the loops themselves need a GPU: docs/evidence/preflight-h200-2026-12-05)."""

from __future__ import annotations

import json
import sys

from rocmstack.doctor.checks.memory_return import judge_loop
from rocmstack.gpu.memory_return import PREFIX, VMM_ENV, collect, finish_loops, loop_env, start_loops
from rocmstack.platform.tools import run_tool


def _child(body: str, timeout: float = 60.0):
    return run_tool([sys.executable, "-c", body], timeout=timeout)


def test_a_loop_without_a_gpu_says_so_and_is_judged_a_skip():
    rows = finish_loops(start_loops(["ipc", "vmm"], 1 << 20, 2, {"CUDA_VISIBLE_DEVICES": ""}, 120.0), 1 << 20)
    assert [r["loop"] for r in rows] == ["ipc", "vmm"]
    for row in rows:
        assert row["skipped"] == "no GPU visible to torch in this process", row
        assert judge_loop(row).status == "skip"


def test_a_process_that_dies_is_named_with_its_signal_and_the_step_it_was_in():
    said = [{"loop": "dmabuf", "runtime": {"hip": "7.2.26015"}},
            {"loop": "dmabuf", "cycle": 1, "step": "allocate after export"}]  # fmt: skip
    body = "import os, signal\n" + "".join(f"print({PREFIX + json.dumps(r)!r}, flush=True)\n" for r in said)
    body += "os.kill(os.getpid(), signal.SIGSEGV)\n"
    row = collect("dmabuf", 1 << 20, _child(body))
    assert row["crash"] == "the process died of SIGSEGV in cycle 1, allocate after export"
    verdict = judge_loop(row)
    assert verdict.status == "fail" and "(HIP 7.2.26015)" in verdict.line


def test_a_loop_that_hangs_is_stopped_and_says_where():
    body = (
        "import json, time\n"
        f"print({PREFIX!r} + json.dumps({{'loop': 'ipc', 'cycle': 2, 'step': 'take'}}), flush=True)\n"
        "time.sleep(60)\n"
    )
    row = collect("ipc", 1 << 20, _child(body, timeout=2.0))
    assert row["error"].startswith("did not finish within") and "(in cycle 2, take)" in row["error"]
    assert judge_loop(row).status == "fail"


def test_cycles_are_kept_and_an_error_line_ends_the_loop():
    cycle = {"cycle": 1, "before": {"process": 1}, "held": {"process": 2}, "after": {"process": 1}}
    body = (
        "import json, sys\n"
        f"print({PREFIX!r} + json.dumps({dict(loop='vmm', **cycle)!r}), flush=True)\n"
        f"print({PREFIX!r} + json.dumps({{'loop': 'vmm', 'error': 'RuntimeError: CUDA error: out of memory'}}))\n"
        "sys.exit(1)\n"
    )
    row = collect("vmm", 1 << 20, _child(body))
    assert row["cycles"] == [cycle] and row["error"] == "RuntimeError: CUDA error: out of memory"


def test_only_the_vmm_loop_maps_through_expandable_segments():
    job = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "PATH": "/usr/bin"}
    assert loop_env("vmm", {})["PYTORCH_CUDA_ALLOC_CONF"] == VMM_ENV["PYTORCH_CUDA_ALLOC_CONF"]
    assert (
        "PYTORCH_CUDA_ALLOC_CONF" not in loop_env("ipc", job) and loop_env("ipc", job)["PATH"] == "/usr/bin"
    )
