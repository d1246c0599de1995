#!/usr/bin/env bash
# GPU proof of `rocmstack smoke grpo` on the lent H200: call B of ci/device/README.md (Ray's first half
# was stashed by call A). Writes everything under $OUT; exit status of each run is recorded, not fatal.
source ci/device/setup.sh
export PYTHONUNBUFFERED=1
log=$OUT/colocated.txt
{
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers, ray; print("torch", torch.__version__, "transformers", transformers.__version__, "ray", ray.__version__)'
  echo '$ python3 -m rocmstack smoke grpo --placement colocated --report $OUT/colocated'
} > "$log" 2>&1
t0=$(date +%s.%N)
python3 -m rocmstack smoke grpo --placement colocated --report "$OUT/colocated" >> "$log" 2>&1
rc=$?
t1=$(date +%s.%N)
echo "exit status: $rc; process wall time (python start to exit, Ray start and shutdown included): $(python3 -c "print(round($t1 - $t0, 1))") s" >> "$log"
{
  echo '$ python3 docs/evidence/smoke-inject.py cuda 6'
  python3 docs/evidence/smoke-inject.py cuda 6
  echo "exit status: $?"
} > "$OUT/injects.txt" 2>&1
# Fallback evidence, only if the default shape missed its verdict: the CPU-calibrated tiny shape.
if [ "$rc" != 0 ]; then
  {
    echo '$ python3 -m rocmstack smoke grpo --placement colocated --shape tiny'
    python3 -m rocmstack smoke grpo --placement colocated --shape tiny
    echo "exit status: $?"
  } > "$OUT/tiny.txt" 2>&1
fi
