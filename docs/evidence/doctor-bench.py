"""Wall-time benchmark of `rocmstack doctor` (whole command: interpreter start, probes, report).

    python3 docs/evidence/doctor-bench.py --runs 5 [--cmd "python3 -m rocmstack doctor"] [-- doctor args]

Runs one untimed warm-up of each mode (first torch import reads cold files), then --runs timed runs of the
full doctor and of --fast, and prints min / median / max per mode as JSON. Targets (issue 5, section 8):
full <= 3 s, --fast <= 0.5 s on the H200.
"""

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import time


def timed(argv: list[str]) -> tuple[float, int]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    return time.perf_counter() - t0, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cmd", default=f"{sys.executable} -m rocmstack doctor")
    parser.add_argument("extra", nargs="*")
    args = parser.parse_args()
    base = shlex.split(args.cmd) + ["--json", *args.extra]
    out = {"cmd": args.cmd, "extra": args.extra, "runs": args.runs, "modes": {}}
    for mode, argv in (("full", base), ("fast", base + ["--fast"])):
        timed(argv)  # warm-up
        samples, codes = [], set()
        for _ in range(args.runs):
            seconds, code = timed(argv)
            samples.append(seconds)
            codes.add(code)
        out["modes"][mode] = {
            "min_s": round(min(samples), 3),
            "median_s": round(statistics.median(samples), 3),
            "max_s": round(max(samples), 3),
            "exit_codes": sorted(codes),
            "samples_s": [round(s, 3) for s in samples],
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
