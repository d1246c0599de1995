#!/usr/bin/env bash
# The exact command behind this evidence: the rollout bench's weight-sync legs (CUDA IPC and the 2-rank
# NCCL broadcast of a full qwen3-8b state dict) on two NVIDIA H200 of one host. Outputs land in $OUT.
OUT=${OUT:-${1:-out}}; mkdir -p "$OUT"
set -u
export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvidia-smi topo -m;
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'; } > "$OUT"/hardware.txt 2>&1
s=$EPOCHREALTIME
python3 -m rocmstack bench rollout --shape qwen3-8b --batch 1 --new-tokens 8 --weight-sync --device cuda \
  -o "$OUT"/bench-weightsync.json > "$OUT"/bench-weightsync.txt 2>&1; rc=$?
echo "exit $rc seconds $(python3 -c "print(round($EPOCHREALTIME - $s, 1))")" >> "$OUT"/bench-weightsync.txt
tail -n 12 "$OUT"/bench-weightsync.txt
