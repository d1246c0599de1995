"""pyproject.toml's extras resolve from the public index alone, for this machine's Python and platform.

`make venv` installs ``.[test]`` with whatever pip configuration the user has; a pin that resolves only
because a local wheel or index is configured (a CPU torch build without torch's own Requires-Dist) breaks
every other machine. So the resolve here ignores every user and site configuration: no pip.conf or uv.toml,
no PIP_* or UV_* variables, only https://pypi.org/simple.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from uv import find_uv_bin

ROOT = Path(__file__).resolve().parents[2]
INDEX_HOST = "pypi.org"
INDEX_URL = f"https://{INDEX_HOST}/simple"


def _isolated_env() -> dict[str, str]:
    # The cache stays where uv keeps it by default (under HOME), so a repeat resolve reads no metadata twice.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env["UV_NO_CONFIG"] = "1"
    return env


def _index_reachable() -> str | None:
    try:
        with socket.create_connection((INDEX_HOST, 443), timeout=10):
            return None
    except OSError as exc:
        return f"{INDEX_HOST}:443 unreachable ({exc})"


def compile_extra(pyproject: Path, extra: str) -> subprocess.CompletedProcess[str]:
    """``uv pip compile`` of one extra of ``pyproject`` against the public index, with no configuration."""
    return subprocess.run(
        [
            find_uv_bin(),
            "pip",
            "compile",
            "--no-config",
            "--index-url",
            INDEX_URL,
            "--python",
            sys.executable,  # this interpreter's version and platform markers
            "--extra",
            extra,
            "--quiet",
            "--no-header",
            "--no-annotate",
            str(pyproject),
        ],
        cwd=ROOT,
        env=_isolated_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.network
@pytest.mark.timeout(300)
@pytest.mark.parametrize("extra", ["test", "gpu"])
def test_extras_resolve_from_the_public_index_alone(extra):
    unreachable = _index_reachable()
    if unreachable:
        pytest.skip(f"cannot resolve against the public index: {unreachable}")
    run = compile_extra(ROOT / "pyproject.toml", extra)
    assert run.returncode == 0, f"rocmstack[{extra}] does not resolve from {INDEX_URL} alone:\n{run.stderr}"
    pins = dict(line.split("==", 1) for line in run.stdout.splitlines() if "==" in line)
    if extra == "test":
        # The test extra's own torch pin is what resolved, not something a local configuration supplied.
        assert pins.get("torch") == "2.13.0" and "triton" in pins, run.stdout
