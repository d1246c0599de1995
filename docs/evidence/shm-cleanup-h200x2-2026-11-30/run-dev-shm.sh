#!/usr/bin/env bash
# doctor's dev-shm check on a GPU host where IPC exporters have exited (2x NVIDIA H200). Outputs in $OUT.
OUT=${OUT:-${1:-out}}; mkdir -p "$OUT"
set -u
export RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1
rm -f /dev/shm/torch_* /dev/shm/cuda.shm.*
python3 -m rocmstack doctor --level 2 --only weight-sync-ipc --sync-repeats 2 --json > "$OUT"/exporters.json 2> "$OUT"/exporters.stderr
{ date -u; ls -la /dev/shm; } > "$OUT"/dev-shm-ls.txt
python3 -m rocmstack doctor --only dev-shm > "$OUT"/dev-shm.txt 2>&1; echo "exit $?" >> "$OUT"/dev-shm.txt
cat "$OUT"/dev-shm-ls.txt "$OUT"/dev-shm.txt
{ echo "/proc/mounts, /dev/shm lines:"; grep shm /proc/mounts; } >> "$OUT"/dev-shm-ls.txt
