"""vllm-python, vllm-flavour, nvidia-packages, torch-arch."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot, probe

from rocmstack.doctor.checks.packages import nvidia_packages, torch_arch, vllm_flavour, vllm_python
from rocmstack.doctor.model import DoctorOptions
from rocmstack.status import Status

OPTS = DoctorOptions()
AMD = {"kfd_archs": (90402,), "amd_render": 1}


def test_vllm_python():
    assert vllm_python(make_snapshot(**AMD), OPTS).status == Status.SKIP
    ok = make_snapshot(dists={"vllm": "0.27.0+rocm714"}, **AMD)
    assert vllm_python(ok, OPTS).status == Status.PASS
    old = make_snapshot(dists={"vllm": "0.27.0"}, site={"python": "3.11.7"}, **AMD)
    assert vllm_python(old, OPTS).status == Status.FAIL


def test_vllm_flavour():
    cuda_wheel = make_snapshot(
        dists={"vllm": "0.20.2"},
        probes={
            "vllm": probe(
                "vllm",
                {
                    "ext_ok": False,
                    "ext_error": "ImportError: libcudart.so.12: cannot open shared object file",
                },
            )
        },
        **AMD,
    )
    assert vllm_flavour(cuda_wheel, OPTS).status == Status.FAIL
    rocm_wheel = make_snapshot(
        dists={"vllm": "0.27.0+rocm714"}, probes={"vllm": probe("vllm", {"ext_ok": True})}, **AMD
    )
    assert vllm_flavour(rocm_wheel, OPTS).status == Status.PASS
    untagged = make_snapshot(dists={"vllm": "0.27.0"}, not_run={"vllm": "skipped by --fast"}, **AMD)
    assert vllm_flavour(untagged, OPTS).status == Status.WARN
    rocm_on_cuda = make_snapshot(dists={"vllm": "0.27.0+rocm714"}, nvidia=1)
    assert vllm_flavour(rocm_on_cuda, OPTS).status == Status.FAIL


def test_nvidia_packages():
    bad = make_snapshot(
        dists={
            "nvidia-nccl-cu12": "2.21.5",
            "nvidia-cublas": "13.1.0",
            "nvidia-ml-py": "13.0",
            "cupy-cuda13x": "14.2.0",
        },
        **AMD,
    )
    result = nvidia_packages(bad, OPTS)
    assert result.status == Status.FAIL and len(result.details) == 3  # nvidia-ml-py is harmless
    assert nvidia_packages(make_snapshot(dists={"nvidia-ml-py": "13.0"}, **AMD), OPTS).status == Status.PASS
    assert (
        nvidia_packages(make_snapshot(dists={"nvidia-nccl-cu12": "2"}, nvidia=1), OPTS).status == Status.SKIP
    )


def test_torch_arch_amd_from_kfd():
    snap = make_snapshot(
        probes={
            "torch": probe(
                "torch", {"hip": "7.0.2", "version": "2.9.1+rocm7.0.2", "arch_list": ["gfx90a", "gfx942"]}
            )
        },
        **AMD,
    )
    assert torch_arch(snap, OPTS).status == Status.PASS
    snap = make_snapshot(probes={"torch": probe("torch", {"hip": "7.0.2", "arch_list": ["gfx950"]})}, **AMD)
    assert torch_arch(snap, OPTS).status == Status.FAIL


def test_torch_arch_nvidia_from_nvml_and_ptx():
    nvml = probe("nvml", {"count": 1, "archs": ["sm_90"]})
    snap = make_snapshot(
        nvidia=1,
        probes={
            "nvml": nvml,
            "torch": probe("torch", {"cuda": "13.0", "arch_list": ["sm_80", "sm_90", "sm_100"]}),
        },
    )
    assert torch_arch(snap, OPTS).status == Status.PASS
    ptx = make_snapshot(
        nvidia=1,
        probes={"nvml": nvml, "torch": probe("torch", {"cuda": "12", "arch_list": ["sm_80", "compute_80"]})},
    )
    assert torch_arch(ptx, OPTS).status == Status.PASS  # JIT from PTX
    none = make_snapshot(
        nvidia=1, probes={"nvml": nvml, "torch": probe("torch", {"cuda": "12", "arch_list": ["sm_70"]})}
    )
    assert torch_arch(none, OPTS).status == Status.FAIL


def test_torch_arch_deep_uses_torch_devices():
    torch = {
        "cuda": "13.0",
        "arch_list": ["sm_90"],
        "devices": [{"index": 0, "name": "NVIDIA H200", "arch": "sm_90"}],
    }
    assert (
        torch_arch(make_snapshot(nvidia=1, probes={"torch": probe("torch", torch)}), OPTS).status
        == Status.PASS
    )


def test_torch_probe_problems():
    assert torch_arch(make_snapshot(not_run={"torch": "skipped by --fast"}), OPTS).status == Status.SKIP
    crashed = make_snapshot(probes={"torch": probe("torch", None, returncode=-6)}, **AMD)
    assert torch_arch(crashed, OPTS).status == Status.ERROR
    broken = make_snapshot(
        probes={"torch": probe("torch", {"import_error": "KeyError: 'libamd_smi.so'"})}, **AMD
    )
    assert torch_arch(broken, OPTS).status == Status.FAIL


def _vllm_tree(root: Path, modules: dict[str, str]) -> Path:
    pkg = root / "vllm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for name, body in modules.items():
        (pkg / f"{name}.py").write_text(body)
    return root


def _probe(root: Path) -> dict:
    import os

    from rocmstack.platform.tools import finish_probe, start_probe

    env = {**os.environ, "PYTHONPATH": str(root)}
    result = finish_probe("vllm", start_probe("vllm", python=sys.executable, timeout=60, env=env))
    assert result.data is not None, result.run
    return result.data


def test_vllm_probe_loads_the_extensions_the_package_ships(tmp_path):
    # vLLM 0.24's CUDA wheel ships vllm/_C_stable_libtorch.abi3.so and no vllm/_C (vllm/platforms/cuda.py
    # imports the former); the CPU and ROCm builds ship vllm/_C. Python modules stand in for the .so files.
    stable = _probe(_vllm_tree(tmp_path / "cuda", {"_C_stable_libtorch": ""}))
    assert stable["ext_ok"] is True and stable["ext_modules"] == ["vllm._C_stable_libtorch"]
    classic = _probe(_vllm_tree(tmp_path / "rocm", {"_C": "", "_C_stable_libtorch": ""}))
    assert classic["ext_ok"] is True and classic["ext_modules"] == ["vllm._C", "vllm._C_stable_libtorch"]
    broken = _probe(
        _vllm_tree(tmp_path / "broken", {"_C": "raise ImportError('libcudart.so.13: cannot open')"})
    )
    assert broken["ext_ok"] is False and "libcudart" in broken["ext_error"]
    empty = _probe(_vllm_tree(tmp_path / "empty", {}))
    assert empty["ext_ok"] is False and "ships none of vllm._C" in empty["ext_error"]
    snap = make_snapshot(dists={"vllm": "0.24.0"}, probes={"vllm": probe("vllm", stable)})
    r = vllm_flavour(snap, DoctorOptions())
    assert r.status == Status.PASS and "vllm._C_stable_libtorch loads" in r.summary, r


def _import_error(name: str) -> str:
    """The exception line of a recorded `import torch` traceback, as the torch probe reports it."""
    lines = (Path(__file__).resolve().parents[1] / "fixtures/doctor/torch" / name).read_text().splitlines()
    line = next(x for x in lines if "ImportError: " in x)
    return line[line.index("ImportError: ") :]


def _broken_torch(error: str, **kw):
    return make_snapshot(probes={"torch": probe("torch", {"import_error": error})}, **AMD, **kw)


def test_torch_import_missing_rocm_library_names_it():
    hip = torch_arch(_broken_torch(_import_error("import-torch-libamdhip64-therock-1119.txt")), OPTS)
    assert hip.status == Status.FAIL and "libamdhip64.so.7" in hip.summary, hip
    assert hip.fix is not None and "libamdhip64.so.7" in hip.fix and "HIP runtime" in hip.fix
    assert "LD_LIBRARY_PATH" in hip.fix and "amdsmi" not in hip.fix
    miopen = _broken_torch(
        _import_error("import-torch-libMIOpen-comfyui-gfx1151-fa-1.txt"),
        modules={"_rocm_sdk_core": "/venv/lib/python3.12/site-packages/_rocm_sdk_core"},
    )
    result = torch_arch(miopen, OPTS)
    assert result.fix is not None and "libMIOpen.so.1" in result.fix and "MIOpen" in result.fix, result
    assert "_rocm_sdk" in result.fix and "amdsmi" not in result.fix
    # glibc's dlopen message for the HSA runtime and roctx (the fixtures above carry the same wording)
    for lib, what in (("libhsa-runtime64.so.1", "HSA runtime"), ("libroctx64.so.4", "roctracer")):
        result = torch_arch(_broken_torch(f"OSError: {lib}: cannot open shared object file: x"), OPTS)
        assert result.fix is not None and lib in result.fix and what in result.fix, result


def test_torch_import_missing_amd_smi_points_at_amdsmi():
    # import torch -> import amdsmi without libamd_smi.so raises KeyError (pytorch/pytorch#188724's log)
    for error in (
        "KeyError: 'libamd_smi.so'",
        "OSError: libamd_smi.so: cannot open shared object file: No such file or directory",
    ):
        result = torch_arch(_broken_torch(error), OPTS)
        assert result.status == Status.FAIL and result.fix is not None, result
        assert "amdsmi" in result.fix and "libamd_smi.so" in result.fix, result
