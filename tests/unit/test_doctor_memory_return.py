"""The memory-return judge (rocmstack.doctor.checks.memory_return) on the field's own figures from ROCm 7.2 and on
the loops' own result shapes."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path

from rocmstack.doctor.checks.memory_return import judge_loop, memory_return
from rocmstack.doctor.model import DoctorOptions
from rocmstack.platform.snapshot import Snapshot
from rocmstack.status import Status

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "memory_return"
GIB = 1 << 30


def _tms_pr84_row() -> dict:
    """torch_memory_saver#84's table (ROCm 7.2): free bytes after the 30 GiB region was allocated and after
    pause(). The repro (#83) allocates exactly 30 GiB, so free before the allocation was 30 GiB more."""
    text = (FIXTURES / "tms-pr84-rocm72.txt").read_text(encoding="utf-8")
    total_gb = float(re.search(r"MI30x, (\d+) GB", text)[1])
    alloc_free = float(re.search(r"after alloc \| free ([\d.]+) GB", text)[1])
    pause_free = float(re.search(r"after `pause\(\)` \| free ([\d.]+) GB", text)[1])
    hip = re.search(r"HIP ([\d.]+)", text)[1]
    nbytes = int(re.search(r"int\((\d+)\*2\*\*30", (FIXTURES / "tms-issue83-repro.txt").read_text())[1]) * GIB

    def used(free_gb: float) -> dict:
        return {"process": None, "device": int((total_gb - free_gb) * GIB), "source": "hipMemGetInfo"}

    held = used(alloc_free)
    before = {**held, "device": held["device"] - nbytes}
    return {
        "loop": "saver",
        "nbytes": nbytes,
        "judged_on": "device",  # a single-process reproducer: the device's figure is the process's
        "runtime": {"hip": hip},
        "cycles": [{"cycle": 1, "before": before, "held": held, "after": used(pause_free)}],
    }


def test_rocm_7_2_pause_that_frees_nothing_fails_with_the_mib_and_the_runtime():
    verdict = judge_loop(_tms_pr84_row())
    assert verdict.status == "fail"
    assert "30,720 MiB of 30,720 MiB not returned" in verdict.line
    assert "HIP 7.2.26015" in verdict.line


def _row(loop: str, figures: list[tuple[int, int, int]], nbytes: int = 256 << 20, **extra) -> dict:
    mib = 1 << 20
    return {
        "loop": loop,
        "nbytes": nbytes,
        "runtime": {"cuda": "13.0"},
        "cycles": [
            {
                "cycle": k,
                "before": {"process": b * mib, "device": None, "source": "nvml"},
                "held": {"process": h * mib, "device": None, "source": "nvml"},
                "after": {"process": a * mib, "device": None, "source": "nvml"},
            }
            for k, (b, h, a) in enumerate(figures, start=1)
        ],
        **extra,
    }


def test_memory_that_creeps_up_each_cycle_fails_on_the_loop_total():
    # 40 MiB kept per cycle: no cycle alone keeps half of 256 MiB, five together do
    creep = [(500 + 40 * k, 756 + 40 * k, 540 + 40 * k) for k in range(5)]
    verdict = judge_loop(_row("ipc", creep))
    assert verdict.status == "fail" and "grew 200 MiB over 5 cycles (40 MiB per cycle" in verdict.line


def test_a_figure_that_does_not_follow_the_allocation_judges_nothing():
    flat = [(500, 510, 500)] * 5
    verdict = judge_loop(_row("vmm", flat))
    assert verdict.status == "skip" and "does not follow this process" in verdict.line


def test_no_figure_skipped_loop_and_crash():
    none = _row("ipc", [(0, 0, 0)])
    for c in none["cycles"]:
        for k in ("before", "held", "after"):
            c[k] = {"process": None, "device": None, "source": "NVML lists none of processes [7]"}
    assert judge_loop(none).status == "skip"
    assert judge_loop({"loop": "cumem", "skipped": "vLLM is not installed"}).status == "skip"
    crashed = judge_loop(
        {"loop": "dmabuf", "crash": "the process died of SIGSEGV in cycle 1, allocate after export",
         "runtime": {"hip": "7.2.26015"}, "cycles": []}
    )  # fmt: skip
    assert (
        crashed.status == "fail"
        and "SIGSEGV in cycle 1, allocate after export (HIP 7.2.26015)" in crashed.line
    )


def _snap(data: dict) -> Snapshot:
    return dataclasses.replace(make_snapshot(), active={"memory_return": data})


def test_the_check_fails_on_any_loop_and_never_passes_on_skips_alone():
    good = _row("ipc", [(500, 756, 500)] * 5)
    bad = _tms_pr84_row()
    opts = DoctorOptions()
    result = memory_return(_snap({"gpu": "0", "loops": [good, bad]}), opts)
    assert result.status == Status.FAIL and "1 of 2 loop(s)" in result.summary
    assert "torch_memory_saver#83" in (result.fix or "")
    skips = [
        {"loop": "cumem", "skipped": "vLLM is not installed"},
        {"loop": "saver", "skipped": "not installed"},
    ]
    result = memory_return(_snap({"gpu": "0", "loops": skips}), opts)
    assert result.status == Status.SKIP
    result = memory_return(_snap({"gpu": "0", "loops": [good]}), opts)
    assert result.status == Status.PASS
    result = memory_return(_snap({"skipped": "no GPU on this node"}), opts)
    assert result.status == Status.SKIP


def test_a_healthy_h200_gives_memory_back_in_every_loop():
    """The loops' own figures from a real level-2 run on one H200 (five cycles of 256 MiB each). That run
    predates the warm-up field: its first cycle is the one that created each process's context (NVML listed no
    process figure before it), which the loops now run as their warm-up."""
    data = json.loads((FIXTURES / "h200-2026-12-05.json").read_text())
    verdicts = {row["loop"]: judge_loop({**row, "warmup": 1}) for row in data["loops"]}
    for loop in ("ipc", "vmm", "cumem", "dmabuf"):
        assert verdicts[loop].status == "pass", verdicts[loop]
        assert (
            "4 cycles of 256 MiB" in verdicts[loop].line
            and "0 MiB left after the last" in verdicts[loop].line
        )
    # torch_memory_saver gave its 278 MiB back at every pause, then its teardown of the paused region aborted
    # the process at exit (exit 1): the loop now ends its process once the cycles are done
    saver = verdicts["saver"]
    assert saver.status == "fail" and "only support interesting region" in saver.line
    assert [c["held"]["process"] - c["after"]["process"] for c in data["loops"][3]["cycles"][1:]] == [
        291504128
    ] * 4
