"""Run every injected fault of `rocmstack smoke grpo` against one Ray instance; print one JSON line each.

Usage: python3 docs/evidence/smoke-inject.py [device] [steps]. Exit 0 when every fault failed the
verdict with its expected criterion.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time

import ray

from rocmstack.smoke import SmokeOptions, run_grpo_smoke
from rocmstack.smoke.config import INJECT_EXPECTS

device = sys.argv[1] if len(sys.argv) > 1 else "auto"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 6
temp = tempfile.mkdtemp(prefix="rsi-", dir="/tmp")
ray.init(address="local", include_dashboard=False, log_to_driver=False, _temp_dir=temp)
caught = []
try:
    for inject, expected in INJECT_EXPECTS.items():
        start = time.perf_counter()
        s = run_grpo_smoke(SmokeOptions(device=device, inject=inject, steps=steps))
        caught.append(bool(s["inject_caught"]) and not s["passed"])
        row = {
            "inject": inject,
            "expected_failure": expected,
            "passed": s["passed"],
            "failed": s["failed"],
            "caught": s["inject_caught"],
            "device": s["device"],
            "dtype": s["dtype"],
            "steps": steps,
            "seconds": round(time.perf_counter() - start, 1),
            "details": {c["name"]: c["detail"] for c in s["criteria"] if not c["passed"]},
        }
        print(json.dumps(row), flush=True)
finally:
    ray.shutdown()
    shutil.rmtree(temp, ignore_errors=True)
print(f"{sum(caught)} of {len(caught)} injected faults caught")
sys.exit(0 if all(caught) else 1)
