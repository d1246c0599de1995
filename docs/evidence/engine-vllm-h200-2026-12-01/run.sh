#!/usr/bin/env bash
# GPU evidence 1: engine smoke (colocated) and the engine bench, one H200.
set -u
export PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 WANDB_MODE=disabled
w=/tmp/ev1; rm -rf $w; mkdir -p $w
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; uname -r; python3 --version
  python3 -c "import torch, vllm, transformers, ray; print('torch', torch.__version__, 'vllm', vllm.__version__, 'transformers', transformers.__version__, 'ray', ray.__version__)"; } > OUT/env.txt 2>&1
cat OUT/env.txt
echo "== smoke grpo --rollout vllm"
timeout 220 python3 -m rocmstack smoke grpo --rollout vllm --device cuda --steps 5 --report OUT/smoke-vllm --json > OUT/smoke-vllm.json 2> OUT/smoke-vllm.err; echo "smoke rc=$?"
tail -5 OUT/smoke-vllm.err; python3 -c "import json;d=json.load(open('OUT/smoke-vllm.json'));print(d['passed'], [(c['name'], c['passed'], c['detail'][:120]) for c in d['criteria']])" 2>&1 | tail -3
echo "== bench"
timeout 360 python3 -m rocmstack bench rollout --shape qwen3-8b --batch 1,64,256 --engine reference,vllm --device cuda --json -o OUT/rollout.json > /dev/null 2> OUT/bench.err; echo "bench rc=$?"
tail -25 OUT/bench.err
