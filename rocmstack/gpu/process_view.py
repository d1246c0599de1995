"""What one process of a job sees: its masks, the devices its runtime counts (by UUID) and whether each
takes an allocation. The doctor asks it of Ray actors started the way RL frameworks start them, and of an
engine worker those actors spawn (``python -m rocmstack.gpu.process_view``: a fresh process inheriting the
actor's environment, as vLLM's and SGLang's workers do), since a mask set for one process is invisible
from any other.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from rocmstack.gpu.outcome import error_line

# The variables that decide what a process sees, and Ray's switches that decide who sets them.
VIEW_VARS = (
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES",
    "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES",
    "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO",
)


def env_view(env: Mapping[str, str]) -> dict[str, str]:
    return {k: env[k] for k in VIEW_VARS if k in env}


def view(use: int | None = None) -> dict[str, Any]:
    """This process: its masks, torch's device count, and per device its UUID and name; and whether a small
    allocation works on device ``use`` (None: on every device), the one the process would work on (an index
    the runtime counts but cannot open is the 'invalid device ordinal' a worker hits). One index only, so
    a process that sees the whole node does not make a context on every GPU."""
    out: dict[str, Any] = {"pid": os.getpid(), "env": env_view(os.environ)}
    try:
        import torch
    except BaseException as exc:
        out["error"] = error_line(exc)
        return out
    try:
        out["count"] = int(torch.cuda.device_count())
    except BaseException as exc:
        out["count"] = 0
        out["error"] = error_line(exc)
        return out
    devices = []
    for i in range(out["count"]):
        dev: dict[str, Any] = {"index": i}
        try:
            props = torch.cuda.get_device_properties(i)
            dev.update(uuid=str(props.uuid), name=props.name)
            if use is None or use == i:  # the others are named, not tried: no "ok" of theirs
                torch.zeros(1, device=torch.device("cuda", i)).add_(1).item()
                dev["ok"] = True
        except BaseException as exc:
            dev.update(ok=False, error=error_line(exc))
        devices.append(dev)
    out["devices"] = devices
    return out


def device_uuids() -> list[str]:
    """The UUIDs of the devices this process sees, in index order; nothing allocated."""
    import torch

    return [str(torch.cuda.get_device_properties(i).uuid) for i in range(torch.cuda.device_count())]


def child_view(
    use: int | None = None, env: Mapping[str, str] | None = None, timeout: float = 120.0
) -> dict[str, Any]:
    """``view(use)`` of a fresh interpreter started with ``env`` (default: this process's), the way an engine
    starts its workers."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "rocmstack.gpu.process_view", *([] if use is None else [str(use)])],
            capture_output=True,
            text=True,
            env=dict(env if env is not None else os.environ),
            timeout=timeout,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": error_line(exc)}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return {"error": f"the worker process failed: {tail[:400]}"}
    try:
        data: dict[str, Any] = json.loads(lines[-1])
    except ValueError:
        return {"error": f"the worker process printed no report: {lines[-1][:200]}"}
    return data


def local_index(ray_gpu_id: str, env: Mapping[str, str]) -> int | None:
    """The index this process opens Ray's GPU id at. Ray's ids are the tokens of the mask Ray itself was
    started under (or plain indices); a process Ray did not mask (``RAY_EXPERIMENTAL_NOSET_*``) sees that
    mask's devices at their positions in it."""
    mask = env.get("HIP_VISIBLE_DEVICES") or env.get("CUDA_VISIBLE_DEVICES")
    if mask:
        toks = [t.strip() for t in mask.split(",")]
        return toks.index(ray_gpu_id) if ray_gpu_id in toks else None
    return int(ray_gpu_id) if ray_gpu_id.isdigit() else None


if __name__ == "__main__":
    print(json.dumps(view(int(sys.argv[1]) if len(sys.argv) > 1 else None)))
