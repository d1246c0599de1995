"""docs/doctor-fleet.md's one-machine Slurm set-up is the one the daemon tests run: the same slurm.conf
settings (less the GPUs, the Epilog, the reboot program and the extra CPUs those tests also exercise), a
Prolog line that names the script the page shows, and doctor commands the CLI accepts."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import typer.main

from rocmstack.cli import make_app
from tests.integration.test_doctor_slurm_daemons import _conf

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "doctor-fleet.md"


def _section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    return text.split("### Trying the hooks on one machine", 1)[1].split("\n### ", 1)[0]


def _keys(conf: str) -> set[str]:
    return {line.split("=", 1)[0] for line in conf.splitlines() if "=" in line and not line.startswith("#")}


def test_the_pages_slurm_conf_is_the_tested_one(tmp_path):
    section = _section()
    (conf,) = re.findall(r"^```text\n(.*?)^```", section, flags=re.S | re.M)
    # the tests also run two GPU jobs at once on a 2-core machine (SlurmdParameters=config_overrides)
    assert _keys(_conf(tmp_path)) - _keys(conf) == {
        "GresTypes",
        "RebootProgram",
        "Epilog",
        "SlurmdParameters",
    }
    assert _keys(conf) <= _keys(_conf(tmp_path))
    (prolog,) = re.findall(r"^Prolog=(\S+)$", conf, flags=re.M)
    assert prolog == "/var/tmp/slurm-try/prolog.sh"
    assert "apt-get install slurmctld slurmd slurm-client" in section  # ci/install-system-deps.sh's packages


def test_the_pages_doctor_commands_parse():
    section = _section()
    lines = re.findall(r"(?:exec |sudo -E |; exec )(\S*/rocmstack doctor [^'\n]*)", section)
    assert len(lines) == 3, lines
    command = typer.main.get_command(make_app())
    for line in lines:
        words = shlex.split(line)[1:]
        ctx = command.make_context("rocmstack", list(words), resilient_parsing=False)
        sub = command.get_command(ctx, words[0])
        assert sub is not None
        sub.make_context("doctor", words[1:])  # raises on an unknown option or a bad value
