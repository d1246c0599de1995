#!/usr/bin/env bash
# Sourced by run-*.sh: an output folder, the machine's facts, and `step NAME CMD...` that times a command and
# keeps its stdout (NAME.json) and stderr (NAME.txt) with its exit status.
set -uo pipefail
export out=${1:?output folder}
mkdir -p "$out"
export RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1
export here; here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, ray, vllm, verl; print("torch", torch.__version__, "ray", ray.__version__, "vllm", vllm.__version__, "verl", verl.__version__)' 2>&1 | tail -1
} >> "$out/machine.txt"
step() {
  local name=$1; shift
  local t0=$SECONDS
  echo "\$ $*" > "$out/$name.txt"
  "$@" > "$out/$name.json" 2>> "$out/$name.txt"
  local rc=$?
  echo "exit $rc after $((SECONDS - t0)) s" >> "$out/$name.txt"
  echo "$name: exit $rc after $((SECONDS - t0)) s"
}
