"""rocmstack's vLLM figures beside `vllm bench latency`'s, per batch: python3 compare.py FOLDER."""

import json
import sys
from pathlib import Path

w = Path(sys.argv[1])
report = json.loads((w / "rollout.json").read_text())
rows = {(r["engine"], r["batch"]): r for r in report["results"]}
print("| batch | reference decode tok/s | vllm decode tok/s | vllm ms/step | rocmstack full batch (s) "
      "| `vllm bench latency` avg (s) | difference |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for b in sorted({r["batch"] for r in report["results"]}):
    ref, v = rows.get(("reference", b), {}), rows.get(("vllm", b), {})
    ours = v.get("batch_latency_mean_s")
    lat = w / f"latency-{b}.json"
    theirs = json.loads(lat.read_text())["avg_latency"] if lat.is_file() else None
    diff = f"{(ours - theirs) / theirs:+.1%}" if ours and theirs else "n/a"
    print(f"| {b} | {ref.get('tokens_per_s', 0):,.0f} | {v.get('tokens_per_s', 0):,.0f} | "
          f"{(v.get('median_step_ms') or 0):.2f} | {ours or 0:.3f} | {theirs or 0:.3f} | {diff} |")
