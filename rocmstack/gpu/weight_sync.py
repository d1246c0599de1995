"""Weight sync: the trainer's HF-named state dict packed into one flat bucket and shipped two ways.

- colocated: the bucket crosses processes as a CUDA/HIP IPC handle (on CPU: a shared-memory file), made by
  torch.multiprocessing's reductions (``ForkingPickler``), the way verl and vime hand weights to a
  colocated vLLM. The receiver copies out of the shared bucket into its own weights, then lets go.
- split: the bucket is broadcast over a two-rank process group (NCCL/RCCL on GPUs, gloo on CPU).

The names are the HF checkpoint's (``model.layers.0.self_attn.q_proj.weight``...), so a vLLM/SGLang
rollout backend could take the same stream.
"""

from __future__ import annotations

import io
import pickle
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where used: a driver that only removes files or picks a port needs none
    import torch


CHUNK = 1 << 20


def pattern(nbytes: int, device: torch.device) -> torch.Tensor:
    """A uint8 bucket of ``nbytes`` (rounded up to whole MiB) whose every MiB block differs, so a dropped,
    zeroed or reordered block changes the checksum."""
    import torch

    blocks = max(1, -(-nbytes // CHUNK))
    base = (torch.arange(CHUNK, dtype=torch.int32, device=device) % 251).to(torch.uint8)
    out = base.repeat(blocks).view(blocks, CHUNK)
    out.add_((torch.arange(blocks, device=device) % 256).to(torch.uint8).unsqueeze(1))
    return out.view(-1)


def checksum(t: torch.Tensor) -> int:
    import torch

    blocks = t.view(-1, CHUNK)
    weights = torch.arange(1, blocks.shape[0] + 1, device=t.device, dtype=torch.int64)
    return int(t.sum(dtype=torch.int64).item()) * 1_000_003 + int(
        (blocks[:, 7].to(torch.int64) * weights).sum().item()
    )


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    offset: int
    numel: int


def pack_state_dict(
    state_dict: dict[str, torch.Tensor], dtype: torch.dtype
) -> tuple[torch.Tensor, list[TensorSpec]]:
    """Copy every tensor, cast to ``dtype``, into one contiguous flat buffer; return it and its layout."""
    import torch

    specs, offset = [], 0
    for name, tensor in state_dict.items():
        specs.append(TensorSpec(name, tuple(tensor.shape), offset, tensor.numel()))
        offset += tensor.numel()
    first = next(iter(state_dict.values()))
    flat = torch.empty(offset, dtype=dtype, device=first.device)
    for spec, tensor in zip(specs, state_dict.values(), strict=True):
        flat[spec.offset : spec.offset + spec.numel].copy_(tensor.detach().reshape(-1))
    return flat, specs


def unpack_state_dict(flat: torch.Tensor, specs: list[TensorSpec]) -> dict[str, torch.Tensor]:
    """Views into ``flat``, named and shaped as packed (no copy)."""
    return {s.name: flat[s.offset : s.offset + s.numel].view(s.shape) for s in specs}


def share_tensor(tensor: torch.Tensor) -> bytes:
    """Serialise ``tensor`` as a cross-process handle (CUDA/HIP IPC or CPU shared memory), not its bytes."""
    from multiprocessing.reduction import ForkingPickler

    import torch.multiprocessing  # noqa: F401  (registers torch's reducers on ForkingPickler)

    buf = io.BytesIO()
    ForkingPickler(buf, pickle.HIGHEST_PROTOCOL).dump(tensor)
    return buf.getvalue()


def open_shared_tensor(handle: bytes) -> torch.Tensor:
    """Map a tensor shared by ``share_tensor`` in another process (same device)."""
    import torch.multiprocessing  # noqa: F401  (registers the rebuild functions)

    return pickle.loads(handle)


# rebuild_cuda_tensor's argument that names the device (torch/multiprocessing/reductions.py)
STORAGE_DEVICE_ARG = 6


def share_tensor_remappable(tensor: torch.Tensor) -> bytes:
    """Like ``share_tensor``, but as torch's rebuild function and its arguments, so the receiver can open
    the handle at its own index of the exporter's GPU: a handle carries the exporter's device index, which
    names another GPU, or none, in a process with a different mask. verl and SGLang replace that argument
    the same way, by device UUID."""
    from torch.multiprocessing.reductions import reduce_tensor

    return pickle.dumps(reduce_tensor(tensor), pickle.HIGHEST_PROTOCOL)


def open_remappable(handle: bytes, index: int | None = None) -> torch.Tensor:
    """Open a ``share_tensor_remappable`` handle; ``index``: this process's index of the exporter's GPU
    (None: the exporter's own index, as torch's plain rebuild does)."""
    func, args = pickle.loads(handle)
    if index is not None and func.__name__ == "rebuild_cuda_tensor":
        args = (*args[:STORAGE_DEVICE_ARG], index, *args[STORAGE_DEVICE_ARG + 1 :])
    return func(*args)


def use_file_system_sharing() -> None:
    """CPU tensors must be shared by file name: the default fd passing needs a multiprocessing pipe, not Ray."""
    import torch.multiprocessing as mp

    mp.set_sharing_strategy("file_system")


def shared_file(tensor: torch.Tensor) -> str | None:
    """The /dev/shm file behind a CPU tensor shared by file name, else None. torch unlinks it when the last
    holder lets go, but a holder killed first (Ray kills an actor and its torch_shm_manager) leaves it, in
    RAM, until reboot: whoever kills the holders removes it."""
    if tensor.device.type != "cpu" or not tensor.is_shared():
        return None
    _, name, _ = tensor.untyped_storage()._share_filename_cpu_()  # the name it is already shared under
    return "/dev/shm/" + bytes(name).decode().lstrip("/")


def remove_shared_file(path: str) -> None:
    """Remove a file named by ``shared_file``; mappings still open keep their pages until unmapped."""
    if Path(path).parent != Path("/dev/shm") or not Path(path).name.startswith("torch_"):
        raise ValueError(f"not a torch shared-memory file: {path}")
    Path(path).unlink(missing_ok=True)


def device_uuid(device: torch.device) -> str:
    """Which physical device a process sees: the GPU's UUID, or the host for CPU."""
    import torch

    if device.type == "cuda":
        return str(torch.cuda.get_device_properties(device).uuid)
    return f"cpu:{socket.gethostname()}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])
