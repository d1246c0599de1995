#!/usr/bin/env bash
# What a level-2 doctor run and a colocated smoke run leave in /dev/shm (RAM) once they exit
# (2x NVIDIA H200, one host). Outputs land in $OUT.
OUT=${OUT:-${1:-out}}; mkdir -p "$OUT"
set -u
export RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1
{ date -u; nvidia-smi -L; python3 -c 'import torch, ray; print("torch", torch.__version__, "ray", ray.__version__)'; } > "$OUT"/hardware.txt 2>&1
rm -f /dev/shm/torch_* /dev/shm/cuda.shm.*
{ echo "before:"; ls -la /dev/shm; } > "$OUT"/shm.txt
python3 -m rocmstack doctor --level 2 --only weight-sync-ipc,weight-sync-broadcast,collective-bandwidth --sync-repeats 3 --json > "$OUT"/doctor.json 2> "$OUT"/doctor.stderr; echo "exit $?" >> "$OUT"/doctor.stderr
{ echo "after doctor --level 2 (3 start-ups x 2 trainer/rollout pairs):"; ls -la /dev/shm; } >> "$OUT"/shm.txt
rm -f /dev/shm/cuda.shm.*
python3 -m rocmstack smoke grpo --placement colocated --json > "$OUT"/smoke.json 2> "$OUT"/smoke.stderr; echo "exit $?" >> "$OUT"/smoke.stderr
{ echo "after smoke grpo --placement colocated (30 steps, an IPC export each):"; ls -la /dev/shm; } >> "$OUT"/shm.txt
cat "$OUT"/hardware.txt "$OUT"/shm.txt; tail -n 1 "$OUT"/doctor.stderr "$OUT"/smoke.stderr
