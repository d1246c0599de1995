#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# 1. The GRPO smoke with the image's SGLang as its rollout, colocated on one GPU (IPC weight loads,
#    release/resume of SGLang's memory between rollout and training), then the two faults it must catch.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
source "$here/common.sh"
for run in pass:"" stale-weights:"--inject stale-weights" logprob-mismatch:"--inject logprob-mismatch"; do
  name=${run%%:*}; flags=${run#*:}
  [ -n "${SMOKE_ONLY:-}" ] && [ "$name" != "$SMOKE_ONLY" ] && continue
  stamp "rocmstack smoke grpo --rollout sglang $flags"
  # shellcheck disable=SC2086  # the flags are words
  timeout 280 python3 -m rocmstack smoke grpo --rollout sglang $flags --report "$w/smoke-$name" --json \
    > "$w/smoke-$name.json" 2> "$w/smoke-$name.log"; echo "smoke $name rc=$?"
  python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print('passed', s['passed'], 'failed', s['failed'])" \
    "$w/smoke-$name.json" 2>/dev/null || tail -5 "$w/smoke-$name.log"
done
(cd "$w" && tar -czf "$out/run-1.tgz" env.txt smoke-*)
