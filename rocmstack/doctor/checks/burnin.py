"""Level 4: judging the burn-in (rocmstack.doctor.collect.burnin). Each failure names the GPU by index and UUID.

- throughput: a GPU whose GEMM or HBM rate falls more than 10 % below its own first window (a minute in a
  long run), or whose median is 10 % or more below its peers'.
- throttle: time spent throttled, from telemetry: a protective throttle reason (thermal, PROCHOT, hardware
  slowdown; running at the power cap is normal under GEMM and does not count) or a clock 10 % or more
  below the other GPUs' at the same moment; more than 10 % of the run fails.
- power: median power against the board limit (above 105 % is out of spec).
- memory: every pattern read back as written.
- errors: ECC and PCIe replay counters diffed before/after: any new uncorrectable error fails.

On CPU stand-ins the rates share cores with everything else on the machine, so a rate finding warns.
"""

from __future__ import annotations

import statistics
from typing import Any

from rocmstack.doctor.model import Check, DoctorOptions, Result, failed, passed, skipped, warned
from rocmstack.gpu.health import slow_outliers
from rocmstack.platform.snapshot import Snapshot
from rocmstack.platform.telemetry import PROTECTIVE

DROP = 0.10  # a rate this far below the GPU's own first window fails
PEERS = 0.10  # a median rate or clock this far below the other GPUs' fails
THROTTLED_SHARE = 0.10  # share of the run a GPU may spend throttled
OVER_LIMIT = 1.05
FIX_GPU = "Drain the node; check the named GPU's cooling, power cabling and firmware, then rerun --level 4"
SOURCE = "https://github.com/ROCm/ROCmValidationSuite"


def _burn(snap: Snapshot) -> dict[str, Any] | Result:
    burn = (snap.active or {}).get("burn_in")
    if not isinstance(burn, dict):
        return skipped("burn-in not run (--level 4)")
    return burn


def _name(gpu: dict) -> str:
    return f"GPU {gpu['index']} ({gpu.get('uuid')})"


def rate_findings(gpus: list[dict], key: str, unit: str) -> tuple[list[str], list[str]]:
    """(problems, details) for one rate (``gemm_tflops`` or ``hbm_gbs``) over the windows of every GPU."""
    problems, details, medians = [], [], {}
    for gpu in gpus:
        rates = [float(w[key]) for w in gpu.get("windows") or []]
        if not rates:
            continue
        medians[_name(gpu)] = statistics.median(rates)
        first = rates[0]
        worst_i = min(range(len(rates)), key=rates.__getitem__)
        details.append(
            f"{_name(gpu)} {key}: first {first:.4g}, lowest {rates[worst_i]:.4g}, last {rates[-1]:.4g} {unit}"
            f" over {len(rates)} window(s)"
        )
        if len(rates) > 1 and first > 0 and rates[worst_i] < first * (1 - DROP):
            t = gpu["windows"][worst_i]["t"]
            problems.append(
                f"{_name(gpu)}: {key} fell {1 - rates[worst_i] / first:.0%} from its first window"
                f" ({first:.4g} -> {rates[worst_i]:.4g} {unit} at {t:.0f} s)"
            )
    for who, short in slow_outliers(medians, PEERS).items():
        problems.append(f"{who}: median {key} {short:.0%} below its peers ({medians[who]:.4g} {unit})")
    return problems, details


def throughput(snap: Snapshot, opts: DoctorOptions) -> Result:
    burn = _burn(snap)
    if isinstance(burn, Result):
        return burn
    gpus = burn["gpus"]
    broken = [f"{_name(g)}: {g['error']}" for g in gpus if g.get("error")]
    if broken:
        return failed(f"the load failed on {broken[0]}", *broken[1:], fix=FIX_GPU)
    problems, details = [], []
    for key, unit in (("gemm_tflops", "TFLOPS"), ("hbm_gbs", "GB/s")):
        p, d = rate_findings(gpus, key, unit)
        problems += p
        details += d
    if not details:
        return skipped("no full window of load was timed (a longer --burn-in gives one)")
    if problems:
        if burn["mode"] == "cpu":
            return warned(f"{problems[0]} (CPU stand-ins share cores: a warning)", *problems[1:], *details)
        return failed(problems[0], *problems[1:], *details, fix=FIX_GPU)
    return passed(
        f"{len(gpus)} {'GPU' if burn['mode'] == 'gpu' else 'CPU stand-in'}(s) held their rate for "
        f"{burn['minutes']:g} min (within {DROP:.0%} of the first window and of their peers)",
        *details,
    )


def _series(burn: dict, field: str) -> list[list[float | None]]:
    """Per GPU, the telemetry field over the samples."""
    samples = burn["telemetry"]["samples"]
    count = len(burn["gpus"])
    return [[(s["gpus"][i] if i < len(s["gpus"]) else {}).get(field) for s in samples] for i in range(count)]


def throttled_share(burn: dict) -> list[tuple[float, list[str]]]:
    """Per GPU: the share of samples throttled, and the throttle reasons seen (all of them)."""
    samples = burn["telemetry"]["samples"]
    clocks = _series(burn, "gfx_mhz")
    out = []
    for i in range(len(burn["gpus"])):
        hits, reasons = 0, set()
        for j, sample in enumerate(samples):
            reading = sample["gpus"][i] if i < len(sample["gpus"]) else {}
            seen = set(reading.get("throttle") or ())
            reasons |= seen
            mine = clocks[i][j]
            others = [v for k, c in enumerate(clocks) if k != i and (v := c[j]) is not None]
            slow = mine is not None and bool(others) and mine < statistics.median(others) * (1 - PEERS)
            hits += bool(seen & PROTECTIVE) or slow
        out.append((hits / len(samples) if samples else 0.0, sorted(reasons)))
    return out


def throttle(snap: Snapshot, opts: DoctorOptions) -> Result:
    burn = _burn(snap)
    if isinstance(burn, Result):
        return burn
    tele = burn["telemetry"]
    if not tele["samples"]:
        return skipped(f"no telemetry: {tele.get('why_none') or 'no sample was read'}")
    seconds = float(burn["seconds"])
    clocks = _series(burn, "gfx_mhz")
    temps = _series(burn, "temp_c")
    problems, details = [], []
    for gpu, (share, reasons), clk, temp in zip(
        burn["gpus"], throttled_share(burn), clocks, temps, strict=True
    ):
        got = [c for c in clk if c is not None]
        hot = [t for t in temp if t is not None]
        details.append(
            f"{_name(gpu)}: throttled {share:.0%} of the run ({share * seconds:.0f} s), clock median "
            f"{statistics.median(got) if got else float('nan'):.0f} MHz, hottest "
            f"{max(hot) if hot else float('nan'):.0f} C, reasons seen: {', '.join(reasons) or 'none'}"
        )
        if share > THROTTLED_SHARE:
            problems.append(
                f"{_name(gpu)}: throttled {share:.0%} of the burn-in ({share * seconds:.0f} s of {seconds:.0f} s)"
                f"{'; reasons ' + ', '.join(reasons) if reasons else '; clock below its peers'}"
            )
    source = f"telemetry from {tele['source']}, {len(tele['samples'])} samples"
    if problems:
        return failed(problems[0], *problems[1:], *details, source, fix=FIX_GPU)
    return passed(f"no GPU throttled more than {THROTTLED_SHARE:.0%} of the run", *details, source)


def power(snap: Snapshot, opts: DoctorOptions) -> Result:
    burn = _burn(snap)
    if isinstance(burn, Result):
        return burn
    if not burn["telemetry"]["samples"]:
        return skipped(f"no telemetry: {burn['telemetry'].get('why_none') or 'no sample was read'}")
    problems, details = [], []
    for gpu, watts, limits in zip(
        burn["gpus"], _series(burn, "power_w"), _series(burn, "power_limit_w"), strict=True
    ):
        got = [w for w in watts if w is not None]
        caps = [c for c in limits if c is not None]
        if not got:
            continue
        med, top = statistics.median(got), max(got)
        if not caps:
            details.append(f"{_name(gpu)}: median {med:.0f} W, max {top:.0f} W (no board limit read)")
            continue
        limit = statistics.median(caps)
        details.append(
            f"{_name(gpu)}: median {med:.0f} W, max {top:.0f} W of a {limit:.0f} W limit ({med / limit:.0%})"
        )
        if med > limit * OVER_LIMIT:
            problems.append(f"{_name(gpu)}: median power {med:.0f} W above its {limit:.0f} W board limit")
    if not details:
        return skipped("telemetry has no power readings")
    if problems:
        return failed(problems[0], *problems[1:], *details, fix=FIX_GPU)
    return passed(f"power within the board limit on {len(details)} GPU(s)", *details)


def memory(snap: Snapshot, opts: DoctorOptions) -> Result:
    burn = _burn(snap)
    if isinstance(burn, Result):
        return burn
    problems, details = [], []
    for gpu in burn["gpus"]:
        mem = gpu.get("memory") or {}
        if mem.get("error"):
            problems.append(f"{_name(gpu)}: pattern test failed to run: {mem['error']}")
            continue
        bad = [p for p in mem.get("patterns", []) if p["mismatches"]]
        details.append(
            f"{_name(gpu)}: {mem.get('bytes', 0) >> 20} MiB x {len(mem.get('patterns', []))} patterns"
        )
        for p in bad:
            problems.append(
                f"{_name(gpu)}: {p['mismatches']} word(s) read back wrong with pattern {p['pattern']}"
                f" (first at byte {p['first_bad_offset']})"
            )
    if problems:
        return failed(problems[0], *problems[1:], *details, fix=FIX_GPU)
    return passed(f"every pattern read back as written on {len(details)} device(s)", *details)


def errors(snap: Snapshot, opts: DoctorOptions) -> Result:
    burn = _burn(snap)
    if isinstance(burn, Result):
        return burn
    before, after = burn["counters"]["before"], burn["counters"]["after"]
    if not before or not after:
        return skipped(f"no error counters: {burn['telemetry'].get('why_none') or 'none readable'}")
    fails: list[str] = []
    warns: list[str] = []
    details: list[str] = []
    for gpu, b, a in zip(burn["gpus"], before, after, strict=False):
        for key, label in (
            ("ecc_uncorrectable", "uncorrectable ECC"),
            ("ecc_correctable", "correctable ECC"),
            ("pcie_replay", "PCIe replay"),
        ):
            x, y = b.get(key), a.get(key)
            if x is None or y is None:
                continue
            details.append(f"{_name(gpu)} {label}: {x} -> {y}")
            if y > x:
                line = f"{_name(gpu)}: {y - x} new {label} error(s) during the burn-in ({x} -> {y})"
                (fails if key == "ecc_uncorrectable" else warns).append(line)
    if not details:
        return skipped("the telemetry source reads no error counter on these GPUs")
    fix = "Drain the node and have the named GPU checked (RMA if uncorrectable errors recur)"
    if fails:
        return failed(fails[0], *fails[1:], *warns, *details, fix=fix)
    if warns:
        return warned(warns[0], *warns[1:], *details, fix=fix)
    return passed("no error counter rose during the burn-in", *details)


_NEEDS = frozenset({"burn-in"})
CHECKS = (
    Check(
        "burnin-throughput",
        "burn-in",
        "GEMM and HBM rate held under sustained load",
        throughput,
        SOURCE,
        _NEEDS,
        4,
    ),
    Check("burnin-throttle", "burn-in", "Time throttled under load (telemetry)", throttle, SOURCE, _NEEDS, 4),
    Check("burnin-power", "burn-in", "Power against the board limit under load", power, SOURCE, _NEEDS, 4),
    Check("burnin-memory", "burn-in", "Memory pattern test on every GPU", memory, SOURCE, _NEEDS, 4),
    Check(
        "burnin-errors",
        "burn-in",
        "ECC/RAS and PCIe error counters before and after the load",
        errors,
        "https://github.com/ROCm/cvs",
        _NEEDS,
        4,
    ),
)
