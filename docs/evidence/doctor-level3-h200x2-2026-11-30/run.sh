#!/usr/bin/env bash
# The exact commands behind this evidence: a Ray cluster of two nodes on one host with two NVIDIA H200, one
# GPU per node (each raylet sees one GPU), then `rocmstack doctor --level 3` against it. Outputs land in $OUT.
OUT=${OUT:-${1:-out}}; mkdir -p "$OUT"
set -u
export RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1
# Ray installed without its console scripts: the same CLI through its module
command -v ray > /dev/null || ray() { python3 -c "from ray.scripts.scripts import main; main()" "$@"; }
{ date -u; nvidia-smi; nvidia-smi topo -m; python3 -c 'import torch, ray; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "ray", ray.__version__)'; uname -r; } > "$OUT"/hardware.txt 2>&1
common=(--node-ip-address=127.0.0.1 --num-cpus=8 --num-gpus=1 --disable-usage-stats)
CUDA_VISIBLE_DEVICES=0 ray start --head --port=6390 --include-dashboard=false "${common[@]}" \
  --node-manager-port=6401 --object-manager-port=6402 --dashboard-agent-listen-port=6403 \
  --dashboard-agent-grpc-port=6404 --runtime-env-agent-port=6405 --metrics-export-port=6406 \
  --min-worker-port=20000 --max-worker-port=20999 > "$OUT"/ray-head.txt 2>&1
CUDA_VISIBLE_DEVICES=1 ray start --address=127.0.0.1:6390 "${common[@]}" \
  --node-manager-port=6411 --object-manager-port=6412 --dashboard-agent-listen-port=6413 \
  --dashboard-agent-grpc-port=6414 --runtime-env-agent-port=6415 --metrics-export-port=6416 \
  --min-worker-port=21000 --max-worker-port=21999 > "$OUT"/ray-worker.txt 2>&1
sleep 5
ray status --address=127.0.0.1:6390 > "$OUT"/ray-status.txt 2>&1
s=$EPOCHREALTIME
python3 -m rocmstack doctor --ray-address 127.0.0.1:6390 --level 3 --cluster-timeout 400 --json > "$OUT"/level3.json 2> "$OUT"/level3.stderr; rc=$?
echo "exit $rc seconds $(python3 -c "print(round($EPOCHREALTIME - $s, 1))")" >> "$OUT"/level3.stderr
ray stop --force > /dev/null 2>&1
tail -n 3 "$OUT"/level3.stderr "$OUT"/ray-status.txt
