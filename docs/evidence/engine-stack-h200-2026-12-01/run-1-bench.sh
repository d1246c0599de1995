#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# 1. rocmstack's engine bench (reference and vLLM, one vLLM start for all batches) and vLLM's own latency
#    benchmark for the same shape, in one run on one GPU: Qwen3-8B config, dummy weights, 128 in / 256 out.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
source "$here/common.sh"
stamp "rocmstack bench rollout"
timeout 300 python3 -m rocmstack bench rollout --shape qwen3-8b --batch 1,64,256 --engine reference,vllm \
  --device cuda --json -o "$w/rollout.json" > /dev/null 2> "$w/bench.log"; echo "bench rc=$?"
tail -12 "$w/bench.log"
# vLLM's own benchmark needs a model folder: the same config.json the bench writes, and a small local tokenizer
# (no hub here; --disable-detokenize keeps it out of the timing, as the bench's token-id run does).
python3 - <<'PY'
from pathlib import Path
from rocmstack.bench.adapters import write_model_dir
from rocmstack.gpu.shapes import load_config
from rocmstack.smoke.framework_inputs import build_tokenizer
d = write_model_dir(load_config("qwen3-8b")[1], Path("/tmp/evidence/qwen3-8b"), "bfloat16")
build_tokenizer(d)
PY
for b in 1 64 256; do
  stamp "vllm bench latency --batch-size $b"
  timeout 150 vllm bench latency --model /tmp/evidence/qwen3-8b --load-format dummy --dtype bfloat16 \
    --batch-size "$b" --input-len 128 --output-len 256 --num-iters-warmup 3 --num-iters 10 \
    --disable-detokenize --output-json "$w/latency-$b.json" > "$w/latency-$b.log" 2>&1; echo "latency $b rc=$?"
  grep -E "^Avg latency" "$w/latency-$b.log"
done
python3 "$here/compare.py" "$w" | tee "$w/compare.md"
tar -C "$w" -czf "$out/run-1.tgz" env.txt rollout.json bench.log latency-1.json latency-64.json latency-256.json \
  latency-1.log latency-64.log latency-256.log compare.md
