#!/usr/bin/env bash
# The H200 evidence run for `rocmstack bench rollout`, everything under $OUT:
#   bash docs/evidence/bench-h200.sh OUTDIR
# Run 1 (docs/evidence/bench-h200-run1) used this script as of commit 2d892c3; run 2 is this version.
# Each step has its own timeout; results are packed after each step, so a cut-off call still returns them.
set -u
export PYTHONUNBUFFERED=1
# Environment: Python 3.12, torch 2.11.0+cu130, Ray 2.60.0 and rocmstack's runtime deps; this checkout on PYTHONPATH.
OUT=${OUT:-${1:-out}}; mkdir -p "$OUT"
W="$OUT/run"
mkdir -p "$W"
LOG="$OUT/log.txt"
pack() { tar czf "$OUT/bench-h200.tgz" -C "$W" . 2>/dev/null; }
step() {  # step NAME TIMEOUT CMD...
  local name=$1 limit=$2; shift 2
  echo "=== $name: $* ($(date -u +%H:%M:%S))" | tee -a "$LOG"
  local t0=$SECONDS
  timeout "$limit" "$@" >"$W/$name.txt" 2>&1
  local rc=$?
  tail -n 25 "$W/$name.txt" >>"$LOG"
  echo "=== $name: rc=$rc in $((SECONDS - t0)) s" | tee -a "$LOG"
  pack
  return $rc
}

{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv;
  python3 -c 'import torch, transformers, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__, "triton", triton.__version__)'; } >"$W/env.txt" 2>&1
cat "$W/env.txt" >>"$LOG"

# The CLI as users run it; if another concern's module cannot import here, the bench-only entry point.
if python3 -m rocmstack --help >/dev/null 2>&1; then BENCH=(python3 -m rocmstack bench); else BENCH=(python3 -m rocmstack.bench); fi
echo "bench entry: ${BENCH[*]}" | tee -a "$LOG"

# 1. Correctness on the GPU: the Triton kernels against PyTorch, the engine (graphs, both decode paths)
#    against transformers.
step pytest 70 python3 -m pytest -q -p no:cacheprovider --noconftest tests/unit/test_bench_kernels.py tests/unit/test_bench_engine.py
FUSED=()
if grep -q "FAILED" "$W/pytest.txt"; then FUSED=(--no-fused); echo "a GPU test failed: benching the plain-PyTorch step" | tee -a "$LOG"; fi

COMMON=(--prompt-len 128 --new-tokens 256 --device cuda --save-baseline "$W/h200.json")
# 2. The goals, reference engine: Qwen3-8B shape at batch 1, 64, 256, and Qwen3-0.6B at batch 64.
step ref-8b 60 "${BENCH[@]}" rollout --shape qwen3-8b --batch 1,64,256 --engine reference "${FUSED[@]}" "${COMMON[@]}" -o "$W/ref-8b.json"
step ref-0.6b 40 "${BENCH[@]}" rollout --shape qwen3-0.6b --batch 64 --engine reference "${FUSED[@]}" "${COMMON[@]}" -o "$W/ref-0.6b.json"
# 3. Where the time goes now (graph step vs kernel time by category).
step profile-8b 40 python3 docs/evidence/bench-profile.py --shape qwen3-8b --batch 1,256 "${FUSED[@]}" --out "$W/profile-8b.json"
step profile-0.6b 25 python3 docs/evidence/bench-profile.py --shape qwen3-0.6b --batch 64 "${FUSED[@]}" --out "$W/profile-0.6b.json"
# 4. transformers generate on the same machine in the same call (the side-by-side baseline).
step hf-8b 90 "${BENCH[@]}" rollout --shape qwen3-8b --batch 1,64,256 --engine hf "${COMMON[@]}" -o "$W/hf-8b.json"
step hf-0.6b 40 "${BENCH[@]}" rollout --shape qwen3-0.6b --batch 64 --engine hf "${COMMON[@]}" -o "$W/hf-0.6b.json"
pack
echo "done $(date -u +%H:%M:%S)" | tee -a "$LOG"
