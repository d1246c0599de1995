#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# 3. Breaking the engine in the stack: validate must FAIL at the engine stages and name the cause.
#    a. one of vLLM's runtime dependencies removed (xgrammar: `import vllm` still works, the engine cannot start);
#    b. a visibility mask that hides the GPU from the engine's process only (the doctor's processes see it);
#    then, when FRAMEWORK=1, `rocmstack smoke framework` for verl on its own.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
source "$here/common.sh"
site=$(python3 -c "import xgrammar, os; print(os.path.dirname(os.path.dirname(xgrammar.__file__)))")
stamp "a. xgrammar removed from $site"
mv "$site/xgrammar" "$w/xgrammar.removed"
timeout 200 python3 -m rocmstack validate --in-place --recipe verl-0.9.0-rocm10 --expect-gpus 1 --skip-framework \
  --smoke-steps 5 --report "$w/no-xgrammar" > "$w/no-xgrammar.txt" 2>&1; echo "validate rc=$?"
mv "$w/xgrammar.removed" "$site/xgrammar"
tail -8 "$w/no-xgrammar.txt"
stamp "b. CUDA_VISIBLE_DEVICES=1 in the bench engine's process only"
hook=$w/mask-hook; mkdir -p "$hook"
cat > "$hook/sitecustomize.py" <<'PY'
# Only the bench's engine process gets a mask that names no GPU of this one-GPU node (as a launcher would set).
import os
import sys

if "rocmstack.bench.engine_child" in sys.orig_argv:
    os.environ["CUDA_VISIBLE_DEVICES"] = "1"
PY
PYTHONPATH="$hook:$PYTHONPATH" timeout 200 python3 -m rocmstack validate --in-place --recipe verl-0.9.0-rocm10 \
  --expect-gpus 1 --skip-framework --smoke-steps 5 --report "$w/engine-mask" > "$w/engine-mask.txt" 2>&1
echo "validate rc=$?"; tail -8 "$w/engine-mask.txt"
files=(env.txt no-xgrammar.txt no-xgrammar/report.json no-xgrammar/report.md engine-mask.txt engine-mask/report.json engine-mask/report.md)
if [ "${FRAMEWORK:-0}" = 1 ]; then
  stamp "rocmstack smoke framework verl-0.9.0-rocm10"
  timeout 330 python3 -m rocmstack smoke framework verl-0.9.0-rocm10 --report "$w/framework" --json \
    > "$w/framework.json" 2> "$w/framework.err"; echo "framework rc=$?"
  python3 -c "import json; d=json.load(open('$w/framework.json')); print(d['passed'], d['run_s'], [(c['name'], c['passed']) for c in d['criteria']])"
  files+=(framework.json framework.err framework/framework.log framework/metrics.jsonl)
fi
tar -C "$w" -czf "$out/run-3.tgz" "${files[@]}"
