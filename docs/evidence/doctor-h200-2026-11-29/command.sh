#!/usr/bin/env bash
export COLUMNS=160 PYTHONUNBUFFERED=1; D=${OUT:-out}; mkdir -p "$D"
R="python3 -m rocmstack doctor"; "$R" --help >/dev/null 2>"$D"/entry.err || R="python3 -m rocmstack.doctor"
{ date -u; hostname; nproc; nvidia-smi -L; python3 -c "import ray,torch,sys;print('python',sys.version.split()[0],'ray',ray.__version__,'torch',torch.__version__)"; echo "entry: $R"; tail -3 "$D"/entry.err; rm -f "$D"/entry.err
python3 -c "
import time;t=time.perf_counter();import torch;a=time.perf_counter();n=torch.cuda.device_count();b=time.perf_counter();torch.zeros(1,device='cuda');c=time.perf_counter()
print(f'breakdown: import torch {a-t:.2f}s, device_count {b-a:.3f}s, first CUDA op (runtime init) {c-b:.2f}s')"; } > "$D"/env.txt 2>&1
nvidia-smi --query-gpu=index,name,uuid,pci.bus_id --format=csv > "$D"/nvidia-smi.csv
$R --expect-gpus 1 > "$D"/table.txt 2>&1; echo "exit=$?" >> "$D"/table.txt
$R --expect-gpus 1 --json > "$D"/doctor.json; echo json_rc=$?
$R --fast --expect-gpus 1 --markdown > "$D"/fast.md 2>&1; echo fast_rc=$?
CUDA_VISIBLE_DEVICES=1 "$R" --expect-gpus 1 --json > "$D"/mask.json; echo mask_rc=$?
$R --deep --expect-gpus 1 --json > "$D"/deep.json; echo deep_rc=$?
python3 docs/evidence/doctor-bench.py --runs 5 --cmd "$R" > "$D"/bench.json 2>&1; echo bench_rc=$?
cat "$D"/env.txt; python3 -c "import json;b=json.load(open('$D/bench.json'));print({m:(v['median_s'],v['min_s'],v['max_s']) for m,v in b['modes'].items()})"
