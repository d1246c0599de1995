from __future__ import annotations

import gc
import multiprocessing as mp
from pathlib import Path

import pytest
import torch

from rocmstack.gpu.weight_sync import (
    device_uuid,
    open_shared_tensor,
    pack_state_dict,
    remove_shared_file,
    share_tensor,
    shared_file,
    unpack_state_dict,
    use_file_system_sharing,
)
from rocmstack.smoke import task
from rocmstack.smoke.config import model_config


def _hf_state_dict():
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = model_config("tiny", vocab_size=task.VOCAB_SIZE, max_positions=64)
    return AutoModelForCausalLM.from_config(AutoConfig.for_model(**cfg)).state_dict()


def test_pack_unpack_round_trip_keeps_hf_names_shapes_and_values():
    sd = _hf_state_dict()
    flat, specs = pack_state_dict(sd, torch.float32)
    assert flat.numel() == sum(t.numel() for t in sd.values())
    back = unpack_state_dict(flat, specs)
    assert list(back) == list(sd)
    assert "model.layers.0.self_attn.q_proj.weight" in back and "lm_head.weight" in back
    for name, tensor in sd.items():
        assert torch.equal(back[name], tensor), name


def test_pack_casts_and_copies():
    sd = {"a": torch.ones(2, 3), "b": torch.full((4,), 2.0)}
    flat, _ = pack_state_dict(sd, torch.bfloat16)
    assert flat.dtype == torch.bfloat16
    sd["a"].add_(1.0)  # the bucket is a snapshot, not a view of the live weights
    assert float(flat[0]) == 1.0


def _child(handle: bytes, queue) -> None:
    use_file_system_sharing()
    tensor = open_shared_tensor(handle)
    queue.put(float(tensor.sum()))
    tensor.mul_(2.0)  # writes land in the sender's memory: it is shared, not copied


@pytest.mark.timeout(120)
def test_shared_handle_maps_the_same_memory_in_another_process():
    use_file_system_sharing()
    tensor = torch.arange(1 << 20, dtype=torch.float32)  # 4 MiB
    handle = share_tensor(tensor)
    assert len(handle) < 4096  # a handle, not the data
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(handle, queue))
    proc.start()
    assert queue.get(timeout=90) == float(torch.arange(1 << 20, dtype=torch.float64).sum())
    proc.join(timeout=30)
    assert proc.exitcode == 0
    torch.testing.assert_close(tensor, torch.arange(1 << 20, dtype=torch.float32) * 2)


def test_a_shared_file_outlives_its_holder_until_removed():
    """A CPU tensor shared by name but never opened stays in /dev/shm (RAM) after its holder lets go: the
    file a killed probe leaves behind. Its path is known while shared, and removing it frees it."""
    use_file_system_sharing()
    tensor = torch.ones(1 << 16)
    assert shared_file(tensor) is None  # not shared yet
    share_tensor(tensor)
    path = shared_file(tensor)
    assert path is not None and path.startswith("/dev/shm/torch_") and Path(path).stat().st_size >= 1 << 18
    del tensor
    gc.collect()
    assert Path(path).exists()
    remove_shared_file(path)
    assert not Path(path).exists()
    remove_shared_file(path)  # already gone: nothing to do


def test_remove_shared_file_touches_only_torch_files(tmp_path):
    other = tmp_path / "torch_1_2_3"
    other.write_text("x")
    for path in (str(other), "/dev/shm/libpod_lock"):
        with pytest.raises(ValueError, match="not a torch shared-memory file"):
            remove_shared_file(path)
    assert other.exists()


def test_device_uuid_cpu_names_the_host():
    assert device_uuid(torch.device("cpu")).startswith("cpu:")
