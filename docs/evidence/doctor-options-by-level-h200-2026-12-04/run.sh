#!/usr/bin/env bash
# The doctor's options split by level (DoctorOptions with ActiveOptions, ClusterOptions, BurninOptions): the
# flags of each level reach its collectors, and the report's figures show the values given. Run from the
# checkout root on one H200 with Ray installed; writes everything under $1.
set -uo pipefail
out=${1:?output folder}
mkdir -p "$out"
date -u +%FT%TZ > "$out/date.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv > "$out/gpu.txt"
python3 -c 'import torch, ray; print("torch", torch.__version__, "ray", ray.__version__)' >> "$out/gpu.txt"
step() {  # name, then the rocmstack arguments; the JSON report on stdout, progress on stderr
  local name=$1; shift
  local t0=$SECONDS
  echo "\$ rocmstack $*" > "$out/$name.txt"
  python3 -m rocmstack "$@" > "$out/$name.json" 2>> "$out/$name.txt"
  echo "exit $? after $((SECONDS - t0)) s" >> "$out/$name.txt"
}
# Level 2 with the defaults, as a health check would run it.
step level2 doctor --level 2 --deep --expect-gpus 1 --json
# Level 2 flags (ActiveOptions): fewer communicators and handles, a short sweep.
step level2-flags doctor --level 2 --expect-gpus 1 --only communicator-churn,ipc-many-handles,collective-bandwidth \
  --comm-inits 5 --ipc-handles 16 --sizes 1M..4M --iters 5 --json
# Level 4 flags (BurninOptions): a 30 s burn-in.
step level4 doctor --level 4 --burn-in 30s --expect-gpus 1 \
  --only gpu-count,burnin-throughput,burnin-throttle,burnin-power,burnin-memory,burnin-errors --json
# --budget (level 1's run-wide option) through to level 2's group: the communicator count it leaves.
step budget doctor --level 2 --budget 40s --expect-gpus 1 --only communicator-churn --json
