#!/usr/bin/env bash
# A 10-minute burn-in (doctor --level 4) of one NVIDIA H200, from a rocmstack checkout with .venv installed.
# Writes report.json, report.html (a plot per GPU), doctor.prom and stderr.txt next to this script.
# Not run yet: no result from it is quoted anywhere until it has run.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > "$here/hardware.txt"
.venv/bin/python -c 'import torch, sys; print(sys.version.split()[0], torch.__version__)' >> "$here/hardware.txt"
rc=0
.venv/bin/rocmstack doctor --level 4 --minutes 10 --expect-gpus 1 \
  --only gpu-count,gpu-ecc,gpu-hbm-bandwidth,gpu-gemm,burnin-throughput,burnin-throttle,burnin-power,burnin-memory,burnin-errors \
  --html "$here/report.html" --prometheus "$here/doctor.prom" --json \
  > "$here/report.json" 2> "$here/stderr.txt" || rc=$?
echo "exit $rc" >> "$here/stderr.txt"
exit "$rc"
