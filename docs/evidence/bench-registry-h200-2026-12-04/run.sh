#!/usr/bin/env bash
# The bench's reference engine and its weight-sync receiver, now built through the rollout registry
# (gpu/rollout.make_engine), gated against the shipped H200 baseline with the settings that recorded it;
# then the same run without graphs and fused kernels, which the gate must refuse. Run from the checkout root
# on one H200; writes everything under $1.
set -uo pipefail
out=${1:?output folder}
mkdir -p "$out"
date -u +%FT%TZ > "$out/date.txt"
git rev-parse HEAD >> "$out/date.txt" 2>/dev/null || true
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt"
python3 -c 'import torch, transformers, triton; print("torch", torch.__version__, "transformers", transformers.__version__, "triton", triton.__version__)' >> "$out/gpu.txt"
step() {  # name, then the rocmstack arguments
  local name=$1; shift
  echo "\$ rocmstack $*" > "$out/$name.txt"
  python3 -m rocmstack "$@" >> "$out/$name.txt" 2>&1
  echo "exit $?" >> "$out/$name.txt"
}
A="--prompt-len 128 --new-tokens 256 --device cuda --rollout reference --baseline rocmstack/bench/baselines/h200.json"
# shellcheck disable=SC2086  # A is a list of arguments
step gate-8b bench rollout --shape qwen3-8b --batch 1,64,256 $A --output "$out/gate-8b.json"
# shellcheck disable=SC2086
step gate-0.6b bench rollout --shape qwen3-0.6b --batch 64 $A --weight-sync --output "$out/gate-0.6b.json"
# shellcheck disable=SC2086
step plain-0.6b bench rollout --shape qwen3-0.6b --batch 64 $A --no-graphs --no-fused --output "$out/plain-0.6b.json"
