#!/usr/bin/env bash
# Re-records rocmstack/bench/baselines/h200.json in decode rates (baseline schema 2) with the commands that
# made the schema-1 file, then gates a run on it and shows the schema-1 file refused. Run from the checkout
# root on one H200; writes everything under $1.
set -uo pipefail
out=${1:?output folder}
mkdir -p "$out"
date -u +%FT%TZ > "$out/date.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt"
python3 -c 'import torch, transformers, triton; print("torch", torch.__version__, "transformers", transformers.__version__, "triton", triton.__version__)' >> "$out/gpu.txt"
step() {  # name, then the rocmstack arguments
  local name=$1; shift
  echo "\$ rocmstack $*" > "$out/$name.txt"
  python3 -m rocmstack "$@" >> "$out/$name.txt" 2>&1
  echo "exit $?" >> "$out/$name.txt"
}
A="--prompt-len 128 --new-tokens 256 --device cuda"
# shellcheck disable=SC2086  # A is a list of arguments
step record-8b bench rollout --shape qwen3-8b --batch 1,64,256 --rollout reference,hf $A \
  --save-baseline "$out/h200.json" --output "$out/bench-8b.json"
# shellcheck disable=SC2086
step record-0.6b bench rollout --shape qwen3-0.6b --batch 64 --rollout reference,hf $A \
  --save-baseline "$out/h200.json" --output "$out/bench-0.6b.json"
# shellcheck disable=SC2086
step gate bench rollout --shape qwen3-0.6b --batch 64 --rollout reference $A \
  --baseline "$out/h200.json" --output "$out/gated.json"
# shellcheck disable=SC2086
step schema1 bench rollout --shape qwen3-0.6b --batch 64 --rollout reference $A \
  --baseline "$(dirname "$0")/schema1-h200.json"  # the shipped file before (schema 1)
