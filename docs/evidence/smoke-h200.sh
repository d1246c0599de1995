#!/usr/bin/env bash
# GPU proof of `rocmstack smoke grpo` on an H200 node. Writes everything under $OUT; the exit status of
# each run is recorded, not fatal.
# Environment: Python 3.12, torch 2.11.0+cu130, Ray 2.60.0 and rocmstack's runtime deps; this checkout on PYTHONPATH.
OUT=${OUT:-${1:-out}}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
log=$OUT/colocated.txt
{
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers, ray; print("torch", torch.__version__, "transformers", transformers.__version__, "ray", ray.__version__)'
  # shellcheck disable=SC2016  # the command as typed, $OUT unexpanded
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
