"""Benchmark: `rocmstack smoke grpo --device cpu` on the quiet machine, then beside a CPU hog of twice the cores
(one busy loop per core, twice over: load 2x the cores), as a shared CI runner has it. The requirement: the run
beside the hog takes at most 3 times its quiet time.

It takes minutes (a quiet run and a loaded one, each a whole smoke job), so it is opt-in:

    ROCMSTACK_BENCH_SMOKE_LOAD=1 .venv/bin/python -m pytest tests/integration/test_smoke_under_load.py \
        --benchmark-only -s

The benchmark's own row is the loaded run; ``extra_info`` (``--benchmark-json``) and the printed line carry
the quiet time, the ratio and the phases of each run. Other load on the machine counts on both sides: run it
where nothing else runs (``uptime`` first)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

OPT_IN_ENV = "ROCMSTACK_BENCH_SMOKE_LOAD"
MAX_RATIO = 3.0  # the requirement: loaded within 3x of quiet
SETTLE_S = 5.0  # the busy loops run before the loaded run starts, as a runner's other jobs do

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(3600),  # before the fix, the loaded run alone took 5 to 12 minutes
    pytest.mark.skipif(
        os.environ.get(OPT_IN_ENV) != "1",
        reason=f"opt-in: {OPT_IN_ENV}=1 (a benchmark of minutes: the smoke job quiet and beside a CPU hog)",
    ),
]

# A busy loop that ends by itself once its parent (this test) is gone, however that went: every million
# turns it checks that the parent is still the one that started it.
_BUSY_LOOP = """
import os
parent = os.getppid()
while os.getppid() == parent:
    for _ in range(1_000_000):
        pass
"""

# The phases the smoke's summary times, each shown for both runs (and the mean step).
PHASES = ("startup_s", "ray_init_s", "model_init_s", "time_to_verdict_s")


@contextmanager
def cpu_hog(loops: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``loops`` busy processes for the block, stopped (killed and reaped) on every way out."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(loops):
            procs.append(subprocess.Popen([sys.executable, "-c", _BUSY_LOOP]))
        yield procs
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def _smoke(report: Path) -> dict[str, Any]:
    """One whole `rocmstack smoke grpo --device cpu`, as a user runs it: its wall time and its phases."""
    start = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "rocmstack", "smoke", "grpo", "--device", "cpu", "--json"],
        capture_output=True,
        text=True,
        timeout=3000,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    wall = time.perf_counter() - start
    report.write_text(r.stdout)
    assert r.returncode == 0, r.stderr[-4000:]
    summary = json.loads(r.stdout)
    phases = {k: round(summary[k], 1) for k in PHASES}
    return {"wall_s": round(wall, 1), **phases, "step_s": round(summary["final"]["time_step_s_avg"], 3)}


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


@pytest.mark.benchmark(group="smoke-under-load")
def test_smoke_grpo_beside_a_cpu_hog_of_twice_the_cores_is_within_3x_of_quiet(benchmark, tmp_path):
    cores = os.cpu_count() or 1
    loops = 2 * cores
    quiet_load = _load()
    quiet = _smoke(tmp_path / "quiet.json")
    with cpu_hog(loops) as procs:
        time.sleep(SETTLE_S)
        assert all(p.poll() is None for p in procs)
        loaded_load = _load()
        loaded = benchmark.pedantic(_smoke, args=(tmp_path / "loaded.json",), rounds=1, iterations=1)
        loaded_load_after = _load()
    ratio = loaded["wall_s"] / quiet["wall_s"]
    benchmark.extra_info.update(
        cores=cores,
        busy_loops=loops,
        load_before_quiet=quiet_load,
        load_before_loaded=loaded_load,
        load_after_loaded=loaded_load_after,
        quiet=quiet,
        loaded=loaded,
        ratio=round(ratio, 2),
    )
    print(
        f"\nsmoke grpo --device cpu on {cores} cores: quiet {quiet['wall_s']} s (load {quiet_load}), "
        f"beside {loops} busy loops {loaded['wall_s']} s (load {loaded_load} before, "
        f"{loaded_load_after} after): {ratio:.2f}x\n  quiet:  {quiet}\n  loaded: {loaded}"
    )
    assert ratio <= MAX_RATIO, f"beside {loops} busy loops the smoke took {ratio:.2f}x its quiet time"
