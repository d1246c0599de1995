"""Fault-injection suite: one failure mode at a time on a fake AMD node, checked end to end.

The node (tests/fixtures/doctor/doctor_fakes.FakeNode) is a sysfs tree, /dev nodes, vendor tools on PATH
that replay real outputs, and stub amdsmi/torch modules; Ray is the real Ray 2.60 running its AMD detector
against the stub amdsmi. For each fault the named checks must fail (or error) and no other check may."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import STUBS, TOOLS, FakeNode

from rocmstack.doctor import run_doctor

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
HOST_BOUND = {"nofile-limit"}  # reads this machine's real rlimit: tested on its own below


def failing(report: dict) -> set[str]:
    return {
        c["id"] for c in report["checks"] if c["status"] in ("fail", "error") and c["id"] not in HOST_BOUND
    }


def status(report: dict, check_id: str) -> str:
    return next(c["status"] for c in report["checks"] if c["id"] == check_id)


def check(report: dict, check_id: str) -> dict:
    return next(c for c in report["checks"] if c["id"] == check_id)


@pytest.fixture
def node(tmp_path: Path) -> FakeNode:
    return FakeNode(tmp_path)


def test_healthy_fake_node_passes_every_check(node):
    report = run_doctor(node.options(expect_gpus=1))
    assert failing(report) == set()
    counts = {s["name"]: s["count"] for s in report["sources"]}
    assert counts == {
        "kfd": 1,
        "dri": 1,
        "amdsmi": 1,
        "amd-smi": 1,
        "rocm-smi": 1,
        "rocminfo": 1,
        "torch": 1,
        "ray": 1,
    }
    assert status(report, "gpu-count") == "pass"
    assert status(report, "ray-gpus") == "pass"
    assert "AMDGPUAcceleratorManager" in " ".join(check(report, "ray-gpus")["details"])


def test_amdsmi_missing_means_ray_sees_zero(node):
    node.drop_stub("amdsmi_ok")
    report = run_doctor(node.options())
    assert failing(report) == {"amdsmi-import", "ray-gpus"}
    assert "Ray would register 0 GPUs" in check(report, "ray-gpus")["summary"]
    assert "amdsmi" in check(report, "ray-gpus")["fix"]


def test_amdsmi_keyerror_is_named(node):
    node.drop_stub("amdsmi_ok")
    node.use_stub("amdsmi_keyerror")
    report = run_doctor(node.options())
    assert failing(report) == {"amdsmi-import", "ray-gpus"}
    assert "KeyError" in check(report, "amdsmi-import")["summary"]
    # Ray 2.60 guards `import amdsmi` with `except ImportError`: the KeyError escapes its detector.
    assert "KeyError" in check(report, "ray-gpus")["summary"]


def test_duplicate_libamd_smi_under_rtld_global(node):
    sdk = node.site / "rocm_sdk"
    sdk.mkdir()
    (sdk / "__init__.py").write_text(  # the signature TheRock's rocm_sdk ships (default RTLD_GLOBAL)
        "def initialize_process(*, preload_shortnames=None, rtld_global: bool = True, **kwargs):\n    pass\n"
    )
    (node.site / "_rocm_sdk_core/lib").mkdir(parents=True)
    (node.site / "_rocm_sdk_core/__init__.py").write_text("")
    (node.site / "_rocm_sdk_core/lib/libamd_smi.so.26").write_bytes(b"\x7fELF sdk copy")
    amdsmi_dir = node.site / "amdsmi"
    amdsmi_dir.mkdir()
    (amdsmi_dir / "libamd_smi.so").write_bytes(b"\x7fELF pip copy")
    (amdsmi_dir / "__init__.py").write_text((STUBS / "amdsmi_ok/amdsmi/__init__.py").read_text())
    node.drop_stub("amdsmi_ok")
    node.env.update({"STUB_AMDSMI_COUNT": "0", "STUB_TORCH_COUNT": "0"})  # the symptom: both see none
    report = run_doctor(node.options())
    # The cause and its whole cascade fail; nothing unrelated does.
    assert failing(report) == {"amdsmi-duplicate", "gpu-count", "amdsmi-import", "ray-gpus"}
    assert "RTLD_GLOBAL" in check(report, "amdsmi-duplicate")["summary"]
    assert "rtld-local" in check(report, "amdsmi-duplicate")["fix"]


def test_rocr_without_hip(node):
    node.env["ROCR_VISIBLE_DEVICES"] = "0"
    report = run_doctor(node.options())
    assert failing(report) == {"visibility-masks", "ray-gpus"}
    assert "ROCR_VISIBLE_DEVICES" in check(report, "visibility-masks")["summary"]
    # the real Ray raises it:
    assert (
        "Please use HIP_VISIBLE_DEVICES instead of ROCR_VISIBLE_DEVICES"
        in check(report, "ray-gpus")["summary"]
    )


def test_hip_and_cuda_masks_disagree(node):
    node.env.update({"HIP_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "1"})
    report = run_doctor(node.options())
    assert failing(report) == {"visibility-masks"}
    assert "disagree" in check(report, "visibility-masks")["summary"]


def test_mask_naming_a_missing_device(node):
    node.env["HIP_VISIBLE_DEVICES"] = "1"  # one GPU: only index 0 exists
    node.env["STUB_TORCH_COUNT"] = "0"  # what HIP then gives torch
    report = run_doctor(node.options(expect_gpus=1))
    assert failing(report) == {"visibility-masks", "gpu-count"}
    assert "names device 1" in check(report, "visibility-masks")["summary"]


def test_noset_cuda_without_hip_leaves_a_stale_cuda_mask(node):
    node.env["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"] = "1"
    node.env["CUDA_VISIBLE_DEVICES"] = node.env["HIP_VISIBLE_DEVICES"] = "0"
    report = run_doctor(node.options())
    assert failing(report) == {"ray-env"}


def test_noset_hip_alone_is_healthy_on_amd(node):
    # slime's AMD run script: Ray then sets no mask on AMD (it manages HIP_VISIBLE_DEVICES alone)
    node.env["RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES"] = "1"
    report = run_doctor(node.options())
    assert failing(report) == set()


def test_override_on_zero_warns(node):
    node.env["RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO"] = "1"
    report = run_doctor(node.options())
    assert failing(report) == set()
    assert status(report, "ray-env") == "warn"


def test_missing_dev_kfd(node):
    (node.dev / "kfd").unlink()
    report = run_doctor(node.options())
    assert failing(report) == {"device-access"}
    assert "--device /dev/kfd" in check(report, "device-access")["fix"]


def test_cuda_vllm_wheel_on_rocm(node):
    node.use_stub("vllm_cuda")
    node.add_dist("vllm-0.20.2.dist-info")
    report = run_doctor(node.options())
    expected = {"vllm-flavour"} | ({"vllm-python"} if sys.version_info[:2] != (3, 12) else set())
    assert failing(report) == expected
    assert "libcudart" in check(report, "vllm-flavour")["summary"]


def test_rocm_vllm_wheel_passes(node):
    node.use_stub("vllm_rocm")
    node.add_dist("vllm-0.20.2+rocm702.dist-info")
    report = run_doctor(node.options())
    assert status(report, "vllm-flavour") == "pass"
    assert failing(report) <= {"vllm-python"}  # only when CI's Python is not 3.12


def test_cuda_packages_in_rocm_env(node):
    node.add_dist("nvidia_cublas_cu12-12.4.5.8.dist-info")
    node.add_dist("nvidia_nccl_cu12-2.21.5.dist-info")
    report = run_doctor(node.options())
    assert failing(report) == {"nvidia-packages"}
    assert "nvidia-cublas-cu12==12.4.5.8" in check(report, "nvidia-packages")["details"]


def test_torch_built_for_another_arch(node):
    node.env["STUB_TORCH_ARCHS"] = "gfx90a gfx1100"
    report = run_doctor(node.options())
    assert failing(report) == {"torch-arch"}
    assert "gfx942" in check(report, "torch-arch")["summary"]


def test_expandable_segments_with_tp(node):
    node.env["PYTORCH_HIP_ALLOC_CONF"] = "expandable_segments:True"
    report = run_doctor(node.options(tensor_parallel=2))
    assert failing(report) == {"alloc-allreduce"}
    node.env["PYTORCH_CUDA_ALLOC_CONF"] = "max_split_size_mb:512"  # takes precedence over the HIP one
    assert (
        status(run_doctor(node.options(tensor_parallel=2, only=("alloc-allreduce",))), "alloc-allreduce")
        == "pass"
    )


def test_sglang_aiter_backend_without_aiter(node):
    node.env.update({"SGLANG_USE_AITER": "0", "SGLANG_ATTENTION_BACKEND": "aiter"})
    report = run_doctor(node.options())
    assert failing(report) == {"sglang-env"}


def test_vllm_too_old_for_sleep_mode(node):
    node.use_stub("vllm_rocm")
    node.add_dist("vllm-0.10.1+rocm700.dist-info")
    report = run_doctor(node.options())
    assert failing(report) - {"vllm-python"} == {"version-floors"}
    assert "sleep mode" in check(report, "version-floors")["summary"]


def test_cpx_partition_explains_the_count(tmp_path):
    node = FakeNode(tmp_path, gpus=8)  # one MI300X in CPX: 8 KFD nodes, 8 render nodes
    card = node.sys / "class/drm/card0/device"
    card.mkdir(parents=True)
    (card / "current_compute_partition").write_text("CPX\n")
    for tool in ("rocm-smi", "amd-smi", "rocminfo"):
        (node.bin / tool).unlink()  # the recorded outputs are of unpartitioned GPUs
    node.env["PATH"] = str(node.bin)  # and keep Debian's real rocm-smi (no driver here) out of this node
    report = run_doctor(node.options(expect_gpus=1))
    assert failing(report) == {"gpu-partition"}
    assert status(report, "gpu-count") == "warn"
    assert "8" in check(report, "gpu-partition")["fix"]


def write_lock(root: Path, *, ray_version: str, patches: list[str]) -> None:
    lock = {
        "schema": 1,
        "recipe": "verl-0.9.0-rocm10",
        "render_hash": "0" * 64,
        "gpu_archs": ["gfx942"],
        "base": {"image": "rocm/primus:v26.7", "rocm": "7.14", "python": "3", "torch": "2.9.1"},
        "components": {
            "ray": {"source": "pypi", "package": "ray", "version": ray_version, "url": None, "ref": None},
            "verl": {
                "source": "git",
                "package": None,
                "version": None,
                "url": "https://github.com/AMD-Ecosystem/verl",
                "ref": "release/0.9.0.amd0",
            },
        },
        "patches": patches,
        "env": {},
        "rocmstack": {"version": "0.1.0", "revision": "test"},
    }
    (root / "lock.json").write_text(json.dumps(lock))


def mark(root: Path, patch_id: str) -> None:
    (root / "patches/applied").mkdir(parents=True, exist_ok=True)
    (root / "patches/applied" / f"{patch_id}.json").write_text(
        json.dumps({"id": patch_id, "component": "x", "target": "y"})
    )


def test_image_lock_drift_and_missing_patch(node):
    from importlib.metadata import version

    write_lock(node.image, ray_version="2.58.0", patches=["rtld-local", "amdsmi-install"])
    mark(node.image, "rtld-local")
    node.add_dist("torch-2.9.1+rocm7.0.2.dist-info")  # the base torch of the lock, as the image has it
    report = run_doctor(node.options(only=("lock-drift", "patches-applied")))
    assert failing(report) == {"lock-drift", "patches-applied"}
    assert f"ray {version('ray')} installed, lock says 2.58.0" in check(report, "lock-drift")["summary"]
    assert "amdsmi-install" in check(report, "patches-applied")["summary"]


def test_image_matching_its_lock_passes(node):
    from importlib.metadata import version

    write_lock(node.image, ray_version=version("ray"), patches=["rtld-local"])
    mark(node.image, "rtld-local")
    node.add_dist("torch-2.9.1+rocm7.0.2.dist-info")
    report = run_doctor(node.options(only=("lock-drift", "patches-applied")))
    assert {c["id"]: c["status"] for c in report["checks"]} == {
        "lock-drift": "pass",
        "patches-applied": "pass",
    }


def test_gfx942_only_jit_cache_on_a_gfx950_node(tmp_path):
    """A Triton cache really compiled for gfx942 (MI300X) in the home of an MI355X (gfx950) node."""
    pytest.importorskip("triton")
    from rocmstack.gpu import kernels
    from rocmstack.gpu.shapes import BUILTIN_SHAPES, shape_from_config

    node = FakeNode(tmp_path, gfx_target_version_line="gfx_target_version 90500\n")
    node.env["STUB_TORCH_ARCHS"] = "gfx942 gfx950"
    cache = node.home / ".triton/cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_CACHE_DIR", str(cache))
        mp.setenv("TRITON_DEFAULT_FP_FUSION", "1")
        shape = shape_from_config(BUILTIN_SHAPES["qwen3-0.6b"])
        launch = next(x for x in kernels.decode_launches(shape, 1, "bf16", 256) if x.name == "silu_mul")
        kernels.compile_launch(launch, "hip", "gfx942", 64)
    report = run_doctor(node.options())
    assert failing(report) == {"jit-cache-arch"}
    summary = check(report, "jit-cache-arch")["summary"]
    assert "gfx942 only" in summary and "gfx950" in summary and str(cache) in summary


def test_hanging_tool_is_killed_not_waited_on(node):
    started = node.root / "started"
    node.env.update({"FAKE_ROCM_SMI_SLEEP": "120", "FAKE_ROCM_SMI_STARTED": str(started)})
    t0 = time.monotonic()
    report = run_doctor(node.options(tool_timeout=1.5))
    assert time.monotonic() - t0 < 30
    rocm_smi = next(s for s in report["sources"] if s["name"] == "rocm-smi")
    assert rocm_smi["count"] is None and "killed" in rocm_smi["detail"]
    assert failing(report) == set()  # the other sources still agree
    pid = int(started.read_text())
    with pytest.raises(ProcessLookupError):  # the whole process group is gone
        import os

        os.kill(pid, 0)


def test_crashing_probe_becomes_an_error_check(node):
    node.env["STUB_TORCH_ABORT"] = "1"
    report = run_doctor(node.options())
    assert {c["id"] for c in report["checks"] if c["status"] == "error"} == {"torch-arch"}
    assert "crashed (signal 6)" in check(report, "torch-arch")["summary"]
    assert failing(report) == {"torch-arch"}


def test_secrets_never_reach_any_output(node, tmp_path):
    secrets = {
        "HF_TOKEN": "hf_TESTxSECRETxVALUE123",
        "WANDB_API_KEY": "wandb0123456789abcdef",
        "MY_DB_PASSWORD": "hunter2hunter2",
    }
    node.env.update(secrets)
    node.env.update(
        {
            "FAKE_ECHO_ENV": "HF_TOKEN",
            "FAKE_ROCM_SMI_RC": "3",
            "FAKE_ROCM_SMI_STDOUT": str(TOOLS / "rocm-smi-no-json-data.txt"),
        }
    )
    junit = tmp_path / "junit.xml"
    env = node.environ()
    outputs = []
    for fmt in ("--json", "--markdown", None):
        argv = [
            sys.executable,
            "-m",
            "rocmstack",
            "doctor",
            "--sysfs-root",
            str(node.sys),
            "--dev-root",
            str(node.dev),
            "--proc-root",
            str(node.proc),
            "--junit",
            str(junit),
        ] + ([fmt] if fmt else [])
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
        outputs += [proc.stdout, proc.stderr, junit.read_text()]
    report = json.loads(outputs[0])
    assert "<redacted>" in json.dumps(report)  # the leaked value was found and masked
    assert report["environment"]["HF_TOKEN"] == "<redacted>"
    for text in outputs:
        for value in secrets.values():
            assert value not in text


def test_low_open_file_limit_fails(node):
    env = node.environ()
    code = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024)); "
        "from rocmstack.cli import main; "
        "sys.argv[1:] = ['doctor', '--only', 'nofile-limit', '--json']; main()"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["checks"][0]["status"] == "fail"
    assert "--ulimit nofile=1048576:1048576" in report["checks"][0]["fix"]
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[1] >= 1024  # this process untouched
