#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# The false-failure soak on a healthy GPU node: `rocmstack soak` runs the doctor N times, each a fresh process,
# with the node's history (so gpu-ras-events judges every run after the first). From the checkout root:
#   bash docs/evidence/preflight-h100-2026-12-06/soak.sh OUT LEVEL RUNS
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"
level=${2:?level} runs=${3:?runs}
step "soak-level$level-$runs" python3 -m rocmstack soak --runs "$runs" --json -- \
  --level "$level" --expect-gpus 1 --history /tmp/soak-history
