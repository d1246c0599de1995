"""The shipped Slurm hook scripts (rocmstack/doctor/hooks/): docs/doctor-fleet.md shows them as they are, and
run by sh with their site settings filled in they call a doctor command line the CLI accepts."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import typer.main

from rocmstack.cli import make_app
from tests.fixtures.doctor.slurm_hooks import HOOKS, install_hook

PAGE = Path(__file__).resolve().parents[2] / "docs" / "doctor-fleet.md"
NAMES = ("rocmstack-health", "rocmstack-prolog", "rocmstack-epilog")


def _argv(tmp_path: Path, name: str, *args: str, **settings: str) -> list[str]:
    """What the installed hook hands to ROCMSTACK (a script that writes its arguments, one per line)."""
    record = tmp_path / "argv"
    fake = tmp_path / "rocmstack"
    fake.write_text(f'#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done > {record}\n')
    fake.chmod(0o755)
    hook = install_hook(name, tmp_path / name, {"ROCMSTACK": str(fake), **settings})
    subprocess.run(["sh", str(hook), *args], check=True, timeout=30)
    return record.read_text().splitlines()


def _parses(argv: list[str]) -> None:
    command = typer.main.get_command(make_app())
    ctx = command.make_context("rocmstack", list(argv), resilient_parsing=False)
    sub = command.get_command(ctx, argv[0])
    assert sub is not None
    sub.make_context(argv[0], argv[1:])  # raises on an unknown option or a bad value


def test_the_page_shows_each_hook_as_shipped():
    page = PAGE.read_text(encoding="utf-8")
    for name in NAMES:
        shown = re.search(rf"^`{name}`:\n\n```sh\n(.*?)^```", page, flags=re.S | re.M)
        assert shown, f"docs/doctor-fleet.md does not show {name}"
        assert shown.group(1) == (HOOKS / name).read_text(encoding="utf-8")
        assert (HOOKS / name).stat().st_mode & 0o111, f"{name} is not executable"


@pytest.mark.parametrize("name", NAMES)
def test_each_hook_runs_a_doctor_command_the_cli_accepts(tmp_path, name):
    argv = _argv(tmp_path, name, GPUS="4")
    hook = name.removeprefix("rocmstack-").replace("health", "healthcheck")
    assert argv[:3] == ["doctor", "--slurm", hook]
    assert argv[argv.index("--expect-gpus") + 1] == "4"
    assert argv[argv.index("--breaker-file") + 1] == "/var/lib/rocmstack/breaker.json"
    assert "--remediate" not in argv
    _parses(argv)


def test_the_health_checks_remediation_settings_and_own_arguments_reach_the_doctor(tmp_path):
    reset = "amd-smi reset -G"
    argv = _argv(tmp_path, "rocmstack-health", "--node", "gpu07", REMEDIATE="yes", GPU_RESET=reset)
    assert argv[argv.index("--gpu-reset-cmd") + 1] == reset  # one argument, as the site wrote it
    assert "--remediate" in argv
    assert argv[-2:] == ["--node", "gpu07"]  # after the script's own: the last of an option wins
    assert argv[argv.index("--history") + 1] == "/var/lib/rocmstack/history"
    _parses(argv)
    assert "--remediate" not in _argv(tmp_path, "rocmstack-health", REMEDIATE="no", GPU_RESET="")


def test_installing_a_setting_a_hook_does_not_have_fails(tmp_path):
    with pytest.raises(AssertionError, match="no site setting"):
        install_hook("rocmstack-prolog", tmp_path / "p", {"REMEDIATE": "yes"})
