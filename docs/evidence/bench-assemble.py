"""Assemble the H200 evidence of `bench rollout` from the two device calls (run here, no GPU needed).

Run 2 (current code) measured the reference engine; its transformers leg was cut off by the call's time
limit, so the transformers rows come from run 1 (same machine kind, same session, same HF code path).
Every row keeps the run it came from and is on that run's measured copy bandwidth.

    .venv/bin/python docs/evidence/bench-assemble.py
writes docs/evidence/bench-h200-{8b,0.6b}.json, docs/evidence/bench-rollout-h200.png,
rocmstack/bench/baselines/h200.json, and prints the README table.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from rocmstack.bench.baseline import update_baseline
from rocmstack.bench.plot import markdown_table, plot_reports

EVIDENCE = Path(__file__).resolve().parent
ROOT = EVIDENCE.parents[1]
RUN1, RUN2 = EVIDENCE / "bench-h200-run1", EVIDENCE / "bench-h200-run2"


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def combined(reference: Path, hf: Path) -> dict:
    ref, other = load(reference), load(hf)
    out = copy.deepcopy(ref)
    out["results"] = [r | {"source": str(reference.relative_to(ROOT))} for r in ref["results"]] + [
        r | {"source": str(hf.relative_to(ROOT))} for r in other["results"] if r["engine"] == "hf"
    ]
    out["assembled_from"] = {"reference": str(reference.relative_to(ROOT)), "hf": str(hf.relative_to(ROOT))}
    return out


def main() -> None:
    big = combined(RUN2 / "ref-8b.json", RUN1 / "bench-8b.json")
    small = combined(RUN2 / "ref-0.6b.json", RUN1 / "bench-0.6b.json")
    for name, report in (("8b", big), ("0.6b", small)):
        (EVIDENCE / f"bench-h200-{name}.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    plot_reports([big, small], EVIDENCE / "bench-rollout-h200.png")

    baseline = ROOT / "rocmstack" / "bench" / "baselines" / "h200.json"
    baseline.unlink(missing_ok=True)
    for report in (
        load(RUN1 / "bench-8b.json"),
        load(RUN1 / "bench-0.6b.json"),
    ):  # hf rows (and run-1 reference)
        update_baseline(baseline, report)
    for report in (
        load(RUN2 / "ref-8b.json"),
        load(RUN2 / "ref-0.6b.json"),
    ):  # current reference rows replace them
        update_baseline(baseline, report)
    print(markdown_table([big, small]))


if __name__ == "__main__":
    main()
