#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# The typed report producers on a GPU node: the doctor at level 2 and validate in place, each report read back
# by the models its readers use. From the checkout root:  bash docs/evidence/typed-reports-gpu-2026-12-06/run.sh OUT
# shellcheck source=../preflight-h100-2026-12-06/common.sh
source "$(dirname "$0")/../preflight-h100-2026-12-06/common.sh"
step doctor-level2 python3 -m rocmstack doctor --level 2 --expect-gpus 1 --json
step validate python3 -m rocmstack validate --in-place --expect-gpus 1 --skip-framework -o "$out/validate"
cp "$out/validate/report.json" "$out/validate-report.json"
step read-back python3 - "$out/doctor-level2.json" "$out/validate-report.json" <<'PY'
import json, sys
from rocmstack.doctor.report import DoctorReport
from rocmstack.validate.schema import parse_report
doctor = DoctorReport.model_validate(json.load(open(sys.argv[1])))
report = parse_report(json.load(open(sys.argv[2])), sys.argv[2])
print(json.dumps({"doctor": {"schema": doctor.schema_, "passed": doctor.passed},
                  "validate": {"schema": report["schema"], "passed": report["passed"]}}))
PY
