"""``--budget``: which checks fit in a time budget. A run costs its start, the slowest of the probes it
starts (they run in parallel), the level-2 probes it starts (one after another) and each check's own work
(costs.yaml); a probe is paid by the first check that needs it. Checks are taken in report order while the
run fits, and every check left out is named with what it would have added.

Only what will start on this node is charged (``Node``): a probe the snapshot does not start here costs
nothing, one whose library is not installed costs a Python start, a tool not on PATH costs nothing. What
cannot be told beforehand is charged in full, so an estimate errs long, never short."""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import shutil
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from rocmstack.doctor.model import Check, DoctorOptions
from rocmstack.platform.snapshot import gpu_hardware, not_started

COSTS_FILE = Path(__file__).with_name("costs.yaml")
DEFAULT_OWN_COST = 0.05
# the module each guarded probe imports (rocmstack/platform/probes/*_probe.py)
PROBE_MODULES = {"torch": "torch", "ray": "ray", "vllm": "vllm", "amdsmi": "amdsmi", "nvml": "pynvml"}
PROBE_MODULES["loads"] = "vllm"  # its import is the sweep's cost; without vLLM it imports torch at most
VENDOR_TOOLS = frozenset({"rocm-smi", "amd-smi", "rocminfo", "nvidia-smi"})  # the need "tools"
# what decides where this Python finds its modules: the probes see the run's environment, not ours
IMPORT_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONNOUSERSITE", "PYTHONSAFEPATH")


@dataclass(frozen=True)
class Node:
    """What decides which probes and tools a run starts here. The default is the worst case: a GPU of
    each vendor, every library installed, every tool on PATH."""

    amd_hw: bool = True
    nvidia_hw: bool = True
    missing: frozenset[str] = frozenset()  # probes whose library is not installed: they answer at once
    on_path: frozenset[str] | None = None  # the tools found on PATH; None: unknown, all of them

    @property
    def gpu(self) -> bool:
        return self.amd_hw or self.nvidia_hw

    def has(self, tool: str) -> bool:
        return self.on_path is None or tool in self.on_path


@dataclass(frozen=True)
class Costs:
    start: float
    parallel: Mapping[str, float]  # probes and tools, started together, on a GPU node
    sequential: Mapping[str, float]  # level-2 probes and the burn-in, one after another
    checks: Mapping[str, float]
    # the level-2 probes on a node without GPU: CPU actors and gloo take far longer than a GPU
    sequential_no_gpu: Mapping[str, float] = dataclasses.field(default_factory=dict)
    not_installed: float = 0.5  # a probe whose library is missing: one Python start
    default_check: float = DEFAULT_OWN_COST  # a check's own work where costs.yaml names none
    # checks that run a tool themselves: the seconds of each tool, paid only where it is on PATH
    check_tools: Mapping[str, Mapping[str, float]] = dataclasses.field(default_factory=dict)

    def own(self, check: Check, node: Node | None = None) -> float:
        tools = self.check_tools.get(check.id)
        if tools:
            node = node or Node()
            return max([self.default_check, *(s for t, s in tools.items() if node.has(t))])
        return self.checks.get(check.id, self.default_check)

    def probe(self, need: str, node: Node, fast: bool) -> float:
        """What starting ``need`` (a probe or the vendor tools) costs on ``node``; 0 where it is not started."""
        name = "amd-smi-partition" if need == "partition" else need
        if not_started(name, fast=fast, amd_hw=node.amd_hw, nvidia_hw=node.nvidia_hw):
            return 0.0
        if need == "tools" and not any(node.has(t) for t in VENDOR_TOOLS):
            return 0.0  # a tool not on PATH is answered without a process
        if need == "partition" and not node.has("amd-smi"):
            return 0.0
        if need in node.missing:
            return min(self.not_installed, self.parallel.get(need, 0.0))
        return self.parallel.get(need, 0.0)


@dataclass(frozen=True)
class Plan:
    run: tuple[Check, ...]
    # left out, with the seconds it would have added and the probes it would have had to start
    over: tuple[tuple[Check, float, tuple[str, ...]], ...]
    estimate_s: float  # what the chosen checks are expected to take, start included
    comm_inits: int | None = None  # fewer communicator-churn rounds than asked, to fit the budget


# communicator-churn's cost is per communicator made: its costs.yaml figure is for DEFAULT_COMM_INITS of
# them. Under --budget it runs as many as fit, but never fewer than MIN_COMM_INITS (a handful of inits
# would miss a failure that comes 3 times in 40).
CHURN = "communicator-churn"
DEFAULT_COMM_INITS = 20
MIN_COMM_INITS = 5


@functools.cache
def load_costs(path: Path = COSTS_FILE) -> Costs:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    checks: dict[str, float] = {}
    check_tools: dict[str, dict[str, float]] = {}
    for check_id, value in (data.get("checks") or {}).items():
        if isinstance(value, dict):  # {tool: seconds}: the tools the check may run itself
            check_tools[check_id] = {str(t): float(s) for t, s in value.items()}
        else:
            checks[check_id] = float(value)
    return Costs(
        float(data["start"]),
        dict(data["parallel"]),
        dict(data["sequential"]),
        checks,
        sequential_no_gpu=dict(data.get("sequential_no_gpu") or {}),
        not_installed=float(data["not_installed"]),
        default_check=float(data["default_check"]),
        check_tools=check_tools,
    )


def node_of(opts: DoctorOptions, costs: Costs | None = None) -> Node:
    """This node as the snapshot will see it: its GPUs, the probes' libraries, the tools on PATH."""
    costs = costs or load_costs()
    env = opts.environ()
    amd_hw, nvidia_hw = gpu_hardware(opts.sysfs_root, opts.dev_root, opts.proc_root)
    missing: set[str] = set()
    # Only this interpreter, with the run's import settings, can be asked without starting a process.
    same_python = opts.python in (None, sys.executable) and all(
        env.get(k) == os.environ.get(k) for k in IMPORT_ENV
    )
    if same_python:
        for probe, module in PROBE_MODULES.items():
            try:
                found = importlib.util.find_spec(module) is not None  # finds, never imports
            except (ImportError, ValueError):
                found = True  # cannot tell: charge it in full
            if not found:
                missing.add(probe)
    tools = {*VENDOR_TOOLS, *(t for tools in costs.check_tools.values() for t in tools)}
    path = env.get("PATH")
    return Node(
        amd_hw=amd_hw,
        nvidia_hw=nvidia_hw,
        missing=frozenset(missing),
        on_path=frozenset(t for t in tools if shutil.which(t, path=path)),
    )


def default_level(given: int | None, budget_s: float | None) -> int:
    """--level as given; else 1, or with --budget 2: the budget then picks among level 1 and 2's checks
    (the cluster and the burn-in are never started by a budget alone)."""
    if given is not None:
        return given
    return 2 if budget_s is not None else 1


def plan(
    checks: Iterable[Check],
    budget_s: float,
    *,
    fast: bool = False,
    costs: Costs | None = None,
    extra: Mapping[str, float] | None = None,
    node: Node | None = None,
    comm_inits: int = DEFAULT_COMM_INITS,
) -> Plan:
    """``extra``: sequential costs known only at run time (the burn-in lasts as long as it is asked to).
    ``node``: what starts here (``node_of``); None charges every probe and tool in full.
    ``comm_inits``: the communicators communicator-churn is asked for; fewer run where only they fit."""
    costs = costs or load_costs()
    node = node or Node()
    no_gpu = {} if node.gpu else costs.sequential_no_gpu
    sequential = {**costs.sequential, **no_gpu, **(extra or {})}
    parallel = {n: costs.probe(n, node, fast) for n in costs.parallel}
    paid: set[str] = set()
    slowest = sequential_s = own_s = 0.0
    run: list[Check] = []
    over: list[tuple[Check, float, tuple[str, ...]]] = []
    inits = comm_inits
    for check in checks:
        # a probe that does not start here is paid at once, at no cost
        new = {n for n in check.needs if n not in paid and parallel.get(n, 1.0) > 0}
        new_sequential = sum(sequential.get(n, 0.0) for n in new if n not in parallel)
        new_slowest = max([slowest, *(parallel.get(n, 0.0) for n in new)])
        own = costs.own(check, node)
        added = new_slowest - slowest + new_sequential + own
        left = budget_s - (costs.start + slowest + sequential_s + own_s)
        if CHURN in new and added > left:
            per_init = sequential.get(CHURN, 0.0) / DEFAULT_COMM_INITS
            fit = int((left - (added - per_init * comm_inits)) // per_init) if per_init else comm_inits
            if MIN_COMM_INITS <= fit < comm_inits:
                inits = fit
                added -= per_init * (comm_inits - fit)
                new_sequential -= per_init * (comm_inits - fit)
        if added <= left:
            run.append(check)
            paid |= new
            sequential_s += new_sequential
            slowest = new_slowest
            own_s += own
        else:
            over.append((check, added, tuple(sorted(new))))
    chosen_inits = inits if inits != comm_inits and any(CHURN in c.needs for c in run) else None
    return Plan(tuple(run), tuple(over), costs.start + slowest + sequential_s + own_s, chosen_inits)
