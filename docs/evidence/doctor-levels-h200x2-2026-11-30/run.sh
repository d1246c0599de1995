#!/usr/bin/env bash
# The exact commands behind this evidence (2x NVIDIA H200, one host). Outputs land in $OUT.
OUT=${OUT:-${1:-out}}; mkdir -p "$OUT"
set -u
D=docs/evidence/doctor-levels-h200x2-2026-11-30
export RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1
{ date -u; nvidia-smi; nvidia-smi topo -m; python3 -c 'import torch, ray; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "ray", ray.__version__)'; uname -r; } > "$OUT"/hardware.txt 2>&1
python3 $D/plain_loop.py "$OUT"/plain-loop.json > "$OUT"/plain-loop.txt 2>&1
s=$EPOCHREALTIME
python3 -m rocmstack doctor --level 2 --sizes 1M..4G --save-baseline --baseline "$OUT"/baseline.json --json > "$OUT"/level2-healthy.json 2> "$OUT"/level2-healthy.stderr; rc=$?; echo "exit $rc seconds $(python3 -c "print(round($EPOCHREALTIME - $s, 1))")" >> "$OUT"/level2-healthy.stderr
s=$EPOCHREALTIME
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 python3 -m rocmstack doctor --level 2 --only collective-bandwidth,collective-transport --collective all_reduce,broadcast --sizes 1M..64M --iters 5 --json > "$OUT"/level2-socket.json 2> "$OUT"/level2-socket.stderr; rc=$?; echo "exit $rc seconds $(python3 -c "print(round($EPOCHREALTIME - $s, 1))")" >> "$OUT"/level2-socket.stderr
s=$EPOCHREALTIME
CUDA_VISIBLE_DEVICES=0 python3 -m rocmstack doctor --level 2 --json > "$OUT"/level2-one-gpu.json 2> "$OUT"/level2-one-gpu.stderr; rc=$?; echo "exit $rc seconds $(python3 -c "print(round($EPOCHREALTIME - $s, 1))")" >> "$OUT"/level2-one-gpu.stderr
s=$EPOCHREALTIME
python3 -m rocmstack doctor --json > "$OUT"/level1.json 2> "$OUT"/level1.stderr; rc=$?; echo "exit $rc seconds $(python3 -c "print(round($EPOCHREALTIME - $s, 1))")" >> "$OUT"/level1.stderr
tail -n 3 "$OUT"/*.stderr; cat "$OUT"/plain-loop.txt
