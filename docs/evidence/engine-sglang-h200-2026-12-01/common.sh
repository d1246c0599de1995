#!/usr/bin/env bash
# Sourced by run-*.sh on the GPU node: environment, a work folder, and the record of the machine.
set -u
export PYTHONUNBUFFERED=1 WANDB_MODE=disabled
export out=${OUT:?OUT: the folder the results go to}
export w=/tmp/evidence-sglang; mkdir -p "$w"
stamp() { echo "== $(date -u +%FT%TZ) $*"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; uname -r; python3 --version
  python3 -c "import torch, sglang, transformers, ray; print('torch', torch.__version__, 'sglang', sglang.__version__, 'transformers', transformers.__version__, 'ray', ray.__version__)"
} > "$w/env.txt" 2>&1
