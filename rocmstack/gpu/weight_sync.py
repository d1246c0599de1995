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

import torch


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


def use_file_system_sharing() -> None:
    """CPU tensors must be shared by file name: the default fd passing needs a multiprocessing pipe, not Ray."""
    import torch.multiprocessing as mp

    mp.set_sharing_strategy("file_system")


def device_uuid(device: torch.device) -> str:
    """Which physical device a process sees: the GPU's UUID, or the host for CPU."""
    if device.type == "cuda":
        return str(torch.cuda.get_device_properties(device).uuid)
    return f"cpu:{socket.gethostname()}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])
