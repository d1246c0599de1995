"""What a set of processes holds on the device, as the driver counts it: the paths that exist on a node
without a GPU driver. The NVML path runs on a GPU (docs/evidence/engine-sglang-h200-2026-12-01: SGLang's
scheduler process counted with its parent)."""

from __future__ import annotations

import os

from rocmstack.gpu.driver_memory import process_device_memory


def test_cpu_has_no_device_memory_to_count():
    mem = process_device_memory("cpu", pids=[os.getpid()])
    assert mem.nbytes is None and "CPU" in mem.source


def test_without_a_driver_the_reason_is_given_not_a_zero():
    for hip in (False, True):
        mem = process_device_memory("cuda", hip=hip, pids=[os.getpid(), 1])
        assert mem.nbytes is None
        assert mem.source.startswith(
            ("NVML unavailable", "amdsmi unavailable", "NVML lists none", "amdsmi lists none")
        )
