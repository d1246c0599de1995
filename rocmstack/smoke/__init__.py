"""GRPO smoke job: proves an image's RL plumbing (Ray placement, weight sync, learning) works.

``run_grpo_smoke(SmokeOptions(...)) -> summary dict`` is the in-process API (``summary["passed"]``).
"""

from __future__ import annotations

from typing import Any

from rocmstack.smoke.config import SmokeOptions

__all__ = ["SmokeOptions", "run_grpo_smoke"]


def run_grpo_smoke(options: SmokeOptions, **kwargs: Any) -> dict[str, Any]:
    from rocmstack.smoke.runner import run_grpo_smoke as _run

    return _run(options, **kwargs)
