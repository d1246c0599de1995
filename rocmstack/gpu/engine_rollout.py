"""What the rollouts on an image's engine (vLLM, SGLang) share: the constructor's device work, the temporary
config-only model folder the engine starts from, and the sleep/wake state machine.

``gpu/vllm_rollout.py`` and ``gpu/sglang_rollout.py`` keep only what differs: the engine's start, its
generate and weight-load calls, and its own calls to free and restore device memory.
"""

from __future__ import annotations

import tempfile
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import torch

from rocmstack.gpu.driver_memory import DeviceMemory, process_device_memory
from rocmstack.gpu.model_dir import write_model_dir


class EngineRollout(ABC):
    """The part of ``gpu.rollout.Rollout`` that vLLM and SGLang share. A subclass imports its engine first
    (a missing one fails before any device work), calls this constructor, then starts it on ``model_dir``.

    Sleep/wake: ``sleep`` frees the device between rollout and training; a weight load wakes the weights
    (``wake_weights``: the load writes into them), loads, then wakes the rest (``wake_rest``: KV cache).
    Without ``sleep_mode`` all three do nothing.
    """

    name: ClassVar[str]
    cpu_refusal: ClassVar[str | None] = None  # the error on a CPU device, for an engine without a CPU build

    def __init__(self, config: Mapping[str, Any], *, device: str | torch.device, sleep_mode: bool) -> None:
        self.device = torch.device(device)
        if self.device.type != "cuda" and self.cpu_refusal is not None:
            raise RuntimeError(self.cpu_refusal)
        self.hip = bool(torch.version.hip)
        self.sleep_mode = sleep_mode
        self.asleep = False
        if self.device.type == "cuda":
            torch.empty(1, device=self.device)  # the context first: the driver lists a process only then
        # Before the engine starts: its share is what this process (and its children) hold beyond this.
        self.baseline = process_device_memory(self.device.type, hip=self.hip)
        self._tmp = tempfile.TemporaryDirectory(prefix=f"rocmstack-{self.name}-")
        self.model_dir = write_model_dir(config, Path(self._tmp.name) / "model")

    @abstractmethod
    def _release(self) -> None:
        """Free the engine's device memory, the weights kept in host memory."""

    @abstractmethod
    def _resume_weights(self) -> None:
        """Bring the weights back onto the device."""

    @abstractmethod
    def _resume_rest(self) -> None:
        """Bring the rest (the KV cache) back onto the device."""

    @abstractmethod
    def _stop(self) -> None:
        """Stop the engine (the model folder is removed after, whatever this raises)."""

    def _pids(self) -> list[int] | None:
        """The processes whose device memory is the engine's; None: this process only."""
        return None

    def sleep(self) -> None:
        if self.sleep_mode and not self.asleep:
            self._release()
            self.asleep = True

    def wake_weights(self) -> None:
        if self.asleep:
            self._resume_weights()

    def wake_rest(self) -> None:
        if self.asleep:
            self._resume_rest()
            self.asleep = False

    def memory(self) -> DeviceMemory:
        return process_device_memory(self.device.type, hip=self.hip, pids=self._pids())

    def shutdown(self) -> None:
        try:
            self._stop()
        finally:
            self._tmp.cleanup()
