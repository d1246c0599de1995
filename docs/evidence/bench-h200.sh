#!/usr/bin/env bash
# The H200 evidence run for `rocmstack bench rollout`: one device-tool call, everything under $OUT.
#   run(command="bash docs/evidence/bench-h200.sh", carry=[".whl"], timeout_s=400)
# Each step has its own timeout so the call ends inside its limit; results are packed after each step.
set -u
export PYTHONUNBUFFERED=1
source ci/device/setup.sh
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

# 1. Correctness on the GPU: graphs, plain-PyTorch and Triton decode steps against transformers.
step pytest 90 python3 -m pytest -q -p no:cacheprovider --noconftest tests/unit/test_bench_engine.py
FUSED=()
if grep -q "cuda-True.*FAILED\|FAILED.*cuda-True" "$W/pytest.txt"; then FUSED=(--no-fused); echo "fused kernels failed their tests: benching without" | tee -a "$LOG"; fi

COMMON=(--prompt-len 128 --new-tokens 256 --device cuda --save-baseline "$W/h200.json")
# 2. The goals: Qwen3-8B shape, reference vs transformers generate, then Qwen3-0.6B at batch 64.
step bench-8b 240 "${BENCH[@]}" rollout --shape qwen3-8b --batch 1,64,256 --engine reference,hf "${FUSED[@]}" "${COMMON[@]}" -o "$W/bench-8b.json"
step bench-0.6b 120 "${BENCH[@]}" rollout --shape qwen3-0.6b --batch 64 --engine reference,hf "${FUSED[@]}" "${COMMON[@]}" -o "$W/bench-0.6b.json"
# 4. Weight sync of the full 8B state dict by IPC on this GPU (the 2-rank NCCL leg reports skip on 1 GPU).
step weightsync 90 "${BENCH[@]}" rollout --shape qwen3-8b --batch 1 --new-tokens 8 --weight-sync "${FUSED[@]}" --device cuda -o "$W/bench-weightsync.json"
# 5. Where the time goes: graph step vs kernel time by category, then ncu on one 8B batch-1 step's matmuls.
step profile-8b 90 python3 docs/evidence/bench-profile.py --shape qwen3-8b --batch 1,64,256 "${FUSED[@]}" --out "$W/profile-8b.json"
step profile-0.6b 60 python3 docs/evidence/bench-profile.py --shape qwen3-0.6b --batch 64 "${FUSED[@]}" --out "$W/profile-0.6b.json"
# 3. What fusion buys: the plain-PyTorch decode step (graphs still on).
step bench-nofused 120 "${BENCH[@]}" rollout --shape qwen3-8b --batch 1,64,256 --no-fused --prompt-len 128 --new-tokens 256 --device cuda -o "$W/bench-8b-nofused.json"
step bench-0.6b-nofused 60 "${BENCH[@]}" rollout --shape qwen3-0.6b --batch 64 --no-fused --prompt-len 128 --new-tokens 256 --device cuda -o "$W/bench-0.6b-nofused.json"
# 8B: 4 matmuls a layer x 36 + the LM head = 145 per pass; skip the prefill's and the first step's.
step ncu-8b-b1 90 ncu --clock-control none -k 'regex:gemv|gemm|nvjet|cutlass|xmma' --launch-skip 290 --launch-count 145 \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed --csv \
  python3 docs/evidence/bench-profile.py --shape qwen3-8b --batch 1 --ncu
pack
echo "done $(date -u +%H:%M:%S)" | tee -a "$LOG"
