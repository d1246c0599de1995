"""device-name, fp8-type, fast-path-kernels: the GPU's identity as the engines see it.

The device names, arch strings and kernel paths are the verbatim values of the public threads cited next to
each fixture; KFD nodes are read from a fake sysfs tree built from tests/fixtures/doctor/tools."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import gpu_node_properties, make_snapshot, probe

from rocmstack.doctor.checks import BY_ID
from rocmstack.doctor.checks.identity import device_name, fast_path_kernels, fp8_type, product
from rocmstack.doctor.model import DoctorOptions
from rocmstack.platform import rocm
from rocmstack.platform.tools import PROBES_DIR, parse_probe_output
from rocmstack.status import Status

OPTS = DoctorOptions(env={})
MI300X, MI355X, GFX1201 = 90402, 90500, 120001
MI300X_ID, MI355X_ID = 0x74A1, 0x75A3

# https://github.com/ROCm/TheRock/issues/4693: `torch.cuda.get_device_properties(0).name` on an MI355X (gfx950)
# with TheRock's torch, and with torch from download.pytorch.org/whl/rocm7.1 on the same machine
THEROCK_NAME = "AMD Radeon Graphics"
UPSTREAM_NAME = "AMD Instinct MI355X"
# https://github.com/pytorch/pytorch/pull/147791: the name torch gives an MI250X once it finds amdgpu.ids
MI250_NAME = "AMD Instinct MI250X / MI250"
# vllm/platforms/rocm.py _ROCM_DEVICE_ID_NAME_MAP: what current_platform.get_device_name() answers for 0x75a3
VLLM_MI355X = "AMD_Instinct_MI355X"
# https://github.com/pytorch/pytorch/issues/75198: `torch.cuda.get_device_name(0)` / `(1)` on an RTX 3090 Ti +
# RTX 3090 box (the title names GPU 0 "RTX 3090 Ti"; the NVML names below are written from it)
CUDA_PLACEHOLDER, CUDA_3090 = "NVIDIA Graphics Device", "NVIDIA GeForce RTX 3090"
# tests/fixtures/doctor/tools/nvidia-smi-query-csv-h200.txt (recorded by this project): the H200's name
H200 = "NVIDIA H200"
# https://github.com/ROCm/hipBLASLt/issues/1786 (tools/rocminfo-mi300x-agent5-excerpt.txt): `Name: gfx942`;
# vLLM's _GCN_ARCH is the gcnArchName form with features, as torch's props.gcnArchName prints it
GCN_MI300X = "gfx942:sramecc+:xnack-"
# https://github.com/vllm-project/vllm/issues/43605: the AITER MoE kernel vLLM loaded on an MI355X
MOE_CO = (
    "/usr/local/lib/python3.12/dist-packages/aiter_meta/hsa//gfx950/fmoe/silu/"
    "fmoe_bf16_blockscaleFp8_g1u1_vs_silu_32x384.co"
)


def kfd_tree(root: Path, *gpus: tuple[int, int]) -> list[rocm.KfdNode]:
    """A fake /sys KFD topology: the MI350X node's verbatim properties lines (ROCm/rocm-systems#10274), with
    each GPU's gfx_target_version and PCI device id put in."""
    nodes = root / "class/kfd/kfd/topology/nodes"
    for i, (version, device_id) in enumerate(gpus, start=1):
        (nodes / str(i)).mkdir(parents=True)
        text = gpu_node_properties(f"gfx_target_version {version}\n")
        text = "\n".join(
            f"device_id {device_id}" if ln.startswith("device_id ") else ln for ln in text.splitlines()
        )
        (nodes / str(i) / "properties").write_text(text + "\n")
    found = rocm.kfd_gpu_nodes(root)
    assert found is not None
    return found


def amd_snap(tmp_path: Path, *gpus: tuple[int, int], **kw):
    snap = make_snapshot(**kw)
    return dataclasses.replace(snap, kfd=kfd_tree(tmp_path / "sys", *gpus))


def torch_probe(*names: str, archs: tuple[str, ...] = ()) -> dict:
    devices = [
        {"index": i, "name": n, "arch": (archs[i] if archs else "gfx950")} for i, n in enumerate(names)
    ]
    return {"version": "2.9.1+rocm7.0.2", "hip": "7.0", "count": len(names), "devices": devices}


def vllm_probe(**platform) -> dict:
    return {
        "version": "0.27.0",
        "ext_ok": True,
        "platform": {"class": "RocmPlatform", "is_rocm": True, **platform},
    }


VLLM = {"dists": {"vllm": "0.27.0"}}


# -- device-name ------------------------------------------------------------------------------------------


def test_the_table_is_amdgpu_ids():
    assert product(0x75A3)["name"] == "AMD Instinct MI355X"
    assert product(0x74A1)["name"] == "AMD Instinct MI300X"
    assert product(0x740C)["name"] == MI250_NAME
    assert product(0x1234) is None


def test_generic_name_on_mi355x_fails_naming_the_pci_id(tmp_path):
    snap = amd_snap(
        tmp_path, (MI355X, MI355X_ID), probes={"torch": probe("torch", torch_probe(THEROCK_NAME))}
    )
    result = device_name(snap, OPTS)
    assert result.status == Status.FAIL
    assert "'AMD Radeon Graphics'" in result.summary and "0x75a3 = AMD Instinct MI355X" in result.summary
    assert "amdgpu.ids" in result.fix and "libdrm 2.4.132" in result.fix


def test_vllm_names_it_but_torch_does_not(tmp_path):
    # vLLM maps the PCI id itself; SGLang's names come from torch: one engine still misses its configs
    probes = {
        "torch": probe("torch", torch_probe(THEROCK_NAME)),
        "vllm": probe("vllm", vllm_probe(device_names=[VLLM_MI355X])),
    }
    result = device_name(amd_snap(tmp_path, (MI355X, MI355X_ID), probes=probes), OPTS)
    assert result.status == Status.FAIL and result.summary.startswith("torch.cuda.get_device_name")
    assert any("AMD_Instinct_MI355X" in d for d in result.details)


def test_product_name_passes(tmp_path):
    probes = {
        "torch": probe("torch", torch_probe(UPSTREAM_NAME)),
        "vllm": probe("vllm", vllm_probe(device_names=[VLLM_MI355X])),
    }
    result = device_name(amd_snap(tmp_path, (MI355X, MI355X_ID), probes=probes), OPTS)
    assert result.status == Status.PASS and "AMD Instinct MI355X" in result.summary


def test_no_engine_name_or_no_instinct_skips(tmp_path):
    # torch without --deep names nothing, vLLM not installed: nothing judged
    snap = amd_snap(tmp_path, (MI355X, MI355X_ID), probes={"torch": probe("torch", {"count": 1})})
    result = device_name(snap, OPTS)
    assert result.status == Status.SKIP and "--deep" in result.summary
    radeon = amd_snap(
        tmp_path / "r", (110000, 0x744C), probes={"torch": probe("torch", torch_probe(THEROCK_NAME))}
    )
    assert device_name(radeon, OPTS).status == Status.SKIP
    assert device_name(make_snapshot(), OPTS).status == Status.SKIP


def test_cuda_twin_compares_torch_with_nvml():
    bad = make_snapshot(
        nvidia=2,
        probes={
            "torch": probe(
                "torch",
                {"cuda": "11.3", "count": 2, "devices": [{"name": CUDA_PLACEHOLDER}, {"name": CUDA_3090}]},
            ),
            "nvml": probe("nvml", {"count": 2, "names": ["NVIDIA GeForce RTX 3090 Ti", CUDA_3090]}),
        },
    )
    result = device_name(bad, OPTS)
    assert result.status == Status.FAIL and "'NVIDIA Graphics Device'" in result.summary
    good = make_snapshot(
        nvidia=1,
        probes={
            "torch": probe("torch", {"cuda": "13.0", "count": 1, "devices": [{"name": H200}]}),
            "nvml": probe("nvml", {"count": 1, "names": [H200]}),
        },
    )
    assert device_name(good, OPTS).status == Status.PASS
    no_nvml = make_snapshot(
        nvidia=1, probes={"torch": probe("torch", {"count": 1, "devices": [{"name": H200}]})}
    )
    assert device_name(no_nvml, OPTS).status == Status.SKIP


# -- fp8-type ---------------------------------------------------------------------------------------------


def test_fnuz_on_gfx950_fails(tmp_path):
    # a mixed node: vLLM decided from the first device (MI300X), the MI355X computes OCP e4m3fn
    vllm = vllm_probe(fp8_dtype="float8_e4m3fnuz", is_fp8_fnuz=True, gcn_arch=GCN_MI300X)
    snap = amd_snap(
        tmp_path, (MI300X, MI300X_ID), (MI355X, MI355X_ID), probes={"vllm": probe("vllm", vllm)}, **VLLM
    )
    result = fp8_type(snap, OPTS)
    assert result.status == Status.FAIL
    assert (
        "gfx950" in result.summary and "float8_e4m3fn" in result.summary and "first device" in result.summary
    )
    assert "HIP_VISIBLE_DEVICES" in result.fix


def test_e4m3fn_on_gfx942_fails_on_a_single_arch_node(tmp_path):
    vllm = vllm_probe(fp8_dtype="float8_e4m3fn", is_fp8_fnuz=False, gcn_arch="gfx950")
    snap = amd_snap(tmp_path, (MI300X, MI300X_ID), probes={"vllm": probe("vllm", vllm)}, **VLLM)
    result = fp8_type(snap, OPTS)
    assert result.status == Status.FAIL and "gfx942 on this node computes float8_e4m3fnuz" in result.summary


def test_matching_fp8_type_passes(tmp_path):
    vllm = vllm_probe(fp8_dtype="float8_e4m3fnuz", is_fp8_fnuz=True, gcn_arch=GCN_MI300X)
    snap = amd_snap(tmp_path, (MI300X, MI300X_ID), probes={"vllm": probe("vllm", vllm)}, **VLLM)
    assert fp8_type(snap, OPTS).status == Status.PASS
    cuda = {
        "version": "0.27.0",
        "platform": {"class": "CudaPlatform", "is_cuda": True, "fp8_dtype": "float8_e4m3fn"},
    }
    assert (
        fp8_type(make_snapshot(nvidia=1, probes={"vllm": probe("vllm", cuda)}, **VLLM), OPTS).status
        == Status.PASS
    )


def test_fp8_skips_without_vllm_or_fp8_gpu(tmp_path):
    assert fp8_type(amd_snap(tmp_path, (MI300X, MI300X_ID)), OPTS).status == Status.SKIP
    vllm = vllm_probe(fp8_dtype="float8_e4m3fn")
    gfx90a = amd_snap(tmp_path / "a", (90010, 0x740C), probes={"vllm": probe("vllm", vllm)}, **VLLM)
    assert fp8_type(gfx90a, OPTS).status == Status.SKIP
    cpu = {"version": "0.27.0", "platform": {"class": "CpuPlatform", "fp8_dtype": "float8_e4m3fn"}}
    assert fp8_type(make_snapshot(probes={"vllm": probe("vllm", cpu)}, **VLLM), OPTS).status == Status.SKIP


# -- fast-path-kernels ------------------------------------------------------------------------------------


def aiter_tree(site: Path, files: dict[str, str]) -> Path:
    """An installed aiter as its setup.py lays it out: aiter/ (install_mode "install") and aiter_meta/ with
    csrc/ and hsa/<gfx>/<family>/ (ROCm/aiter setup.py, aiter/jit/core.py)."""
    (site / "aiter").mkdir(parents=True)
    (site / "aiter/__init__.py").write_text("")
    (site / "aiter/install_mode").write_text("install\n")
    (site / "aiter_meta/csrc").mkdir(parents=True)
    for rel in files:
        path = site / "aiter_meta/hsa" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    return site


def run_vllm_probe(site: Path, env: dict[str, str] | None = None) -> dict:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("AITER")}
    environ.update(PYTHONPATH=str(site), **(env or {}))
    proc = subprocess.run(
        [sys.executable, str(PROBES_DIR / "vllm_probe.py")],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )
    data = parse_probe_output(proc.stdout)
    assert data is not None, proc.stderr
    return data


# The installed tree: vllm#43605's MoE kernel path for gfx950, ROCm/aiter's f4gemm folders (gfx950 ships
# f4gemm_bf16_per1x32Fp4_BpreShuffle_128x128.co, gfx942 only the folder's f4gemm_bf16_per1x32Fp4.csv), and
# one real file name of each of its fmoe, fmha_v3_fwd and mla folders
KERNELS = {
    MOE_CO.split("aiter_meta/hsa//")[1]: "",
    "gfx950/f4gemm/f4gemm_bf16_per1x32Fp4_BpreShuffle_128x128.co": "",
    "gfx950/mla/mla_a16w16_qh16_m16x4_n16x1_coex0_mask1.co": "",
    "gfx950/fmha_v3_fwd/fwd_hd128_bf16.co": "",
    "gfx942/fmoe/fmoe_b16.co": "",
    "gfx942/fmha_v3_fwd/MI300/fwd_hd128_bf16_causal_rtna.co": "",
    "gfx942/mla/mla_a16w16_qh16_m16x4_n16x1_coex0_mask1.co": "",
    "gfx942/f4gemm/f4gemm_bf16_per1x32Fp4.csv": "",
}


def test_probe_lists_aiter_kernels_by_arch(tmp_path):
    data = run_vllm_probe(aiter_tree(tmp_path / "site", KERNELS))
    aiter = data["aiter"]
    assert aiter["found"] and aiter["hsa_dir"].endswith("aiter_meta/hsa")
    assert aiter["archs"]["gfx950"]["families"] == {"fmoe": 1, "f4gemm": 1, "mla": 1, "fmha_v3_fwd": 1}
    assert aiter["archs"]["gfx942"]["families"]["f4gemm"] == 0  # the .csv is no kernel
    assert "platform" in data  # vLLM absent here: its platform part records the import error


def fast_snap(tmp_path, env: dict, *gpus: tuple[int, int]):
    listing = run_vllm_probe(aiter_tree(tmp_path / "site", KERNELS))
    return amd_snap(tmp_path, *gpus, env=env, probes={"vllm": probe("vllm", listing)})


def test_gfx950_only_kernel_on_gfx942_fails(tmp_path):
    env = {"VLLM_ROCM_USE_AITER": "1", "VLLM_ROCM_USE_AITER_FP4_ASM_GEMM": "1"}
    result = fast_path_kernels(fast_snap(tmp_path, env, (MI300X, MI300X_ID)), OPTS)
    assert result.status == Status.FAIL
    assert "VLLM_ROCM_USE_AITER_FP4_ASM_GEMM" in result.summary and "gfx942" in result.summary
    assert "hsa/gfx942/f4gemm/*.co" in result.summary
    assert "Unset VLLM_ROCM_USE_AITER_FP4_ASM_GEMM" in result.fix


def test_arch_without_any_kernels_fails(tmp_path):
    # https://github.com/ROCm/aiter/issues/5229: VLLM_ROCM_USE_AITER=1 on a gfx1201 (R9700) whose container
    # "ships no gfx1201 code objects"
    result = fast_path_kernels(fast_snap(tmp_path, {"VLLM_ROCM_USE_AITER": "1"}, (GFX1201, 0x7551)), OPTS)
    assert result.status == Status.FAIL and "hsa/gfx1201/" in result.summary


def test_kernels_for_the_arch_pass(tmp_path):
    env = {
        "VLLM_ROCM_USE_AITER": "1",
        "VLLM_ROCM_USE_AITER_FP4_ASM_GEMM": "1",
        "VLLM_ROCM_USE_AITER_MHA": "0",
    }
    result = fast_path_kernels(fast_snap(tmp_path, env, (MI355X, MI355X_ID)), OPTS)
    assert result.status == Status.PASS, result


def test_sub_flag_without_the_master_switch_skips(tmp_path):
    # vllm/_aiter_ops.py: every is_*_enabled() is `cls._AITER_ENABLED and ...`, VLLM_ROCM_USE_AITER defaults off
    snap = fast_snap(tmp_path, {"VLLM_ROCM_USE_AITER_FP4_ASM_GEMM": "1"}, (MI300X, MI300X_ID))
    result = fast_path_kernels(snap, OPTS)
    assert result.status == Status.SKIP and "VLLM_ROCM_USE_AITER_FP4_ASM_GEMM=1" in result.summary
    assert fast_path_kernels(make_snapshot(env={"SGLANG_USE_AITER": "1"}), OPTS).status == Status.SKIP


def test_registered_with_sources():
    for cid in ("device-name", "fp8-type", "fast-path-kernels"):
        assert BY_ID[cid].source.startswith("https://") and BY_ID[cid].level == 1
