#!/usr/bin/env bash
# A burn-in (doctor --level 4) of one NVIDIA H200 for MINUTES (default 10), then the Slurm HealthCheckProgram
# budget: `doctor --budget 10s`, timed. Run from a rocmstack checkout whose dependencies python3 imports.
# Writes hardware.txt, report.json, report.html (a plot per GPU), doctor.prom, stderr.txt, budget.json and
# budget.txt to OUT (default: next to this script).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out=${OUT:-$here}
minutes=${1:-10}
cd "$here/../../.." || exit 2
{ date -u; nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv
  python3 -c 'import torch, sys; print(sys.version.split()[0], torch.__version__)'; } > "$out/hardware.txt"
rc=0
python3 -m rocmstack doctor --level 4 --minutes "$minutes" --expect-gpus 1 \
  --only gpu-count,gpu-ecc,gpu-hbm-bandwidth,gpu-gemm,burnin-throughput,burnin-throttle,burnin-power,burnin-memory,burnin-errors \
  --html "$out/report.html" --prometheus "$out/doctor.prom" --json \
  > "$out/report.json" 2> "$out/stderr.txt" || rc=$?
echo "burn-in exit $rc" >> "$out/stderr.txt"
start=$(date +%s%N)
python3 -m rocmstack doctor --budget 10s --json > "$out/budget.json" 2> "$out/budget.txt"
brc=$?
echo "budget exit $brc in $((($(date +%s%N) - start) / 1000000)) ms wall (process start and torch import included)" >> "$out/budget.txt"
exit "$rc"
