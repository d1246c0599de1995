#!/usr/bin/env bash
# The Ray-cluster integration tests (cluster mode, level 3, GPU layouts) beside a CPU hog, as a loaded shared
# CI runner has them. From the checkout root, on an otherwise idle machine:
#   bash docs/evidence/cluster-tests-under-load-2026-12-06/run.sh OUT LOOPS
set -uo pipefail
out=${1:?output folder} loops=${2:?busy loops}
mkdir -p "$out"
hog=()
for _ in $(seq "$loops"); do
  python3 -c 'while True: pass' &
  hog+=($!)
done
trap 'kill "${hog[@]}" 2>/dev/null' EXIT
sleep 60  # the load average climbs to the hog's level before the tests start
( while sleep 30; do echo "$(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)"; done ) > "$out/load.txt" &
sampler=$!
{ uname -srm; nproc; echo "busy loops: $loops"; date -u +%FT%TZ; } > "$out/machine.txt"
ROCMSTACK_REQUIRE_INTEGRATION=1 .venv/bin/python -m pytest -p no:cacheprovider -q -rA \
  tests/integration/test_doctor_cluster.py tests/integration/test_doctor_level3.py \
  tests/integration/test_doctor_layouts.py > "$out/pytest.txt" 2>&1
echo "exit $?" >> "$out/pytest.txt"
kill "$sampler"
