#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# 2. The whole gate on this node for the verl recipe: doctor, GRPO smoke, the engine smoke with the image's
#    vLLM, the bench with vLLM beside the reference engine, and verl's own GRPO loop (framework stage).
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
source "$here/common.sh"
stamp "rocmstack validate --in-place --recipe verl-0.9.0-rocm10 --expect-gpus 1"
timeout 570 python3 -m rocmstack validate --in-place --recipe verl-0.9.0-rocm10 --expect-gpus 1 \
  --report "$w/validate" > "$w/validate.txt" 2>&1; echo "validate rc=$?"
tail -15 "$w/validate.txt"
tar -C "$w" -czf "$out/run-2.tgz" env.txt validate.txt validate
