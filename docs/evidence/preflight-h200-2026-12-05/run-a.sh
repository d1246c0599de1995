#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Level 2 with the memory-return loops (level 1 and its load sweep included), the load sweep with one extension
# made unloadable, the worker masks of a real vLLM server started by a launcher that sets one mask, and verl's
# job with a value its engine refuses at start (run-b.sh fault). Run from the checkout root:
#   bash docs/evidence/preflight-h200-2026-12-05/run-a.sh OUT
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"
rs() { python3 -m rocmstack "$@"; }
# 1. a healthy node: level 2 with the memory-return loops, as a health check runs it (level 1 included)
step level2 rs doctor --level 2 --deep --expect-gpus 1 --json
# 2. the load sweep on a copy of the real vLLM whose _C asks for a library nobody ships
# (as run on 2026-12-05 this named _C.abi3.so, which vLLM 0.24's CUDA wheel does not ship: the file it has is
# _C_stable_libtorch.abi3.so; README.md gives the call that ran with it)
real=$(python3 -c 'import importlib.util as u; print(u.find_spec("vllm").submodule_search_locations[0])')
lib=$(find "$real" -maxdepth 1 -name "_C*.so" -printf "%f\n" | sort | head -1)
copy=/tmp/vllm-copy/vllm; rm -rf /tmp/vllm-copy; mkdir -p "$copy"
for e in "$real"/*; do [ "$(basename "$e")" = "$lib" ] || ln -s "$e" "$copy/"; done
cp "$real/$lib" "$copy/$lib"
patchelf --add-needed libdoesnotexist.so.1 "$copy/$lib"
PYTHONPATH=/tmp/vllm-copy:$PYTHONPATH step loads-broken rs doctor --only native-extensions --expect-gpus 1 --json
# 3. a real vLLM server started by a launcher that sets CUDA_VISIBLE_DEVICES only (right on NVIDIA)
pf() { rs preflight --framework vllm --model-config tests/fixtures/preflight/qwen3-0.6b.config.json \
  --env VLLM_USE_FLASHINFER_SAMPLER=0 --timeout 4m --json "$@"; }
step mask-one pf --work-dir /tmp/pf-mask -- bash "$here/launch-one-mask.sh" vllm serve /models/Qwen3-0.6B --tensor-parallel-size 1
# the same processes' records under AMD's rules, where CUDA_VISIBLE_DEVICES alone is one mask of two
python3 - > "$out/mask-one-as-amd.json" <<'PY'
import json
from rocmstack.gpu.worker_masks import judge, read_records
found = read_records("/tmp/pf-mask/masks")
v = judge(found.records, vendor="amd", allocation=1, physical=1, job_env={})
print(json.dumps({"records": len(found.records), "judged": v.judged, "mismatches": list(v.lines)}, indent=1))
PY
tar czf "$out/masks.tgz" -C /tmp pf-mask/masks pf-mask/step.log
# 4. verl's job with a memory share its engine refuses at start
bash "$here/run-b.sh" "$out" fault
