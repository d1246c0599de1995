"""docs/lab-repository.md, run as written: its bash blocks, in order, in one shell, from the checkout.

The lab's repository is a fresh temporary folder the first block makes and the last removes. Real lock,
resolver (PyPI or its cache), rules and renderer; no GPU, engine or registry. Each output line the test
checks is also a line of the page, where `...` stands for a hash, a count or a machine's own text.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "lab-repository.md"

# Lines of the page's outputs (trimmed as the page trims them) that the run must print.
EXPECTED = [
    "wrote patches/acme-accelerate-numa.yaml and patches/diffs/acme-accelerate-numa.diff; list"
    " acme-accelerate-numa under the recipe's patches, then `rocmstack patch test RECIPE --only"
    " acme-accelerate-numa`",
    "acme-verl [gfx950]: started from verl-0.9.0-rocm10.lock.json [gfx950]",
    "acme-verl [gfx950]: ... pass, 2 warn",
    "APPLIES   acme-accelerate-numa (accelerate) on accelerate-1.15.0-py3-none-any.whl",
    "  ok   utils/environment.py: hunk 1 of 1 (@@ -324,7 +324,10 @@ def override_numa_affinity(local_process_index:"
    " int, verbose: Optional[bool] = N): at line 324",
    "patch test acme-verl: a component's pinned source could not be fetched (1 applies, 4 unfetched, 3 skipped)",
    "patch test: exit 4",
    "acme-verl gfx950 -> ghcr.io/acme/verl:acme-verl-0.9.0_rocm10.0_gfx950 ghcr.io/acme/verl:r-..."
    " ghcr.io/acme/verl:acme-latest",
    "rendered acme-verl for gfx950 -> rendered/v1",
    "COPY --chmod=0644 rocmstack/patches/acme-rollout-memory.json /opt/rocmstack/patches/acme-rollout-memory.json",
    'RUN ["/bin/bash", "-o", "pipefail", "-c", "python3 /opt/rocmstack/bin/apply_patches.py'
    " /opt/rocmstack/patches/acme-accelerate-numa.json /opt/rocmstack/patches/verl-rollout-defaults.json"
    ' /opt/rocmstack/patches/acme-rollout-memory.json"]',
    "acme-verl-v1.lock.json -> recipes/acme-verl.lock.json: 1 added, 1 changed",
    "verl-0.9.0-rocm10 -> acme-verl: 4 added, 8 changed",
    "no resolved package list for verl-0.9.0-rocm10, acme-verl: packages not compared",
    "ghcr.io/acme/verl:acme-verl-0.9.0_rocm10.0_gfx950\timmutable",
    "ghcr.io/acme/verl:r-...\timmutable",
    "ghcr.io/acme/verl:acme-latest\talias",
]


def blocks() -> list[str]:
    part = DOC.read_text().split("<!-- lab:begin -->", 1)[1].split("<!-- lab:end -->", 1)[0]
    return re.findall(r"^```bash\n(.*?)^```$", part, flags=re.S | re.M)


def outputs() -> list[str]:
    part = DOC.read_text().split("<!-- lab:begin -->", 1)[1].split("<!-- lab:end -->", 1)[0]
    return [
        line for b in re.findall(r"^```text\n(.*?)^```$", part, flags=re.S | re.M) for line in b.splitlines()
    ]


def pattern(line: str) -> re.Pattern[str]:
    return re.compile("^" + ".+".join(re.escape(piece) for piece in line.split("...")) + "$", re.M)


def test_the_lab_repository_runs_as_written():
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("VIRTUAL_ENV", None)
    env.pop("ROCMSTACK_RECIPES_PATH", None)
    script = "\n".join([*blocks()[:-1], 'printf "\\nLAB=%s\\n" "$LAB"', blocks()[-1]])
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-8000:]
    for line in EXPECTED:
        assert pattern(line).search(out), (line, out[-6000:])
    # The repository already names ghcr.io/acme: --registry ghcr.io/acme does not double it.
    assert "ghcr.io/acme/ghcr.io" not in out and "ghcr.io/acme/acme" not in out
    # The lab-only plan: one leg, the lab's recipe; none of rocmstack's shipped recipes.
    legs = re.findall(r"^(\S+) gfx\S+ -> ", proc.stdout, re.M)
    assert legs == ["acme-verl"], legs
    lab = re.search(r"^LAB=(\S+)$", proc.stdout, re.M)
    assert lab and not Path(lab[1]).exists()  # the last block cleaned up
