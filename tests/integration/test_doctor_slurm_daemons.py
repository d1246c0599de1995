"""`rocmstack doctor --slurm` against a real Slurm: Debian's slurmctld and slurmd on this machine, started
here with a generated slurm.conf (AuthType=auth/none, which Debian's slurm-wlm 22.05 builds; private ports,
state in a temporary directory). The injected fault is real: an open-file hard limit of 1024 in the hook's
process, which `nofile-limit` fails (a slurmd unit with a low LimitNOFILE passes it to every hook)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import free_port, low_nofile

pytestmark = pytest.mark.slow
NODE = socket.gethostname().split(".")[0]
CHECKS = "nofile-limit"


def _conf(tmp: Path) -> str:
    return f"""ClusterName=rocmstacktest
SlurmctldHost={NODE}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation={tmp}/state
SlurmdSpoolDir={tmp}/spool
SlurmctldPidFile={tmp}/slurmctld.pid
SlurmdPidFile={tmp}/slurmd.pid
SlurmctldLogFile={tmp}/slurmctld.log
SlurmdLogFile={tmp}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/linear
MpiDefault=none
ReturnToService=2
Prolog={tmp}/prolog.sh
Epilog={tmp}/epilog.sh
NodeName={NODE} NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN
PartitionName=debug Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
"""


def _scontrol(env: dict, *args: str) -> str:
    return subprocess.run(
        ["scontrol", *args], env=env, capture_output=True, text=True, check=True, timeout=20
    ).stdout


def _node(env: dict) -> tuple[str, str]:
    from rocmstack.doctor.slurm import parse_node

    state = parse_node(_scontrol(env, "show", "node", NODE, "--oneliner"), NODE)
    return state.state, state.reason


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory):
    for tool in ("slurmctld", "slurmd", "scontrol", "srun"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed (ci/install-system-deps.sh installs slurm-wlm)")
    if os.geteuid() != 0:
        pytest.skip("slurmd runs jobs as root")
    tmp = tmp_path_factory.mktemp("slurm")
    (tmp / "state").mkdir()
    (tmp / "spool").mkdir()
    fault = tmp / "fault"
    # slurmd gives a Prolog/Epilog a bare environment: the script names the controller, the interpreter and
    # the fault (fault.prolog or fault.epilog present: that hook runs with the low open-file limit)
    for hook in ("prolog", "epilog"):
        script = tmp / f"{hook}.sh"
        script.write_text(
            "#!/bin/sh\n"
            f"export SLURM_CONF={tmp}/slurm.conf PATH={os.environ['PATH']}\n"
            f"if [ -e {fault}.{hook} ]; then ulimit -n 1024; fi\n"
            f"exec {sys.executable} -m rocmstack doctor --slurm {hook} --fast --only {CHECKS} "
            f">>{tmp}/{hook}.out 2>&1\n"
        )
        script.chmod(0o755)
    (tmp / "slurm.conf").write_text(_conf(tmp))
    env = {**os.environ, "SLURM_CONF": str(tmp / "slurm.conf")}
    daemons = [
        subprocess.Popen(
            ["slurmctld", "-D", "-i"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
    ]
    try:
        time.sleep(1)
        daemons.append(
            subprocess.Popen(["slurmd", "-D"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        )
        for _ in range(60):  # the node registers within seconds; 30 s at most
            try:
                state, _ = _node(env)
                if state == "IDLE":
                    break
            except subprocess.CalledProcessError:
                pass
            time.sleep(0.5)
        else:
            pytest.fail(f"slurmd did not register: {(tmp / 'slurmctld.log').read_text()[-2000:]}")
        yield env, tmp, fault
    finally:
        for proc in reversed(daemons):
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _hook(env: dict, hook: str, *, fault: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocmstack", "doctor", "--slurm", hook, "--fast", "--only", CHECKS],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=low_nofile if fault else None,
    )


def _wait_state(env: dict, want_drain: bool) -> tuple[str, str]:
    for _ in range(40):
        state, reason = _node(env)
        if ("DRAIN" in state) == want_drain:
            return state, reason
        time.sleep(0.25)
    return _node(env)


def test_fault_drains_and_fix_resumes(slurm):
    env, _, _ = slurm
    bad = _hook(env, "healthcheck", fault=True)
    assert bad.returncode == 0, bad.stderr  # slurmd does not read a HealthCheckProgram's exit code
    assert bad.stdout.splitlines()[0].startswith("rocmstack: nofile-limit: open-file limit"), bad.stdout
    state, reason = _node(env)
    assert "DRAIN" in state
    assert reason.startswith("rocmstack: nofile-limit: "), reason
    good = _hook(env, "healthcheck", fault=False)
    assert good.returncode == 0, good.stderr
    assert f"resumed node {NODE}" in good.stdout
    state, reason = _node(env)
    assert "DRAIN" not in state, (state, reason)


def test_admin_drain_is_never_resumed(slurm):
    env, _, _ = slurm
    _scontrol(env, "update", f"nodename={NODE}", "state=drain", "reason=admin: replacing a cable")
    try:
        good = _hook(env, "healthcheck", fault=False)
        assert good.returncode == 0, good.stderr
        state, reason = _node(env)
        assert "DRAIN" in state
        assert reason == "admin: replacing a cable"
        bad = _hook(env, "healthcheck", fault=True)  # a failure must not overwrite the admin's reason
        assert "stays drained by someone else" in bad.stdout
        state, reason = _node(env)  # (a ping may add NOT_RESPONDING for a moment: the drain is what counts)
        assert "DRAIN" in state and reason == "admin: replacing a cable"
    finally:
        _scontrol(env, "update", f"nodename={NODE}", "state=resume")


def test_prolog_failure_drains_and_holds_the_job_back(slurm):
    env, tmp, fault = slurm
    _wait_state(env, want_drain=False)
    Path(f"{fault}.prolog").touch()
    try:
        job = subprocess.run(
            ["srun", "-N1", "--immediate=30", "true"],
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
        )
    finally:
        Path(f"{fault}.prolog").unlink()
    assert job.returncode != 0, job.stdout  # the prolog's exit 1 stops the job
    state, reason = _wait_state(env, want_drain=True)
    assert "DRAIN" in state, job.stderr
    assert reason.startswith("rocmstack: nofile-limit: "), (reason, (tmp / "prolog.out").read_text())
    # the next health check passes and resumes it; a job then runs
    assert _hook(env, "healthcheck", fault=False).returncode == 0
    for _ in range(60):  # resumed; the failed job's clean-up and the node's next ping take a few seconds
        if _node(env)[0] == "IDLE":
            break
        time.sleep(0.5)
    ok = subprocess.run(["srun", "-N1", "--immediate=30", "true"], env=env, capture_output=True, timeout=90)
    assert ok.returncode == 0, ok.stderr


def _wait_idle(env: dict) -> None:
    for _ in range(60):  # resumed; the node's next ping and the last job's clean-up take a few seconds
        if _node(env)[0] == "IDLE":
            return
        time.sleep(0.5)


def test_epilog_failure_drains_after_the_job_ran(slurm):
    env, tmp, fault = slurm
    _wait_idle(env)
    Path(f"{fault}.epilog").touch()
    try:
        job = subprocess.run(
            ["srun", "-N1", "--immediate=30", "true"], env=env, capture_output=True, timeout=90
        )
        state, reason = _wait_state(env, want_drain=True)
    finally:
        Path(f"{fault}.epilog").unlink()
    assert job.returncode == 0, job.stderr  # the job itself ran; the node is drained after it
    assert "DRAIN" in state
    assert reason.startswith("rocmstack: nofile-limit: "), (reason, (tmp / "epilog.out").read_text())
    assert _hook(env, "healthcheck", fault=False).returncode == 0
    assert "DRAIN" not in _wait_state(env, want_drain=False)[0]


def test_a_resume_another_hook_made_first_is_not_an_error(slurm, monkeypatch):
    # The race of two hooks on one node: this one read "drained by rocmstack", then the Epilog resumed the
    # node before this one's resume, which the real slurmctld refuses ("Invalid node state specified").
    from rocmstack.doctor import slurm as hooks

    env, _, _ = slurm
    _wait_state(env, want_drain=False)
    text = (
        Path(__file__).resolve().parents[1] / "fixtures/doctor/slurm/scontrol-show-node-drained-22.05.8.txt"
    )
    stale = hooks.parse_node(
        text.read_text().replace("Reason=admin: replacing a cable", "Reason=rocmstack: nofile-limit: low"),
        NODE,
    )
    real = hooks.query
    reads = iter([stale])
    monkeypatch.setattr(hooks, "query", lambda name, e: next(reads, None) or real(name, e))
    lines: list[str] = []
    outcome = hooks.act({"checks": []}, "healthcheck", NODE, env, lines.append)
    assert (outcome.action, outcome.exit_code) == ("none", 0), lines
    assert lines == [f"rocmstack: node {NODE} was resumed meanwhile (checks pass)"]
    assert "DRAIN" not in _node(env)[0]
