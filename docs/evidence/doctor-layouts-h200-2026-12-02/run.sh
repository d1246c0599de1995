#!/usr/bin/env bash
# The layout probes of level 2 (actor-masks, weight-sync-masks, communicator-churn, ipc-many-handles) on one
# NVIDIA H200, healthy and with faults injected through the environment. Run from the project root with
# rocmstack, Ray and their deps importable; `run.sh healthy`, `run.sh faults` or `run.sh validate`; outputs
# land in $OUT.
set -u
out=${OUT:-.}
log="$out/runs-$1.txt"
export RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import torch, ray; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "ray", ray.__version__)'
} > "$log" 2>&1
doctor() {  # $1: name of the output; then env assignments (KEY=VALUE) and the doctor's arguments
  local name=$1 t0=$EPOCHREALTIME rc; shift
  local envs=(); while [[ ${1:-} == *=* && ${1:-} != -* ]]; do envs+=("$1"); shift; done
  env "${envs[@]}" python3 -m rocmstack doctor "$@" --json > "$out/$name.json" 2> "$out/$name.stderr"
  rc=$?
  echo "$ ${envs[*]} rocmstack doctor $* --json   # $name: exit $rc, $(python3 -c "print(round($EPOCHREALTIME - $t0, 1))") s" >> "$log"
}
LAYOUT=actor-masks,weight-sync-masks,communicator-churn,ipc-many-handles
if [[ $1 == healthy ]]; then
  doctor layouts --level 2 --only "$LAYOUT"
  doctor level2-all --level 2 --deep --expect-gpus 1
  # an image that sets Ray's NOSET variables (verl's and vime's ROCm images do): no actor is masked
  doctor noset-image RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES=1 RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES=1 --level 2 --only actor-masks,weight-sync-masks
fi
if [[ $1 == faults ]]; then
  # num_gpus=0 actors given an empty mask by Ray
  doctor override-on-zero RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=1 --level 2 --only actor-masks
  # a communicator that cannot bootstrap: every init fails
  doctor no-socket NCCL_SOCKET_IFNAME=nosuchif0 --level 2 --only communicator-churn --comm-inits 3
  # the caching allocator's expandable segments, shared over IPC
  doctor expandable PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True --level 2 --only ipc-many-handles,weight-sync-masks
  # a mask that lists the one GPU twice: Ray counts two GPUs
  doctor twice CUDA_VISIBLE_DEVICES=0,0 --level 2 --only actor-masks
fi
if [[ $1 == validate ]]; then
  # the whole gate on this node: doctor, GRPO smoke, bench judged against its MBU floor
  t0=$EPOCHREALTIME
  python3 -m rocmstack validate --in-place --expect-gpus 1 --report "$out/validate" > "$out/validate.txt" 2>&1
  echo "$ rocmstack validate --in-place --expect-gpus 1 --report validate   # exit $?, $(python3 -c "print(round($EPOCHREALTIME - $t0, 1))") s" >> "$log"
fi
cat "$log"
