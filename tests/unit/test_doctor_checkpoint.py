"""Checkpoint preflight on real safetensors files written here with the safetensors package (torch tensors in
each FP8 format), with config.json / hf_quant_config.json as the quantisers write them."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from safetensors.torch import save_file  # noqa: E402  (after the importorskip)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "doctor"))
from doctor_fakes import make_snapshot  # noqa: E402

from rocmstack.doctor.checks.checkpoint import (  # noqa: E402
    fp8_format,
    kv_cache_dtype,
    quant_method,
    read_header,
    shards,
)
from rocmstack.doctor.model import DoctorOptions  # noqa: E402
from rocmstack.status import Status  # noqa: E402
from tests.conftest import run_cli  # noqa: E402

MI300X, MI355X = 90402, 90500
QWEN3 = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 64,
    "num_hidden_layers": 1,
}
# compressed-tensors' FP8 config as llm-compressor writes it (FP8_DYNAMIC scheme, static FP8 KV cache)
FP8_CT = {
    "quant_method": "compressed-tensors",
    "format": "float-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True},
            "format": "float-quantized",
        }
    },
    "kv_cache_scheme": {
        "num_bits": 8,
        "type": "float",
        "strategy": "tensor",
        "dynamic": False,
        "symmetric": True,
    },
}


def fp8_model(folder: Path, dtype, *, kv_scales: bool = True, quant: dict | None = FP8_CT) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    w = torch.randn(64, 64).clamp(-200, 200).to(dtype)
    tensors = {
        "model.layers.0.self_attn.q_proj.weight": w,
        "model.layers.0.self_attn.q_proj.weight_scale": torch.ones(64, 1),
        "model.embed_tokens.weight": torch.randn(32, 64).to(torch.bfloat16),
    }
    if kv_scales:
        tensors["model.layers.0.self_attn.k_scale"] = torch.tensor(0.02)
        tensors["model.layers.0.self_attn.v_scale"] = torch.tensor(0.02)
    save_file(tensors, str(folder / "model.safetensors"))
    config = dict(QWEN3)
    if quant is not None:
        config["quantization_config"] = quant
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def opts(folder: Path, archs: tuple[str, ...] = (), kv: str | None = None) -> DoctorOptions:
    return DoctorOptions(model_dir=folder, gpu_archs=archs, kv_cache_dtype=kv)


def test_e4m3fn_tensors_are_flagged_on_gfx942_and_pass_on_gfx950(tmp_path):
    folder = fp8_model(tmp_path / "m", torch.float8_e4m3fn)
    assert read_header(folder / "model.safetensors").tensors["model.layers.0.self_attn.q_proj.weight"][
        "dtype"
    ] == ("F8_E4M3")
    result = fp8_format(make_snapshot(kfd_archs=(MI300X,)), opts(folder))  # the node's own arch
    assert result.status == Status.WARN and "must convert them at load" in result.summary
    assert "float8_e4m3fn (max 448)" in result.summary and "gfx942 computes in float8_e4m3fnuz (max 240)" in (
        result.summary
    )
    assert fp8_format(make_snapshot(), opts(folder, ("gfx950",))).status == Status.PASS


def test_e4m3fnuz_tensors_fail_on_gfx950(tmp_path):
    folder = fp8_model(tmp_path / "m", torch.float8_e4m3fnuz)
    assert fp8_format(make_snapshot(kfd_archs=(MI355X,)), opts(folder)).status == Status.FAIL
    assert fp8_format(make_snapshot(), opts(folder, ("gfx942",))).status == Status.PASS


def test_bf16_checkpoint_and_no_arch(tmp_path):
    folder = tmp_path / "bf16"
    folder.mkdir()
    save_file({"w": torch.zeros(4, 4, dtype=torch.bfloat16)}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(QWEN3))
    assert fp8_format(make_snapshot(), opts(folder, ("gfx942",))).status == Status.PASS
    assert quant_method(make_snapshot(), opts(folder, ("gfx942",))).status == Status.PASS
    assert fp8_format(make_snapshot(), opts(folder)).status == Status.SKIP  # no AMD GPU here, no --gpu-arch
    assert fp8_format(make_snapshot(), DoctorOptions()).status == Status.SKIP


def test_nvfp4_fails_on_every_instinct_arch(tmp_path):
    # ModelOpt's NVFP4 export: packed uint8 weights, FP8 block scales, hf_quant_config.json
    folder = tmp_path / "nvfp4"
    folder.mkdir()
    save_file(
        {
            "model.layers.0.mlp.down_proj.weight": torch.zeros(64, 32, dtype=torch.uint8),
            "model.layers.0.mlp.down_proj.weight_scale": torch.ones(64, 4).to(torch.float8_e4m3fn),
            "model.layers.0.mlp.down_proj.weight_scale_2": torch.tensor(1.0),
        },
        str(folder / "model.safetensors"),
    )
    (folder / "config.json").write_text(json.dumps(QWEN3))
    (folder / "hf_quant_config.json").write_text(
        json.dumps(
            {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16}}
        )
    )
    for arch in ("gfx942", "gfx950"):
        result = quant_method(make_snapshot(), opts(folder, (arch,)))
        assert result.status == Status.FAIL and "NVFP4" in result.summary and arch in result.summary
        assert "(no Instinct GPU can)" in result.summary and "only no" not in result.summary, result.summary


def test_mxfp4_is_native_only_on_gfx950(tmp_path):
    # gpt-oss style: quant_method mxfp4, uint8 blocks with E8M0 scales stored as uint8
    folder = tmp_path / "mxfp4"
    folder.mkdir()
    save_file(
        {
            "model.layers.0.mlp.experts.gate_up_proj_blocks": torch.zeros(2, 64, 2, 16, dtype=torch.uint8),
            "model.layers.0.mlp.experts.gate_up_proj_scales": torch.zeros(2, 64, 2, dtype=torch.uint8),
        },
        str(folder / "model.safetensors"),
    )
    config = {
        **QWEN3,
        "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]},
    }
    (folder / "config.json").write_text(json.dumps(config))
    on_mi300x = quant_method(make_snapshot(), opts(folder, ("gfx942",)))
    assert on_mi300x.status == Status.WARN and "only gfx950 can" in on_mi300x.summary
    assert quant_method(make_snapshot(), opts(folder, ("gfx950",))).status == Status.PASS


def test_kv_cache_dtype_against_the_checkpoint_scales(tmp_path):
    calibrated = fp8_model(tmp_path / "kv", torch.float8_e4m3fnuz)
    snap = make_snapshot()
    assert kv_cache_dtype(snap, opts(calibrated, ("gfx942",), "fp8_e5m2")).status == Status.FAIL
    assert kv_cache_dtype(snap, opts(calibrated, ("gfx942",), "fp8")).status == Status.PASS
    assert kv_cache_dtype(snap, opts(calibrated, ("gfx942",), "auto")).status == Status.WARN
    plain = fp8_model(
        tmp_path / "nokv", torch.float8_e4m3fnuz, kv_scales=False, quant={"quant_method": "fp8"}
    )
    result = kv_cache_dtype(snap, opts(plain, ("gfx942",), "fp8"))
    assert result.status == Status.WARN and "1.0" in result.summary
    # scales found from the tensor names alone (no kv_cache_scheme in the config)
    named = fp8_model(tmp_path / "named", torch.float8_e4m3fnuz, quant={"quant_method": "fp8"})
    assert kv_cache_dtype(snap, opts(named, ("gfx942",), "fp8_e5m2")).status == Status.FAIL


def _sharded(folder: Path) -> Path:
    folder.mkdir()
    save_file({"a": torch.zeros(8), "b": torch.ones(8)}, str(folder / "model-00001-of-00002.safetensors"))
    save_file({"c": torch.zeros(8)}, str(folder / "model-00002-of-00002.safetensors"))
    weight_map = {
        "a": "model-00001-of-00002.safetensors",
        "b": "model-00001-of-00002.safetensors",
        "c": "model-00002-of-00002.safetensors",
    }
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map})
    )
    (folder / "config.json").write_text(json.dumps(QWEN3))
    return folder


def test_complete_shards_pass(tmp_path):
    result = shards(make_snapshot(), opts(_sharded(tmp_path / "ok")))
    assert result.status == Status.PASS and "2 shard(s), 3 tensor(s)" in result.summary


def test_missing_shard_fails(tmp_path):
    folder = _sharded(tmp_path / "m")
    (folder / "model-00002-of-00002.safetensors").unlink()
    result = shards(make_snapshot(), opts(folder))
    assert result.status == Status.FAIL and "model-00002-of-00002.safetensors" in result.summary


def test_index_entry_missing_from_its_shard_fails(tmp_path):
    folder = _sharded(tmp_path / "m")
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    index["weight_map"]["d"] = "model-00002-of-00002.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    result = shards(make_snapshot(), opts(folder))
    assert result.status == Status.FAIL and ": d" in result.summary


def test_truncated_shard_fails(tmp_path):
    folder = _sharded(tmp_path / "m")
    path = folder / "model-00001-of-00002.safetensors"
    path.write_bytes(path.read_bytes()[:-8])  # an interrupted download
    result = shards(make_snapshot(), opts(folder))
    assert result.status == Status.FAIL and "truncated" in result.summary


def test_cli_checkpoint(tmp_path):
    folder = fp8_model(tmp_path / "m", torch.float8_e4m3fnuz)
    result = run_cli("checkpoint", str(folder), "--gpu-arch", "gfx950", "--json")
    assert result.code == 1, result.err
    report = json.loads(result.out)
    by_id = {c["id"]: c["status"] for c in report["checks"]}
    assert by_id == {
        "checkpoint-shards": "pass",
        "checkpoint-fp8": "fail",
        "checkpoint-quant": "pass",
        "checkpoint-kv-cache": "pass",
    }
    assert run_cli("checkpoint", str(folder), "--gpu-arch", "gfx942").code == 0
    doctor = run_cli(
        "doctor", "--fast", "--model", str(folder), "--gpu-arch", "gfx950", "--only", "checkpoint-fp8"
    )
    assert doctor.code == 1 and "float8_e4m3fn" in doctor.out
    ocp = fp8_model(tmp_path / "ocp", torch.float8_e4m3fn)
    warned = run_cli("checkpoint", str(ocp), "--gpu-arch", "gfx942")
    assert warned.code == 0 and "convert" in warned.out


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("checkpoint", "/nonexistent/model"), "DIR '/nonexistent/model' is not a folder"),
        (("checkpoint", ".", "--gpu-arch", "gfx90a"), "knows gfx942, gfx950"),
        (("checkpoint", ".", "--gpu-arch", "gfx942", "--kv-cache-dtype", "int3"), "--kv-cache-dtype 'int3'"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(args, says):
    result = run_cli(*args)
    assert result.code == 2
    assert says in result.err and "Traceback" not in result.err


def _raw_shard(path: Path, header: object, data: bytes = b"") -> Path:
    body = json.dumps(header).encode()
    path.write_bytes(len(body).to_bytes(8, "little") + body + data)
    return path


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"a": {"b": {"dtype": "F32"}}}, "tensor 'a'"),  # nested where a tensor entry belongs
        ({"dtype": "F32", "shape": [1], "data_offsets": ["0", "4"]}, "data_offsets"),
        ({"dtype": "F32", "shape": [1], "data_offsets": {"1": 4}}, "data_offsets"),
        ({"dtype": "F32", "shape": [1], "data_offsets": [4, -1]}, "data_offsets"),
        ({"dtype": "F32", "shape": [1], "data_offsets": [0, 1e400]}, "data_offsets"),
        ({"dtype": "F32", "shape": [1], "data_offsets": [0, 2**70]}, "data_offsets"),
        ({"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}, "dtype"),
        ([1, 2], "tensor 'a'"),
    ],
)
def test_a_malformed_header_is_a_finding_in_all_four_checks(tmp_path, entry, says):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(QWEN3))
    header = {"a": entry, "b": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}}
    _raw_shard(folder / "model.safetensors", header, b"\0" * 8)
    result = shards(make_snapshot(), opts(folder))
    assert result.status == Status.FAIL and says in result.summary, result.summary
    for check in (fp8_format, quant_method, kv_cache_dtype):
        assert check(make_snapshot(), opts(folder, ("gfx942",), "fp8")).status in set(Status)


def test_a_header_nested_past_the_recursion_limit_is_not_json(tmp_path):
    path = tmp_path / "model.safetensors"
    body = b"[" * 200_000 + b"]" * 200_000
    path.write_bytes(len(body).to_bytes(8, "little") + body)
    assert "nested too deep" in (read_header(path).error or "")


def test_a_shard_linked_to_another_owners_file_is_not_read(tmp_path):
    # doctor runs as root: a user's link to a file that is not theirs must not print its first 8 bytes
    target = tmp_path / "secret"
    target.write_bytes(b"SECRET!!" * 4)
    if os.geteuid() == 0:
        os.chown(target, 65534, 65534)  # the link stays root's: a link to another owner's file
    else:
        target = Path("/etc/passwd")
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "model.safetensors").symlink_to(target)
    shard = read_header(folder / "model.safetensors")
    leaked = str(int.from_bytes(target.read_bytes()[:8], "little"))
    assert shard.error is not None and "another owner" in shard.error and leaked not in shard.error


def test_a_shard_linked_to_the_users_own_blob_is_read(tmp_path):
    blob = _raw_shard(
        tmp_path / "blob", {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4
    )
    (tmp_path / "model.safetensors").symlink_to(blob)  # a Hugging Face cache snapshot folder's layout
    shard = read_header(tmp_path / "model.safetensors")
    assert shard.error is None and set(shard.tensors) == {"a"}


def test_a_fifo_config_json_or_shard_does_not_hang_the_preflight(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    os.mkfifo(folder / "config.json")
    os.mkfifo(folder / "model.safetensors")
    os.mkfifo(folder / "model.safetensors.index.json")
    done: list = []
    worker = threading.Thread(target=lambda: done.append(shards(make_snapshot(), opts(folder))), daemon=True)
    worker.start()
    worker.join(10)
    if not done:
        with open(folder / "config.json", "wb"):  # a writer lets the waiting reader (a daemon thread) go
            pass
        pytest.fail("the preflight waited on a FIFO")
    result = done[0]
    assert result.status == Status.FAIL
    assert "config.json: not read: not a regular file" in result.details
    assert "model.safetensors: not read: not a regular file" in result.details


def _one_tensor_shard(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return _raw_shard(path, {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4)


def test_a_shard_linked_outside_the_model_folder_is_not_read(tmp_path):
    # the user's own file, so the owner check passes: only where it lies refuses it (as root, /etc/shadow)
    target = _one_tensor_shard(tmp_path / "elsewhere" / "secret")
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(QWEN3))
    (folder / "model.safetensors").symlink_to(target)
    shard = read_header(folder / "model.safetensors")
    assert shard.tensors == {} and shard.error is not None, shard
    assert f"a link to {target}, outside the model folder" in shard.error
    result = shards(make_snapshot(), opts(folder))
    assert (
        result.status == Status.FAIL and f"model.safetensors: not read: a link to {target}" in result.summary
    )


def test_a_hugging_face_cache_snapshot_reads_its_own_blobs_and_no_other_repos(tmp_path):
    repo = tmp_path / "hub" / "models--org--m"
    _one_tensor_shard(repo / "blobs" / "0a1b")
    (repo / "blobs" / "c2d3").write_text(json.dumps(QWEN3))
    snapshot = repo / "snapshots" / "5e6f"
    snapshot.mkdir(parents=True)
    (snapshot / "model.safetensors").symlink_to("../../blobs/0a1b")  # as huggingface_hub links them
    (snapshot / "config.json").symlink_to("../../blobs/c2d3")
    result = shards(make_snapshot(), opts(snapshot))
    assert result.status == Status.PASS and "1 shard(s), 1 tensor(s)" in result.summary, result
    other = _one_tensor_shard(tmp_path / "hub" / "models--org--other" / "blobs" / "9f8e")
    (snapshot / "other.safetensors").symlink_to(other)
    error = read_header(snapshot / "other.safetensors").error or ""
    assert f"a link to {other}, outside the model folder" in error


def test_a_fifo_shard_is_refused_without_being_opened(tmp_path, monkeypatch):
    folder = tmp_path / "m"
    folder.mkdir()
    os.mkfifo(folder / "model.safetensors")
    (folder / "linked.safetensors").symlink_to("model.safetensors")  # inside the folder, to the FIFO
    opened: list[str] = []
    real_open = os.open

    def recording_open(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", recording_open)
    for name in ("model.safetensors", "linked.safetensors"):
        assert read_header(folder / name).error == "not read: not a regular file"
    assert opened == []
