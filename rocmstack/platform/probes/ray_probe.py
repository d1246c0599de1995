"""Probe: the GPU count Ray would register for this node, computed by Ray's own code."""

import sys
import time
from typing import Any

from _emit import emit, error_text

t0 = time.monotonic()
out: dict[str, Any] = {}
try:
    import ray
    from ray._private import accelerators
except BaseException as exc:
    out["import_error"] = error_text(exc)
    emit(out)
    sys.exit(0)
out["version"] = ray.__version__
try:
    manager = accelerators.get_accelerator_manager_for_resource("GPU")
    out["manager"] = manager.__name__ if manager else None
except BaseException as exc:  # Ray 2.60 lets a KeyError from `import amdsmi` escape here
    manager = None
    out["manager_error"] = error_text(exc)
if manager is not None:
    try:
        out["detected"] = int(manager.get_current_node_num_accelerators())
    except BaseException as exc:
        out["detected_error"] = error_text(exc)
    try:
        visible = manager.get_current_process_visible_accelerator_ids()
        out["visible_ids"] = visible
    except BaseException as exc:  # ROCR_VISIBLE_DEVICES without HIP_VISIBLE_DEVICES: RuntimeError
        out["visible_error"] = error_text(exc)
    try:
        out["accelerator_type"] = manager.get_current_node_accelerator_type()
    except BaseException as exc:
        out["accelerator_type_error"] = error_text(exc)
# The node's GPU resource exactly as `ray start` resolves it (min of detected and visible ids).
try:
    from ray._private.resource_and_label_spec import ResourceAndLabelSpec

    resolved_manager, resolved = ResourceAndLabelSpec._get_current_node_accelerator(None, {})
    gpu = resolved_manager is not None and resolved_manager.get_resource_name() == "GPU"
    out["resolved_gpus"] = int(resolved) if gpu else 0
except BaseException as exc:
    out["resolved_error"] = error_text(exc)
try:
    from ray._private.accelerators import AMDGPUAcceleratorManager

    out["amd_detected"] = int(AMDGPUAcceleratorManager.get_current_node_num_accelerators())
except BaseException as exc:
    out["amd_error"] = error_text(exc)
out["seconds"] = round(time.monotonic() - t0, 3)
emit(out)
