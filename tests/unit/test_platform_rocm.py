"""AMD sources: parsers on verbatim tool outputs (tests/fixtures/doctor/SOURCES.md), sysfs readers on a fake
tree built from real properties lines, and Debian's real rocm-smi / rocminfo on this GPU-less machine."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from rocmstack.platform import rocm
from rocmstack.platform.tools import ToolRun, run_tool

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import TOOLS, gpu_node_properties


def read(name: str) -> str:
    return (TOOLS / name).read_text()


@pytest.mark.parametrize(
    "version,name",
    [
        (90402, "gfx942"),
        (90010, "gfx90a"),
        (90500, "gfx950"),
        (110000, "gfx1100"),
        (120001, "gfx1201"),
        (90006, "gfx906"),
    ],
)
def test_gfx_name(version, name):
    assert rocm.gfx_name(version) == name


def test_rocm_smi_json_counts_cards():
    assert rocm.parse_rocm_smi_json(read("rocm-smi-showproductname-mi250x.json")).count == 1


def test_rocm_smi_warning_instead_of_json():
    result = rocm.parse_rocm_smi_json(read("rocm-smi-no-json-data.txt"))
    assert result.count is None and "no JSON" in result.reason


def test_rocm_smi_without_driver_is_zero_not_an_error():
    result = rocm.parse_rocm_smi_json(read("rocm-smi-debian-5.2.3-no-gpu.stderr"))
    assert result.count == 0 and result.driver_missing


def test_amd_smi_gpu_data_after_python_warnings():
    assert rocm.parse_amd_smi_list_json(read("amd-smi-static-gpu_data-rx7800xt-excerpt.txt")).count == 1


def test_amd_smi_bare_list_shape():
    text = read("amd-smi-static-gpu_data-rx7800xt-excerpt.txt")
    bare = text[
        text.index("[", text.index("gpu_data")) : text.rindex("]") + 1
    ]  # amd-smi < 26 prints the list
    assert rocm.parse_amd_smi_list_json(bare).count == 1


def test_rocminfo_gpu_agent():
    assert rocm.parse_rocminfo_agents(read("rocminfo-mi300x-agent5-excerpt.txt")) == ["gfx942"]


def test_rocminfo_cpu_agent_named_like_a_gpu_is_not_counted():
    assert rocm.parse_rocminfo(read("rocminfo-mi300a-cpu-agent-excerpt.txt"), 0).count == 0


def test_rocminfo_without_kfd():
    out = read("rocminfo-debian-5.2.3-no-kfd.stdout")
    result = rocm.count_from_tool(
        "rocminfo", ToolRun(("rocminfo",), 1, out, read("rocminfo-debian-5.2.3-no-kfd.stderr"), 0.1)
    )
    assert result.count == 0 and result.driver_missing


def test_amd_smi_partition_text_table():
    assert rocm.parse_amd_smi_partition(read("amd-smi-partition-spx-4gpu.txt")) == ["SPX"] * 4


def test_count_from_tool_reports_a_missing_or_hung_tool():
    assert (
        "not found"
        in rocm.count_from_tool("amd-smi", ToolRun(("amd-smi",), None, "", "", 0, missing=True)).reason
    )
    hung = rocm.count_from_tool("rocm-smi", ToolRun(("rocm-smi",), None, "", "", 5.0, timed_out=True))
    assert hung.count is None and "killed" in hung.reason


def test_kfd_topology_counts_gpu_nodes_only(tmp_path):
    nodes = tmp_path / "class/kfd/kfd/topology/nodes"
    for i, props in enumerate(
        [
            "cpu_cores_count 64\nsimd_count 0\ngfx_target_version 0\n",
            gpu_node_properties(),
            gpu_node_properties("gfx_target_version 90010\n"),
        ]
    ):
        (nodes / str(i)).mkdir(parents=True)
        (nodes / f"{i}/properties").write_text(props)
    found = rocm.kfd_gpu_nodes(tmp_path)
    assert [n.arch for n in found] == ["gfx942", "gfx90a"]
    assert rocm.kfd_gpu_nodes(tmp_path / "absent") is None


def test_render_nodes_filtered_by_vendor(tmp_path):
    dev, sysfs = tmp_path / "dev", tmp_path / "sys"
    (dev / "dri").mkdir(parents=True)
    for name, vendor in (("renderD128", "0x10de"), ("renderD129", "0x1002"), ("renderD130", None)):
        (dev / "dri" / name).write_text("")
        if vendor:
            (sysfs / "class/drm" / name / "device").mkdir(parents=True)
            (sysfs / "class/drm" / name / "device/vendor").write_text(vendor + "\n")
    assert [n.name for n in rocm.amd_render_nodes(dev, sysfs)] == ["renderD129"]
    assert len(rocm.render_nodes(dev, sysfs)) == 3


def test_compute_partitions_from_sysfs(tmp_path):
    for card, mode in (("card0", "CPX"), ("card1", "spx")):
        (tmp_path / "class/drm" / card / "device").mkdir(parents=True)
        (tmp_path / "class/drm" / card / "device/current_compute_partition").write_text(mode + "\n")
    (tmp_path / "class/drm/card0-DP-1").mkdir()
    assert rocm.compute_partitions(tmp_path) == {"card0": "CPX", "card1": "SPX"}


@pytest.mark.skipif(
    shutil.which("rocm-smi") is None, reason="Debian's rocm-smi not installed (make system-deps)"
)
def test_debian_rocm_smi_on_a_machine_without_amd_gpu():
    run = run_tool(rocm.TOOL_ARGV["rocm-smi"], timeout=30)
    result = rocm.count_from_tool("rocm-smi", run)
    assert result.count == 0 and result.driver_missing, (run, result)


@pytest.mark.skipif(
    shutil.which("rocminfo") is None, reason="Debian's rocminfo not installed (make system-deps)"
)
def test_debian_rocminfo_on_a_machine_without_kfd():
    run = run_tool(rocm.TOOL_ARGV["rocminfo"], timeout=30)
    assert run.returncode != 0
    result = rocm.count_from_tool("rocminfo", run)
    assert result.count == 0 and result.driver_missing, (run, result)
