"""rocmstack.doctor.hook: the doctor run as a Slurm hook around its checks, with a recorded scontrol."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from rocmstack.doctor import hook
from rocmstack.doctor.slurm import Breaker
from rocmstack.errors import InputError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures/doctor/slurm"


def _scontrol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, node: str, jobs: str) -> Path:
    """An scontrol that answers from the recorded 22.05.8 outputs and keeps each call's arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    script = bin_dir / "scontrol"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {calls}\n'
        'case "$1 $2" in\n'
        f'  "show node") cat {FIXTURES}/scontrol-show-node-{node}-22.05.8.txt;;\n'
        f'  "show job") cat {FIXTURES}/scontrol-show-job-d-{jobs}-22.05.8.txt;;\n'
        f'  "listpids ") cat {FIXTURES}/scontrol-listpids-two-jobs-22.05.8.txt;;\n'
        "esac\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return calls


def _syslog(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(ident, line) of each line the hook would write to syslog, kept here instead."""
    written: list[tuple[str, str]] = []
    monkeypatch.setattr(hook, "syslog_writer", lambda name: lambda line: written.append((name, line)))
    return written


def test_the_fleet_flags_refuse_what_they_cannot_mean(tmp_path):
    given = {
        "breaker_share": 0.1,
        "breaker_max": None,
        "breaker_file": tmp_path / "breaker.json",
        "remediate": False,
        "remediate_tries": 2,
        "gpu_reset_cmd": None,
    }
    breaker, remedy = hook.fleet_settings(**given)
    assert breaker == Breaker(file=tmp_path / "breaker.json") and remedy is None
    _, remedy = hook.fleet_settings(**{**given, "remediate": True, "gpu_reset_cmd": "amd-smi reset -G"})
    assert remedy is not None and remedy.gpu_reset == ("amd-smi", "reset", "-G")
    for bad, message in (
        ({"breaker_share": 0.0}, "--breaker-share 0 is not a share"),
        ({"breaker_max": 0}, "--breaker-max 0 is below 1"),
        ({"remediate_tries": 0}, "--remediate-tries 0 is below 1"),
        ({"gpu_reset_cmd": " "}, "--gpu-reset-cmd is empty"),
    ):
        with pytest.raises(InputError, match=message):
            hook.fleet_settings(**{**given, **bad})


def test_the_hook_takes_the_jobs_allocation_out_of_the_environment(monkeypatch):
    monkeypatch.setenv("ROCR_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("SLURM_JOB_GPUS", "0")
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1")  # never set by slurmd: the node's own
    started = hook.start("prolog", "vm", Breaker(), None, as_json=False, budget_s=10.0)
    assert started.allocation == {"ROCR_VISIBLE_DEVICES": "0", "SLURM_JOB_GPUS": "0"}
    assert "ROCR_VISIBLE_DEVICES" not in os.environ and "SLURM_JOB_GPUS" not in os.environ
    assert os.environ["HIP_VISIBLE_DEVICES"] == "1"
    assert started.deadline is not None and 0 < started.deadline - time.monotonic() <= 10.0
    assert hook.start("healthcheck", None, Breaker(), None, as_json=False, budget_s=None).deadline is None


def test_a_failed_healthcheck_drains_the_node_and_says_so(tmp_path, monkeypatch, capsys):
    calls = _scontrol(tmp_path, monkeypatch, "idle", "completed")
    syslog = _syslog(monkeypatch)
    breaker = Breaker(max_share=1.0, file=tmp_path / "breaker.json")
    started = hook.start("healthcheck", "vm", breaker, None, as_json=False, budget_s=None)
    scope = hook.read_gpus(started)
    assert scope.running == frozenset() and scope.judged is None
    report = {"checks": [{"id": "nofile-limit", "status": "fail", "summary": "open-file limit soft=1024"}]}
    code = hook.finish(started, scope, report, prometheus=None, allow_shared_dir=False)
    assert code == 0  # slurmd does not read a HealthCheckProgram's exit code; the drain is the answer
    assert report["slurm"]["hook"] == "healthcheck" and report["slurm"]["action"] == "drained"
    assert report["slurm"]["breaker"] == {"open": False, "file": str(breaker.file), "record": None}
    assert report["slurm"]["lines"] == ["[node_problem] rocmstack: nofile-limit: open-file limit soft=1024"]
    out = capsys.readouterr().out.splitlines()
    assert out[0] == report["slurm"]["lines"][0] and out[-1].startswith("rocmstack: drained node vm: ")
    assert syslog == [("healthcheck", line) for line in out]  # the same lines, to syslog too
    assert any(line.startswith("update nodename=vm state=drain") for line in calls.read_text().splitlines())


def test_with_json_the_report_alone_is_on_stdout(tmp_path, monkeypatch, capsys):
    import json

    _scontrol(tmp_path, monkeypatch, "idle", "completed")
    syslog = _syslog(monkeypatch)
    started = hook.start("epilog", "vm", Breaker(file=tmp_path / "b.json"), None, as_json=True, budget_s=None)
    report = {"checks": [{"id": "nofile-limit", "status": "pass", "summary": "ok"}]}
    assert hook.finish(started, hook.read_gpus(started), report, None, False) == 0
    assert json.loads(capsys.readouterr().out)["slurm"]["action"] == report["slurm"]["action"]
    assert all(name == "epilog" for name, _ in syslog)  # its lines go to syslog only
