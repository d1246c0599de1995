"""NVIDIA sources: nvidia-smi CSV (verbatim outputs, see tests/fixtures/doctor/SOURCES.md), /proc, /dev."""

from __future__ import annotations

import sys
from pathlib import Path

from rocmstack.platform import cuda
from rocmstack.platform.tools import ToolRun

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import TOOLS


def test_nvidia_smi_csv_columns_in_any_order():
    gpus = cuda.parse_nvidia_smi_csv((TOOLS / "nvidia-smi-query-csv-5gpu.txt").read_text())
    assert [g.index for g in gpus] == [0, 1, 2, 3, 4]
    assert gpus[1].name == "GeForce GTX 1080 Ti"
    assert gpus[4].uuid == "GPU-ff3318a7-f0dd-dc57-1fb8-cc95ba35c56e"


def test_nvidia_smi_h200_recorded_here():
    text = (TOOLS / "nvidia-smi-query-csv-h200.txt").read_text()
    run = ToolRun(tuple(cuda.NVIDIA_SMI_ARGV), 0, text, "", 0.03)
    assert cuda.count_from_nvidia_smi(run).count == 1
    assert cuda.parse_nvidia_smi_csv(text)[0].name == "NVIDIA H200"


def test_nvidia_smi_missing():
    run = ToolRun(("nvidia-smi",), None, "", "", 0.0, missing=True)
    result = cuda.count_from_nvidia_smi(run)
    assert result.count is None and "not found" in result.reason


def test_proc_and_dev(tmp_path):
    assert cuda.proc_driver_gpus(tmp_path) is None
    (tmp_path / "driver/nvidia/gpus/0000:18:00.0").mkdir(parents=True)
    assert cuda.proc_driver_gpus(tmp_path) == ["0000:18:00.0"]
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia10"):
        (tmp_path / name).write_text("")
    assert [p.name for p in cuda.dev_nvidia_nodes(tmp_path)] == ["nvidia0", "nvidia1", "nvidia10"]
