"""`rocmstack doctor --slurm` against a real Slurm: Debian's slurmctld and slurmd on this machine, started
here with a generated slurm.conf (AuthType=auth/none, which Debian's slurm-wlm 22.05 builds; private ports,
state in a temporary directory), select/cons_tres and two GPUs as a gres whose gres.conf File= lines name
character devices made here. The injected fault is real: an open-file hard limit of 1024 in the hook's
process, which `nofile-limit` fails (a slurmd unit with a low LimitNOFILE passes it to every hook). The node
the doctor reads is an AMD one (a KFD topology and render nodes under --sysfs-root/--dev-root), so that
`visibility-masks` judges the masks as it does on an MI300X node."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import free_port, low_nofile
from tests.fixtures.doctor.doctor_fakes import FakeNode

pytestmark = pytest.mark.slow
NODE = socket.gethostname().split(".")[0]
CHECKS = "nofile-limit,visibility-masks"
GPUS = 2
CHECKOUT = Path(__file__).resolve().parents[2]  # the rocmstack under test, whatever slurmd's directory


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
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MpiDefault=none
ReturnToService=2
RebootProgram=/bin/true
Prolog={tmp}/prolog.sh
Epilog={tmp}/epilog.sh
NodeName={NODE} NodeAddr=127.0.0.1 CPUs=1 Gres=gpu:{GPUS} State=UNKNOWN
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
    (tmp / "gres").mkdir()
    for i in range(GPUS):  # what gres.conf's File= names: character devices (here /dev/null's numbers)
        os.mknod(tmp / f"gres/renderD{128 + i}", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    (tmp / "gres.conf").write_text(
        f"NodeName={NODE} Name=gpu File={tmp}/gres/renderD[128-{128 + GPUS - 1}]\n"
    )
    amd = FakeNode(tmp / "node", gpus=GPUS)  # where _hook finds it: beside slurm.conf
    fault = tmp / "fault"
    # slurmd gives a Prolog/Epilog a bare environment (plus the job's GPUs): the script names the
    # controller, the interpreter, the checkout and the fault (fault.prolog or fault.epilog present: that
    # hook runs with the low open-file limit); each job's report is kept as JSON
    for hook in ("prolog", "epilog"):
        script = tmp / f"{hook}.sh"
        script.write_text(
            "#!/bin/sh\n"
            f"export SLURM_CONF={tmp}/slurm.conf PATH={os.environ['PATH']} PYTHONPATH={CHECKOUT}\n"
            f"if [ -e {fault}.{hook} ]; then ulimit -n 1024; fi\n"
            f"exec {sys.executable} -m rocmstack doctor --slurm {hook} --json {' '.join(_node_args(amd.root))} "
            f">{tmp}/{hook}-$SLURM_JOB_ID.json 2>>{tmp}/{hook}.err\n"
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


def _node_args(root: Path, *checks: str) -> list[str]:
    """The checks a hook runs (default: CHECKS, --fast) on the AMD node under ``root`` (a FakeNode's)."""
    return [
        *(checks or ("--fast", "--only", CHECKS)),
        "--sysfs-root",
        str(root / "sys"),
        "--dev-root",
        str(root / "dev"),
    ]


def _hook(
    env: dict, hook: str, *, fault: bool, checks: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    root = Path(env["SLURM_CONF"]).parent / "node"
    return subprocess.run(
        [sys.executable, "-m", "rocmstack", "doctor", "--slurm", hook, *_node_args(root, *checks)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=low_nofile if fault else None,
    )


def _said(tmp: Path, hook: str) -> str:
    """What the hook's runs said: stderr, and each job's slurm block."""
    runs = [
        json.loads(p.read_text()).get("slurm") for p in sorted(tmp.glob(f"{hook}-*.json")) if p.stat().st_size
    ]
    return f"{(tmp / f'{hook}.err').read_text() if (tmp / f'{hook}.err').exists() else ''}{runs}"


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
        assert f"node {NODE} is left as it is" in bad.stdout, bad.stdout
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
    assert reason.startswith("rocmstack: nofile-limit: "), (reason, _said(tmp, "prolog"))
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
    assert reason.startswith("rocmstack: nofile-limit: "), (reason, _said(tmp, "epilog"))
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
    monkeypatch.setattr(hooks, "query", lambda *args: next(reads, None) or real(*args))
    lines: list[str] = []
    passed = {"checks": [{"id": "nofile-limit", "status": "pass", "summary": "soft=1048576"}]}
    outcome = hooks.act(passed, "healthcheck", NODE, env, lines.append)
    assert (outcome.action, outcome.exit_code) == ("none", 0), lines
    assert lines == [f"rocmstack: node {NODE} was resumed meanwhile (checks pass)"]
    assert "DRAIN" not in _node(env)[0]


def _settled(env: dict) -> tuple[tuple[str, ...], str]:
    """The node's state words and reason, less the NOT_RESPONDING a missed ping adds for a moment."""
    state, reason = _node(env)
    return tuple(w for w in state.split("+") if w != "NOT_RESPONDING"), reason


def _gpu_job(env: dict, *cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["srun", "-N1", "--gres=gpu:1", "--immediate=30", *cmd],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )


def test_a_gpu_jobs_prolog_judges_the_node_not_the_jobs_gpus(slurm):
    # slurmd puts the job's GPUs into the Prolog's environment (ROCR_VISIBLE_DEVICES without
    # HIP_VISIBLE_DEVICES, which visibility-masks fails on an AMD node): that is the job's allocation.
    env, tmp, fault = slurm
    _wait_idle(env)
    job = _gpu_job(env, "sh", "-c", 'echo "$SLURM_JOB_ID $ROCR_VISIBLE_DEVICES"')
    assert job.returncode == 0, (job.stderr, _said(tmp, "prolog"), _node(env))
    job_id, gpus = job.stdout.split()
    assert gpus == "0"  # the job did get a GPU
    assert "DRAIN" not in _node(env)[0]
    report = json.loads((tmp / f"prolog-{job_id}.json").read_text())
    assert report["slurm"]["action"] == "none", report["slurm"]
    # what slurmd set, kept as the job's allocation; the checks judged the node without it
    assert report["slurm"]["allocation"] == {
        "CUDA_VISIBLE_DEVICES": "0",
        "ROCR_VISIBLE_DEVICES": "0",
        "ZE_AFFINITY_MASK": "0",
        "GPU_DEVICE_ORDINAL": "0",
        "SLURM_JOB_GPUS": "0",
    }
    statuses = {c["id"]: c["status"] for c in report["checks"]}
    assert statuses["visibility-masks"] == "pass", report["checks"]
    # a real fault in the same GPU job's Prolog still drains the node and holds the job back
    Path(f"{fault}.prolog").touch()
    try:
        bad = _gpu_job(env, "true")
    finally:
        Path(f"{fault}.prolog").unlink()
    assert bad.returncode != 0, bad.stdout
    state, reason = _wait_state(env, want_drain=True)
    assert reason.startswith("rocmstack: nofile-limit: "), (state, reason, _said(tmp, "prolog"))
    assert _hook(env, "healthcheck", fault=False).returncode == 0
    _wait_idle(env)


def _restore(env: dict) -> None:
    _scontrol(env, "update", f"nodename={NODE}", "state=down", "reason=restore")
    _scontrol(env, "update", f"nodename={NODE}", "state=resume")


# Each state someone else sets: how to set it, the state word it shows, how to undo it.
FOREIGN = {
    "down": (("update", f"nodename={NODE}", "state=down", "reason=admin: PSU swap"), "DOWN"),
    "fail": (("update", f"nodename={NODE}", "state=fail", "reason=admin: failing DIMM"), "FAIL"),
    "maint": (
        (
            "create",
            "reservation",
            "reservationname=rocmstack-maint",
            "starttime=now",
            "duration=10",
            f"nodes={NODE}",
            "users=root",
            "flags=maint",
        ),
        "MAINTENANCE",
    ),
    "reboot": (("reboot", "reason=admin: firmware update", NODE), "REBOOT_ISSUED"),
    "other-drain": (("update", f"nodename={NODE}", "state=drain", "reason=nhc: eth0 down"), "DRAIN"),
}


@pytest.mark.parametrize("case", sorted(FOREIGN))
def test_a_state_someone_else_set_is_never_overwritten_nor_resumed(slurm, case):
    env, _, _ = slurm
    _wait_idle(env)
    assert _settled(env)[0] == ("IDLE",), _node(env)
    command, word = FOREIGN[case]
    _scontrol(env, *command)
    try:
        for _ in range(120):  # a maintenance reservation reaches the node within a minute
            if word in _settled(env)[0]:
                break
            time.sleep(0.5)
        before = _settled(env)
        assert word in before[0], before
        bad = _hook(env, "healthcheck", fault=True)
        assert bad.returncode == 0, bad.stderr
        assert _settled(env) == before, bad.stdout
        assert f"node {NODE} is left as it is: State=" in bad.stdout, bad.stdout
        good = _hook(env, "healthcheck", fault=False)
        assert good.returncode == 0, good.stderr
        assert "resumed" not in good.stdout
        assert _settled(env) == before
    finally:
        if case == "maint":
            _scontrol(env, "delete", "reservationname=rocmstack-maint")
        else:
            _restore(env)
        _wait_idle(env)


def test_a_run_that_judged_nothing_neither_resumes_nor_drains(slurm):
    env, _, _ = slurm
    _wait_idle(env)
    assert _hook(env, "healthcheck", fault=True).returncode == 0
    drained = _settled(env)
    assert "DRAIN" in drained[0] and drained[1].startswith("rocmstack: nofile-limit: "), drained
    try:
        # the fault is still there; a budget that fits no check skips every one
        empty = _hook(env, "healthcheck", fault=True, checks=("--budget", "0.1s"))
        assert empty.returncode == 0, empty.stderr
        assert "the run judged nothing" in empty.stdout, empty.stdout
        assert _settled(env) == drained
        # a run that passes, but without the check that drained the node, does not resume it either
        other = _hook(env, "healthcheck", fault=True, checks=("--fast", "--only", "visibility-masks"))
        assert "stays drained: nofile-limit, which drained it, did not run" in other.stdout, other.stdout
        assert _settled(env) == drained
    finally:
        good = _hook(env, "healthcheck", fault=False)
        assert f"resumed node {NODE}" in good.stdout, good.stdout
        _wait_idle(env)


def test_scontrol_never_outlives_the_budget(slurm, tmp_path):
    env, _, _ = slurm
    _wait_idle(env)
    (tmp_path / "bin").mkdir()
    wrapper = tmp_path / "bin/scontrol"  # a slurmctld that answers after 30 s
    wrapper.write_text(f'#!/bin/sh\nsleep 30\nexec {shutil.which("scontrol")} "$@"\n')
    wrapper.chmod(0o755)
    slow = {**env, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{env['PATH']}"}
    started = time.monotonic()
    run = _hook(slow, "healthcheck", fault=True, checks=("--budget", "3s", "--fast", "--only", CHECKS))
    took = time.monotonic() - started
    assert run.returncode == 4, (run.stdout, run.stderr)  # EngineError: slurmctld out of reach in time
    assert "scontrol show node did not answer in" in run.stderr, run.stderr
    assert took < 3 + 4, took  # the budget, and the interpreter's start before it is counted
    assert "DRAIN" not in _node(env)[0]
