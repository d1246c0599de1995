"""Stopping the Ray actors that held GPU buffers, so that what they shared goes with them.

``ray.kill`` ends a process at once: nothing it shared is let go. On a GPU, torch's IPC ref-count file of
every exporting process stays in /dev/shm; on CPU, a tensor shared by file name stays there whole (its
torch_shm_manager is killed with it). /dev/shm is RAM, and a node runs the doctor or the smoke many times.
So actors are asked to exit first (Ray's ``exit_actor``, which runs the process's exit handlers), and only
those still there after a grace period, busy in a call that never returns, are killed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

STOP_GRACE_S = 5.0


def stop_actors(actors: Sequence[Any], grace_s: float = STOP_GRACE_S) -> None:
    """Ask every actor to exit; kill what has not exited after ``grace_s`` seconds (an actor already gone
    is fine)."""
    import ray

    if not actors:
        return
    refs = [actor.__ray_terminate__.remote() for actor in actors]  # as Ray Train's worker group stops
    ray.wait(refs, num_returns=len(refs), timeout=grace_s)
    for actor in actors:
        ray.kill(actor)
