"""GPU error events between jobs (gpu-ras-events). The amdgpu files are written in the driver's own formats
(drivers/gpu/drm/amd/amdgpu/amdgpu_ras.c: amdgpu_ras_sysfs_read "%s: %lu\\n%s: %lu\\n" for ue/ce, the ACA
read adding "de", amdgpu_ras_sysfs_badpages_read "0x%08x : 0x%08x : %1s\\n"); the runs are real doctor runs
kept by --history."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import FakeNode

from rocmstack.doctor import run_doctor
from rocmstack.doctor.history import load_runs
from rocmstack.doctor.ras import from_nvidia, new_events, parse_count_file, read_amd, recorded


def _ras(node: FakeNode, gpu: int, files: dict[str, str]) -> None:
    ras = node.sys / f"class/drm/renderD{128 + gpu}/device/ras"
    ras.mkdir(parents=True, exist_ok=True)
    (ras.parent / "uevent").write_text(f"DRIVER=amdgpu\nPCI_SLOT_NAME=0000:{0x0C + gpu:02x}:00.0\n")
    for name, text in files.items():
        (ras / name).write_text(text)


def _boot(node: FakeNode, boot: str) -> None:
    path = node.proc / "sys/kernel/random/boot_id"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(boot + "\n")


def test_the_drivers_counter_files_are_read_as_it_writes_them():
    assert parse_count_file("ue: 0\nce: 12\n") == {"ue": 0, "ce": 12}
    assert parse_count_file("ue: 1\nce: 0\nde: 3\n") == {"ue": 1, "ce": 0, "de": 3}  # ACA-based GPUs
    assert parse_count_file("Query currently inaccessible\n") is None


def test_every_gpu_once_with_its_blocks_and_retired_pages(tmp_path):
    node = FakeNode(tmp_path, gpus=2)
    _ras(node, 0, {"umc_err_count": "ue: 0\nce: 2\n", "features": "feature mask: 0x3fbf\n",
                   "gpu_vram_bad_pages": "0x00001234 : 0x00001000 : R\n0x00005678 : 0x00001000 : P\n"})  # fmt: skip
    _ras(node, 1, {"aca_umc": "ue: 1\nce: 0\nde: 0\n", "gfx_err_count": "ue: 0\nce: 0\n"})
    assert read_amd(node.sys) == {
        "0000:0c:00.0 umc": {"ue": 0, "ce": 2},
        "0000:0c:00.0 bad_pages": {"pages": 2},
        "0000:0d:00.0 gfx": {"ue": 0, "ce": 0},
        "0000:0d:00.0 umc": {"ue": 1, "ce": 0, "de": 0},
    }


def test_only_growth_of_an_uncorrectable_kind_is_an_event_and_a_reset_counts_from_zero():
    base = {"g umc": {"ue": 3, "ce": 5}, "g bad_pages": {"pages": 4}}
    assert new_events(base, {"g umc": {"ue": 3, "ce": 90}, "g bad_pages": {"pages": 4}}) == []  # correctable
    assert new_events(base, {"g umc": {"ue": 5, "ce": 5}, "g bad_pages": {"pages": 5}}) == [
        "g bad_pages: 1 new retired page(s) (pages 4 -> 5)",
        "g umc: 2 new uncorrectable error(s) (ue 3 -> 5)",
    ]
    assert new_events(base, {"g umc": {"ue": 1, "ce": 0}}) == [
        "g umc: 1 new uncorrectable error(s) (ue 3 -> 1)"
    ]
    assert from_nvidia([("0", 0, 2), ("1", None, None)]) == {"GPU 0 ecc": {"ue": 2, "ce": 0}}  # 1: ECC off


def _run(node: FakeNode, history: Path | None) -> dict:
    report = run_doctor(node.options(fast=True, only=("gpu-ras-events",), history_dir=history))
    return next(c for c in report["checks"] if c["id"] == "gpu-ras-events")


KMSG = Path(__file__).resolve().parents[1] / "fixtures" / "doctor" / "kmsg"


def _log(node: FakeNode, *names: str, keep_from: int = 0) -> None:
    """The node's kernel log: the fixtures' records one after another (numbered anew, as one boot's kernel
    numbers them), the oldest ``keep_from`` of them already overwritten."""
    node.dev.mkdir(parents=True, exist_ok=True)
    lines = [ln.split(",", 2) for n in names for ln in (KMSG / n).read_text().splitlines()]
    records = [f"{prio},{1000 + i},{rest}\n" for i, (prio, _, rest) in enumerate(lines)]
    (node.dev / "kmsg").write_text("".join(records[keep_from:]))


def test_a_new_uncorrectable_event_fails_until_the_next_boot(tmp_path):
    node = FakeNode(tmp_path / "node", gpus=1)
    history = tmp_path / "history"
    history.mkdir(mode=0o700)
    _boot(node, "2b1f7f4e-0001")
    # counts from before this check remembered anything are not new: the first run of a boot passes
    _ras(node, 0, {"umc_err_count": "ue: 1\nce: 7\n"})
    first = _run(node, history)
    assert (
        first["status"] == "pass"
        and first["summary"]
        == "no GPU error event in this boot: first run of this boot: 1 error counter(s) "
        "remembered; the kernel log ("
        + str(node.dev / "kmsg")
        + ") is not readable here: No such file or directory"
    )
    assert _run(node, history)["status"] == "pass"
    _ras(node, 0, {"umc_err_count": "ue: 3\nce: 7\n"})  # two uncorrectable errors between jobs
    event = _run(node, history)
    assert event["status"] == "fail", event
    assert event["summary"] == (
        "0000:0c:00.0 umc: 2 new uncorrectable error(s) (ue 1 -> 3), new since this boot's first run"
    )
    assert _run(node, history)["status"] == "fail"  # still new against the boot's first run: stays drained
    _boot(node, "2b1f7f4e-0002")  # rebooted (--remediate, or a person)
    assert "first run of this boot" in _run(node, history)["summary"]
    kept = load_runs(history, socket.gethostname())
    assert [recorded(r)[0] for r in kept] == ["2b1f7f4e-0001"] * 4 + ["2b1f7f4e-0002"]
    # every run of the boot carries its first counters on: the first run itself may leave the file's tail
    assert [recorded(r)[1] for r in kept[:4]] == [{"0000:0c:00.0 umc": {"ue": 1, "ce": 7}}] * 4


def test_without_history_or_a_boot_id_nothing_is_told_new(tmp_path):
    node = FakeNode(tmp_path / "node", gpus=1)
    _ras(node, 0, {"umc_err_count": "ue: 9\nce: 0\n"})
    report = run_doctor(node.options(fast=True, only=("gpu-ras-events",)))
    row = next(c for c in report["checks"] if c["id"] == "gpu-ras-events")
    assert row["status"] == "skip" and row["summary"].startswith("no --history DIR: "), row
    assert "kmsg) is not readable here" in row["summary"]
    history = tmp_path / "h"
    history.mkdir(mode=0o700)
    assert "the kernel gives no boot id: " in _run(node, history)["summary"]


def test_a_hand_edited_record_judges_nothing():
    good = {"ras": {"boot_id": "b", "counters": {"g umc": {"ue": 1, "ce": 0}}}, "started_at": "t0"}
    assert recorded(good) == ("b", {"g umc": {"ue": 1, "ce": 0}}, "t0")
    later = {
        "ras": {
            "boot_id": "b",
            "counters": {"g umc": {"ue": 3}},
            "baseline": {"g umc": {"ue": 1}},
            "since": "t0",
        }
    }
    assert recorded(later) == ("b", {"g umc": {"ue": 1}}, "t0")
    for bad in ({"ras": {"boot_id": "b", "counters": {"g umc": {"ue": -1}}}},
                {"ras": {"boot_id": "b", "counters": {"g umc": {"ue": True}}}},
                {"ras": {"boot_id": "b", "counters": {}, "baseline": [1]}},
                {"ras": {"boot_id": 3, "counters": {}}}, {"ras": "x"}, {}):  # fmt: skip
        assert recorded(json.loads(json.dumps(bad))) is None


def test_a_gpu_error_in_the_kernel_log_drains_with_its_line_and_is_remembered_until_the_next_boot(tmp_path):
    node = FakeNode(tmp_path / "node", gpus=1)
    history = tmp_path / "history"
    history.mkdir(mode=0o700)
    _boot(node, "2b1f7f4e-0001")
    _ras(node, 0, {"umc_err_count": "ue: 0\nce: 0\n"})
    _log(node, "nvidia-xid-45.kmsg")  # the application's own Xid: no event
    assert _run(node, history)["status"] == "pass"
    _log(node, "nvidia-xid-45.kmsg", "amdgpu-mi300x-4021.kmsg")  # between jobs: the MI300X's lines
    event = _run(node, history)
    assert event["status"] == "fail", event
    assert event["summary"] == (
        "0000:1c:00.0: amdgpu uncorrectable error: amdgpu 0000:1c:00.0: {1}uncorrectable hardware "
        "error(ERREVENT_ATHUB_INTERRUPT) detected! (+1 more)"
    )
    # the kernel's ring moved on and its records were overwritten: the node stays out all the same
    _log(node, "nvidia-xid-45.kmsg", "amdgpu-mi300x-4021.kmsg", keep_from=8)
    again = _run(node, history)
    assert again["status"] == "fail" and again["summary"] == event["summary"], again
    _boot(node, "2b1f7f4e-0002")  # rebooted: a new log
    _log(node, "nvidia-xid-45.kmsg")
    assert _run(node, history)["status"] == "pass"


def test_the_first_run_of_a_boot_judges_the_whole_log_and_without_history_the_log_is_still_judged(tmp_path):
    node = FakeNode(tmp_path / "node", gpus=1)
    history = tmp_path / "history"
    history.mkdir(mode=0o700)
    _boot(node, "2b1f7f4e-0001")
    _ras(node, 0, {"umc_err_count": "ue: 0\nce: 0\n"})
    _log(node, "nvidia-xid-79.kmsg")  # fell off the bus before this boot's first health check
    assert _run(node, history)["summary"].startswith("0000:2b:00: Xid 79 (GPU has fallen off the bus)")
    no_history = _run(node, None)
    assert no_history["status"] == "fail" and "Xid 79" in no_history["summary"], no_history
