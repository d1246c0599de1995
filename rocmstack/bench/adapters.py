"""The image's engines (vLLM, SGLang, any catalogue entry with a bench path) measured as the reference engine
is: steady decode per step, prefill, peak memory.

Each engine runs once per bench run, every batch inside that one start, in a child process of its own
(own process group, time limit, killed whole); what the child is, and how its answer is read, is the entry's
runner (``gpu/engine_bench.py``). Peak memory: on a GPU the device's used memory as the driver counts it
(NVML, amdsmi), sampled here while the engine runs, over the whole run (the engines reserve their cache up
front); on CPU the runner's figure (the engine process's max RSS). An engine that is not installed is a
`skip` with the reason; one that fails is an `error` with its last log lines.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from rocmstack.gpu.driver_memory import PeakSampler, open_counter
from rocmstack.gpu.engine_bench import EngineRequest, EngineRun
from rocmstack.gpu.rollout import CATALOGUE, Catalogue
from rocmstack.platform.tools import ToolRun, engine_available, run_tool
from rocmstack.status import Status


def run_engine(engine: str, req: EngineRequest, catalogue: Catalogue = CATALOGUE) -> EngineRun:
    """Start `engine` once and time every batch of `req` inside that start, by its catalogue entry's bench
    path; a name with none is refused there."""
    entry = catalogue.entry(engine, flag="bench engine", bench=True)
    runner = entry.bench
    assert runner is not None  # entry() keeps only the engines with a bench path
    reason = engine_available(entry.package) if entry.package else None
    if reason:
        return EngineRun(engine=engine, status=Status.SKIP, reason=reason)
    counter = open_counter(req.backend, os.environ) if req.device == "cuda" else None
    peak: list[float] = []

    def launch(cmd: list[str], env: Mapping[str, str] | None) -> ToolRun:
        """The child, under its time limit; on a GPU the driver's used memory is sampled meanwhile."""
        if counter is None or isinstance(counter, str):
            return run_tool(cmd, timeout=req.timeout_s, env=env)
        read, close = counter
        try:
            with PeakSampler(read) as sampler:
                proc = run_tool(cmd, timeout=req.timeout_s, env=env)
            peak.append(sampler.peak_bytes / 1e9)
        finally:
            close()
        return proc

    with tempfile.TemporaryDirectory(prefix=f"rocmstack-{engine}-") as tmp:
        run = runner(req, Path(tmp), launch)
    if req.device == "cuda" and run.status == Status.PASS:
        if peak:
            return replace(run, peak_memory_gb=peak[0], peak_memory_source="driver: device used memory")
        return replace(run, peak_memory_source=f"unknown: {counter}")
    return run
