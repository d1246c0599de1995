#!/usr/bin/env bash
# A process holding most of the GPU's memory: the doctor FAILs naming it; with --allow-pid, and once it is
# freed, READY again. Run from the project root with rocmstack and its deps importable; outputs go to $OUT.
set -u
out=${OUT:-.}
log="$out/runs.txt"
date -u +%Y-%m-%dT%H:%M:%SZ > "$log"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv >> "$log"
python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)' >> "$log"
doctor() {  # $1: name of the output, then the doctor's extra arguments
  local t0=$SECONDS rc
  python3 -m rocmstack doctor --expect-gpus 1 --json "${@:2}" > "$out/$1.json" 2>> "$out/stderr.txt"
  rc=$?
  echo "$ rocmstack doctor --expect-gpus 1 --json ${*:2}   # $1: exit $rc, $((SECONDS - t0)) s" >> "$log"
}
# The holder: 100 GiB allocated with torch, then it sleeps.
python3 -c 'import time, torch
x = torch.empty(100 << 30, dtype=torch.uint8, device="cuda"); torch.cuda.synchronize()
print("holding", flush=True); time.sleep(900)' > "$out/holder.log" 2>&1 &
holder=$!
for _ in $(seq 60); do grep -q holding "$out/holder.log" && break; sleep 1; done
echo "holder pid $holder" >> "$log"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv >> "$log"
# What the nvml probe reports while it holds (the unit tests replay this output).
bash -c 'python3 rocmstack/platform/probes/nvml_probe.py; true' > "$out/nvml-probe-held.txt" 2>> "$out/stderr.txt"
doctor held
COLUMNS=200 python3 -m rocmstack doctor --expect-gpus 1 --only gpu-memory-free > "$out/held.txt" 2>> "$out/stderr.txt"
echo "$ rocmstack doctor --expect-gpus 1 --only gpu-memory-free   # held.txt: exit $?" >> "$log"
doctor held-allowed --allow-pid "$holder"
kill "$holder"; wait "$holder" 2>/dev/null
for _ in $(seq 30); do [ -z "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader)" ] && break; sleep 1; done
echo "holder killed" >> "$log"
nvidia-smi --query-gpu=memory.used --format=csv >> "$log"
doctor freed
