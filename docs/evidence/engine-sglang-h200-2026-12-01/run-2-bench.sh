#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# 2. rocmstack's engine bench, reference and SGLang (one SGLang start for all batches: SGLang's own one-batch
#    benchmark, which times prefill and every decode step): Qwen3-8B config, dummy weights, 128 in / 256 out.
# Run 2026-12-02; the figures are in README.md.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
source "$here/common.sh"
stamp "rocmstack bench rollout"
timeout 420 python3 -m rocmstack bench rollout --shape qwen3-8b --batch 1,64,256 --engine reference,sglang \
  --device cuda --json -o "$w/rollout.json" > /dev/null 2> "$w/bench.log"; echo "bench rc=$?"
tail -14 "$w/bench.log"
tar -C "$w" -czf "$out/run-2.tgz" env.txt rollout.json bench.log
