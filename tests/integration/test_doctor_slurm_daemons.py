"""`rocmstack doctor --slurm` against a real Slurm: Debian's slurmctld and slurmd on this machine, started
here with a generated slurm.conf (AuthType=auth/none, which Debian's slurm-wlm 22.05 builds; private ports,
state in a temporary directory), select/cons_tres and two GPUs as a gres whose gres.conf File= lines name
character devices made here. The injected fault is real: an open-file hard limit of 1024 in the hook's
process, which `nofile-limit` fails (a slurmd unit with a low LimitNOFILE passes it to every hook). The node
the doctor reads is an AMD one (a KFD topology and render nodes under --sysfs-root/--dev-root), so that
`visibility-masks` judges the masks as it does on an MI300X node, and `gpu-memory-free` reads its VRAM as the
amdgpu driver and KFD show it (mem_info_vram_*, /sys/class/kfd/kfd/proc/<pid>/vram_<gpu_id>): a job's
process holds its GPU there as a vLLM engine at its default share would."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import free_port, low_nofile
from tests.fixtures.doctor.doctor_fakes import FakeNode
from tests.fixtures.doctor.slurm_hooks import install_hook

pytestmark = pytest.mark.slow
NODE = socket.gethostname().split(".")[0]
CHECKS = "nofile-limit,visibility-masks,gpu-memory-free"
GPUS = 2
# Nodes of the same partition with no slurmd of their own: what the circuit breaker counts (no slurmd keeps
# them out of jobs: they never answer; a drain with a reason can still be set on them, as on any node rocmstack
# took out)
PEERS = tuple(f"peer{i}" for i in range(1, 10))
# An MI300X's VRAM (tests/fixtures/doctor/memory/SOURCES.md); a job's engine takes vLLM's default 0.9 of it
VRAM = 206141652992
ENGINE = int(0.9 * VRAM)
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
SlurmdParameters=config_overrides
ReturnToService=2
RebootProgram={tmp}/reboot.sh
Prolog={tmp}/prolog.sh
Epilog={tmp}/epilog.sh
NodeName={NODE} NodeAddr=127.0.0.1 CPUs={GPUS * 2} Gres=gpu:{GPUS} State=UNKNOWN
NodeName={",".join(PEERS)} NodeAddr=127.0.0.2 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
PartitionName=fleet Nodes={NODE},{",".join(PEERS)} MaxTime=INFINITE State=UP
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
    amd = FakeNode(tmp / "node", gpus=GPUS, vram_total=VRAM)  # where _hook finds it: beside slurm.conf
    fault = tmp / "fault"
    # The hooks are rocmstack's own scripts (rocmstack/doctor/hooks/, which docs/doctor-fleet.md shows) with
    # their site settings filled in. Their ROCMSTACK is a wrapper: slurmd gives a Prolog/Epilog a bare
    # environment (plus the job's GPUs), so it names the controller, the interpreter and the checkout; for
    # a hook slurmd ran it adds the PATH, the test node, the fault (fault.prolog or fault.epilog present: that hook
    # runs with the low open-file limit) and keeps each job's report as JSON
    wrapper = tmp / "rocmstack"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"export SLURM_CONF={tmp}/slurm.conf PYTHONPATH={CHECKOUT}\n"
        'case "$3" in prolog|epilog)\n'
        f"  export PATH={os.environ['PATH']}\n"
        f'  if [ -e {fault}."$3" ]; then ulimit -n 1024; fi\n'
        f'  exec {sys.executable} -m rocmstack "$@" --json {" ".join(_node_args(amd.root))} '
        f'>{tmp}/"$3"-"$SLURM_JOB_ID".json 2>>{tmp}/"$3".err ;;\n'
        "esac\n"
        f'exec {sys.executable} -m rocmstack "$@"\n'
    )
    wrapper.chmod(0o755)
    install_hook("rocmstack-prolog", tmp / "prolog.sh", _site(tmp))
    install_hook("rocmstack-epilog", tmp / "epilog.sh", _site(tmp))
    install_hook("rocmstack-health", tmp / "health.sh", _site(tmp, HISTORY=str(tmp / "health-history")))
    # RebootProgram: records the call, then restarts slurmd as a node that has just booted (its uptime a second,
    # in a time namespace of its own: slurmctld takes a reboot as done only when the boot time moved past the
    # request). slurmd runs it as root and does not wait for it.
    reboot = tmp / "reboot.sh"
    reboot.write_text(
        "#!/bin/sh\n"
        f'echo "$(date +%s) $*" >> {tmp}/reboot-calls\n'
        # a new boot of the AMD node the hooks read (--proc-root): its kernel's boot id changes
        f"mkdir -p {tmp}/node/proc/sys/kernel/random && cat /proc/sys/kernel/random/uuid "
        f"> {tmp}/node/proc/sys/kernel/random/boot_id\n"
        "setsid sh -c '"
        # a test that needs the reboot pending (REBOOT_ISSUED) holds it with this file
        f"while [ -e {tmp}/hold-reboot ]; do sleep 0.2; done; "
        f"sleep 1; kill $(cat {tmp}/slurmd.pid); sleep 1; "
        'off=$(awk "\\$1==\\"boottime\\"{print \\$2}" /proc/self/timens_offsets); '
        "up=$(cut -d. -f1 /proc/uptime); "
        f"SLURM_CONF={tmp}/slurm.conf exec unshare --time --boottime -$((up - off)) slurmd -D"
        f"' >>{tmp}/reboot.log 2>&1 </dev/null &\n"
    )
    reboot.chmod(0o755)
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
        yield env, tmp, fault, amd
    finally:
        for proc in reversed(daemons):
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        # a slurmd a reboot started is no child of this process
        with contextlib.suppress(OSError, ValueError):
            os.kill(int((tmp / "slurmd.pid").read_text()), signal.SIGTERM)


def _node_args(root: Path, *checks: str) -> list[str]:
    """The checks a hook runs (default: CHECKS, --fast) on the AMD node under ``root`` (a FakeNode's)."""
    return [
        *(checks or ("--fast", "--only", CHECKS)),
        "--sysfs-root",
        str(root / "sys"),
        "--dev-root",
        str(root / "dev"),
    ]


def _site(tmp: Path, **more: str) -> dict[str, str]:
    """The hook scripts' site settings here: the wrapper as ROCMSTACK, the node's GPUs, the breaker's file."""
    return {
        "ROCMSTACK": str(tmp / "rocmstack"),
        "GPUS": str(GPUS),
        "BREAKER": str(tmp / "breaker.json"),
        **more,
    }


def _hook(
    env: dict,
    hook: str,
    *,
    fault: bool,
    checks: tuple[str, ...] = (),
    extra: tuple[str, ...] = (),
    script: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """A hook run as slurmd would, through its installed script (the health check's: ``health.sh``, or
    ``script``), with the test node's checks and ``extra`` after the script's own options (the last wins)."""
    tmp = Path(env["SLURM_CONF"]).parent
    script = script or tmp / ("health.sh" if hook == "healthcheck" else f"{hook}.sh")
    return subprocess.run(
        [str(script), *_node_args(tmp / "node", *checks), *extra],
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


def _report(tmp: Path, hook: str, job: str) -> dict:
    """A hook's report for a job, once written: the hook drains before it prints its JSON, and an epilog
    runs on after the job's srun returns."""
    path = tmp / f"{hook}-{job}.json"
    for _ in range(120):
        with contextlib.suppress(FileNotFoundError, json.JSONDecodeError):
            return json.loads(path.read_text())
        time.sleep(0.25)
    return json.loads(path.read_text())


def _wait_state(env: dict, want_drain: bool) -> tuple[str, str]:
    for _ in range(40):
        state, reason = _node(env)
        if ("DRAIN" in state) == want_drain:
            return state, reason
        time.sleep(0.25)
    return _node(env)


def test_fault_drains_and_fix_resumes(slurm):
    env, *_ = slurm
    bad = _hook(env, "healthcheck", fault=True)
    assert bad.returncode == 0, bad.stderr  # slurmd does not read a HealthCheckProgram's exit code
    assert bad.stdout.splitlines()[0].startswith("[node_problem] rocmstack: nofile-limit: open-file limit"), (
        bad.stdout
    )
    state, reason = _node(env)
    assert "DRAIN" in state
    assert reason.startswith("[node_problem] rocmstack: nofile-limit: "), reason
    good = _hook(env, "healthcheck", fault=False)
    assert good.returncode == 0, good.stderr
    assert f"resumed node {NODE}" in good.stdout
    state, reason = _node(env)
    assert "DRAIN" not in state, (state, reason)


def test_admin_drain_is_never_resumed(slurm):
    env, *_ = slurm
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
    env, tmp, fault, _ = slurm
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
    assert reason.startswith("[node_problem] rocmstack: nofile-limit: "), (reason, _said(tmp, "prolog"))
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
    env, tmp, fault, _ = slurm
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
    assert reason.startswith("[node_problem] rocmstack: nofile-limit: "), (reason, _said(tmp, "epilog"))
    assert _hook(env, "healthcheck", fault=False).returncode == 0
    assert "DRAIN" not in _wait_state(env, want_drain=False)[0]


def test_a_resume_another_hook_made_first_is_not_an_error(slurm, monkeypatch):
    # The race of two hooks on one node: this one read "drained by rocmstack", then the Epilog resumed the
    # node before this one's resume, which the real slurmctld refuses ("Invalid node state specified").
    from rocmstack.doctor import slurm as hooks

    env, *_ = slurm
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
    env, tmp, fault, _ = slurm
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
    assert reason.startswith("[node_problem] rocmstack: nofile-limit: "), (
        state,
        reason,
        _said(tmp, "prolog"),
    )
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
    env, tmp, *_ = slurm
    _wait_idle(env)
    assert _settled(env)[0] == ("IDLE",), _node(env)
    command, word = FOREIGN[case]
    hold = tmp / "hold-reboot"  # the admin's reboot stays pending while the hooks run, however slow they are
    hold.touch()
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
        hold.unlink()
        for _ in range(120):  # the admin's reboot goes on now: let it finish before the node is restored
            if "REBOOT" not in _node(env)[0]:
                break
            time.sleep(0.25)
        if case == "maint":
            _scontrol(env, "delete", "reservationname=rocmstack-maint")
        else:
            _restore(env)
        _wait_idle(env)


def test_a_run_that_judged_nothing_neither_resumes_nor_drains(slurm):
    env, *_ = slurm
    _wait_idle(env)
    assert _hook(env, "healthcheck", fault=True).returncode == 0
    drained = _settled(env)
    assert "DRAIN" in drained[0] and drained[1].startswith("[node_problem] rocmstack: nofile-limit: "), (
        drained
    )
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
    env, *_ = slurm
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


# -- a busy node: a hook judges only the GPUs it may judge ---------------------------------------------


@contextlib.contextmanager
def _engine_job(env: dict, tmp: Path, amd: FakeNode) -> Iterator[tuple[str, int, int]]:
    """A GPU job whose process holds its GPU as an engine at a 0.9 share: (job id, pid, GPU), while it runs."""
    marker = tmp / f"engine-{time.monotonic_ns()}"
    srun = subprocess.Popen(
        [
            "srun",
            "-N1",
            "--gres=gpu:1",
            "--immediate=30",
            "sh",
            "-c",
            f'echo "$SLURM_JOB_ID $$ $SLURM_STEP_GPUS" > {marker}.part && mv {marker}.part {marker} && exec sleep 300',
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    job = ""
    pid = 0
    try:
        for _ in range(120):
            if marker.exists() or srun.poll() is not None:
                break
            time.sleep(0.25)
        assert marker.exists(), (
            srun.poll(),
            srun.stderr.read() if srun.poll() is not None else "",
            _said(tmp, "prolog"),
        )
        job, pid_text, gpu_text = marker.read_text().split()
        pid, gpu = int(pid_text), int(gpu_text)
        amd.hold(pid, gpu, ENGINE)
        yield job, pid, gpu
    finally:
        if pid:
            amd.release(pid)
        if job:
            subprocess.run(["scancel", job], env=env, capture_output=True, timeout=20)
        srun.terminate()
        srun.wait(timeout=30)


@contextlib.contextmanager
def _leftover(amd: FakeNode, gpu: int) -> Iterator[int]:
    """A process of no job (a job's engine that outlived it) holding ``gpu`` at a 0.9 share."""
    proc = subprocess.Popen(["sleep", "300"], env={"PATH": os.environ["PATH"]})
    amd.hold(proc.pid, gpu, ENGINE)
    try:
        yield proc.pid
    finally:
        amd.release(proc.pid)
        proc.kill()
        proc.wait()


def _report_of(run: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(run.stdout)


def _row(report: dict, check: str) -> dict:
    return next(c for c in report["checks"] if c["id"] == check)


def test_a_health_check_during_a_job_at_a_09_share_leaves_the_node_up(slurm):
    env, tmp, _, amd = slurm
    _wait_idle(env)
    with _engine_job(env, tmp, amd) as (job, _, gpu):
        assert gpu == 0
        run = _hook(env, "healthcheck", fault=False, checks=("--fast", "--only", CHECKS, "--json"))
        assert run.returncode == 0, run.stderr
        report = _report_of(run)
        state = _settled(env)
        assert "DRAIN" not in state[0] and "MIXED" in state[0], (state, report["slurm"])
        memory = _row(report, "gpu-memory-free")
        assert memory["status"] == "pass", memory
        assert memory["summary"].endswith("(share 0.9); 1 not judged (see details)"), memory
        assert any(
            d.startswith(f"GPU 0: in use by job {job} (176932 MiB held): not judged")
            for d in memory["details"]
        )
        assert report["slurm"]["gpus"]["in_use"] == {"0": [job]}
        assert report["slurm"]["action"] == "none"
        # the same memory held by a process of no job is a fault on a free GPU: the node is drained
        with _leftover(amd, 1) as stray:
            bad = _hook(env, "healthcheck", fault=False, checks=("--fast", "--only", CHECKS))
            state, reason = _wait_state(env, want_drain=True)
            assert reason.startswith("[user_problem] rocmstack: gpu-memory-free: 1 GPU(s) lack the memory"), (
                state,
                reason,
                bad.stdout,
            )
            assert f"pid {stray}" in reason
        good = _hook(env, "healthcheck", fault=False, checks=("--fast", "--only", CHECKS))
        assert f"resumed node {NODE}" in good.stdout, good.stdout
    _wait_idle(env)


def test_a_health_check_with_every_gpu_in_use_runs_level_1_only(slurm):
    env, tmp, _, amd = slurm
    _wait_idle(env)
    with _engine_job(env, tmp, amd) as (job_a, _, _), _engine_job(env, tmp, amd) as (job_b, _, gpu_b):
        assert gpu_b == 1
        checks = ("--level", "2", "--only", f"{CHECKS},gpu-gemm", "--json")
        run = _hook(env, "healthcheck", fault=False, checks=checks)
        assert run.returncode == 0, run.stderr
        report = _report_of(run)
        health = _row(report, "gpu-gemm")
        assert health["status"] == "skip", health
        assert health["summary"] == (
            f"every GPU is in use by a job (GPU 0: job {job_a}; GPU 1: job {job_b}): level 2 runs on free GPUs "
            "only, so level 1 only"
        )
        assert _row(report, "gpu-memory-free")["status"] == "skip"
        assert _row(report, "nofile-limit")["status"] in ("pass", "warn")  # judged: level 1 ran
        assert "DRAIN" not in _settled(env)[0]
    _wait_idle(env)


def test_on_a_shared_node_a_prolog_judges_its_own_gpu_only(slurm):
    env, tmp, _, amd = slurm
    _wait_idle(env)
    with _engine_job(env, tmp, amd) as (job_a, _, gpu_a):
        assert gpu_a == 0
        # job B is given GPU 1: job A's memory on GPU 0 is not its business
        job_b = _gpu_job(env, "sh", "-c", 'echo "$SLURM_JOB_ID $SLURM_STEP_GPUS"')
        assert job_b.returncode == 0, (job_b.stderr, _said(tmp, "prolog"), _node(env))
        b_id, b_gpu = job_b.stdout.split()
        assert b_gpu == "1"
        prolog = json.loads((tmp / f"prolog-{b_id}.json").read_text())
        assert prolog["slurm"]["action"] == "none", prolog["slurm"]
        assert prolog["slurm"]["gpus"]["judged"] == [1]
        memory = _row(prolog, "gpu-memory-free")
        assert memory["status"] == "pass", memory
        assert any(d.startswith(f"GPU 0: in use by job {job_a} (176932 MiB held)") for d in memory["details"])
        assert "DRAIN" not in _settled(env)[0]
        # job C's own GPU (1) held by a leftover: C cannot have it; the job is held back and the node drained
        with _leftover(amd, 1) as stray:
            job_c = _gpu_job(env, "true")
            assert job_c.returncode != 0, job_c.stdout
            state, reason = _wait_state(env, want_drain=True)
            assert reason.startswith("[user_problem] rocmstack: gpu-memory-free: "), (
                state,
                reason,
                _said(tmp, "prolog"),
            )
            assert f"pid {stray}" in reason, reason
        good = _hook(env, "healthcheck", fault=False, checks=("--fast", "--only", CHECKS))
        assert f"resumed node {NODE}" in good.stdout, good.stdout
    _wait_idle(env)


def test_an_epilog_names_what_the_job_left_on_its_gpu(slurm):
    env, tmp, _, amd = slurm
    _wait_idle(env)
    marker, go = tmp / "left.marker", tmp / "left.go"
    # the job starts a process in a session of its own (out of slurmstepd's process tree), then ends
    script = (
        "setsid sleep 300 </dev/null >/dev/null 2>&1 & "
        f'echo "$SLURM_JOB_ID $! $SLURM_STEP_GPUS" > {marker}.part && mv {marker}.part {marker}; '
        f"while [ ! -e {go} ]; do sleep 0.1; done"
    )
    srun = subprocess.Popen(
        ["srun", "-N1", "--gres=gpu:1", "--immediate=30", "sh", "-c", script],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pid, judged = 0, False
    try:
        for _ in range(120):
            if marker.exists():
                break
            time.sleep(0.25)
        job, pid_text, gpu = marker.read_text().split()
        pid = int(pid_text)
        amd.hold(pid, int(gpu), ENGINE)
        go.touch()
        assert srun.wait(timeout=60) == 0  # the job itself ran
        state, reason = _wait_state(env, want_drain=True)
        report = _report(tmp, "epilog", job)
        memory = _row(report, "gpu-memory-free")
        assert (
            f"GPU {gpu}: pid {pid} (sleep 300), left by Slurm job {job}, which ended, holds 176932 MiB"
            in (memory["details"])
        ), memory
        assert reason.startswith("[user_problem] rocmstack: gpu-memory-free: "), (state, reason)
        judged = True
    finally:
        if pid:
            amd.release(pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for path in (marker, go):
            path.unlink(missing_ok=True)
        if srun.poll() is None:
            srun.kill()
        if not judged:
            _restore(env)  # the next test starts from a node in service, not from this one's drain
    good = _hook(env, "healthcheck", fault=False, checks=("--fast", "--only", CHECKS))
    assert f"resumed node {NODE}" in good.stdout, good.stdout
    _wait_idle(env)


def test_an_admins_down_between_the_hooks_read_and_its_update_stays(slurm, monkeypatch):
    from rocmstack.doctor import slurm as hooks

    env, *_ = slurm
    _wait_idle(env)
    real = hooks.query
    reads: list[hooks.NodeState] = []

    def admin_acts_after_the_first_read(*args: object) -> hooks.NodeState:
        node = real(*args)  # type: ignore[arg-type]
        reads.append(node)
        if len(reads) == 1:
            _scontrol(env, "update", f"nodename={NODE}", "state=down", "reason=admin: PSU swap")
        return node

    monkeypatch.setattr(hooks, "query", admin_acts_after_the_first_read)
    failing = {"checks": [{"id": "nofile-limit", "status": "fail", "summary": "soft=1024 hard=1024"}]}
    lines: list[str] = []
    try:
        outcome = hooks.act(failing, "healthcheck", NODE, env, lines.append)
        assert outcome.action == "left-as-is", lines
        assert any(f"node {NODE} changed meanwhile (State=DOWN" in line for line in lines), lines
        state, reason = _settled(env)
        assert state[0] == "DOWN" and "DRAIN" not in state, state
        assert reason == "admin: PSU swap"
    finally:
        _restore(env)
        _wait_idle(env)


def _gauge(path: Path, name: str) -> str | None:
    """The value of a series in a node-exporter textfile (whatever its labels)."""
    line = next((x for x in path.read_text().splitlines() if x.startswith((f"{name} ", f"{name}{{"))), None)
    return None if line is None else line.rsplit(" ", 1)[1]


def test_the_circuit_breaker_holds_drains_past_the_cap_until_a_person_resets_it(slurm):
    """Ten nodes in the partition, a cap of 10 %: with one node already drained by rocmstack, a failing
    health check on this node takes it out no more; it says so loudly (exit 6, the log line, a gauge), and the
    breaker stays open after that node is back, until --breaker-reset."""
    env, tmp, *_ = slurm
    prom = tmp / "metrics"
    prom.mkdir(exist_ok=True)
    breaker = tmp / "breaker.json"
    gauges = ("--prometheus", str(prom / "doctor.prom"))
    try:
        _scontrol(env, "update", "nodename=peer1", "state=drain",
                  "reason=[node_problem] rocmstack: gpu-ecc: 3 uncorrectable ECC error(s)")  # fmt: skip
        held = _hook(env, "healthcheck", fault=True, extra=gauges)
        assert held.returncode == 6, (held.stdout, held.stderr)
        said = held.stdout
        assert (
            "circuit breaker open (1 of 10 node(s) of partition debug,fleet already drained by rocmstack (peer1)"
            in said
        )
        assert f"node {NODE} is NOT drained for [node_problem] rocmstack: nofile-limit: " in said
        assert "DRAIN" not in _node(env)[0]
        assert _gauge(prom / "doctor.prom", "rocmstack_doctor_breaker_open") == "1"
        record = json.loads(breaker.read_text())
        assert record["opened_by"] == NODE and record["held_back"].startswith(
            "[node_problem] rocmstack: nofile-limit"
        )
        # peer1 no longer out by rocmstack (an admin's drain now: a node with no slurmd cannot be resumed here):
        # the breaker stays open until a person resets it
        _scontrol(env, "update", "nodename=peer1", "reason=admin: replacing a cable")
        again = _hook(env, "healthcheck", fault=True)
        assert again.returncode == 6 and "circuit breaker open" in again.stdout
        assert "DRAIN" not in _node(env)[0]
        reset = subprocess.run(
            [sys.executable, "-m", "rocmstack", "doctor", "--breaker-reset", "--breaker-file", str(breaker)],
            env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert reset.returncode == 0 and "reset; it held: 1 of 10 node(s)" in reset.stdout, reset
        assert not breaker.exists()
        drained = _hook(env, "healthcheck", fault=True, extra=gauges)
        assert drained.returncode == 0, drained.stderr
        state, reason = _wait_state(env, want_drain=True)
        assert reason.startswith("[node_problem] rocmstack: nofile-limit: "), (state, reason)
        assert _gauge(prom / "doctor.prom", "rocmstack_doctor_breaker_open") == "0"
        assert _hook(env, "healthcheck", fault=False).returncode == 0
        assert "DRAIN" not in _wait_state(env, want_drain=False)[0]
    finally:
        breaker.unlink(missing_ok=True)
        with contextlib.suppress(subprocess.CalledProcessError):
            _scontrol(env, "update", "nodename=peer1", "reason=admin: replacing a cable")
        if "DRAIN" in _node(env)[0]:
            _scontrol(env, "update", f"nodename={NODE}", "state=resume")


def _reboots(tmp: Path) -> int:
    calls = tmp / "reboot-calls"
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def _back_down(env: dict) -> tuple[str, str]:
    """The node's state once Slurm's reboot is done (RebootProgram ran, slurmd registered again)."""
    for _ in range(120):
        state, reason = _node(env)
        if "REBOOT" not in state and "DOWN" in state:
            return state, reason
        time.sleep(0.25)
    return _node(env)


def test_a_node_problem_is_rebooted_by_slurm_and_back_in_service_only_once_its_check_passes(slurm):
    """--remediate: drained `[node_problem]`, `scontrol reboot ASAP nextstate=DOWN` (RebootProgram records the
    call and restarts slurmd), judged again; after the second reboot that did not help, it stays drained with
    "remediation did not help (2 tries)"; once the check passes, it is back in service."""
    env, tmp, *_ = slurm
    _wait_idle(env)
    fix = ("--remediate",)
    before = _reboots(tmp)
    try:
        for n in (1, 2):
            run = _hook(env, "healthcheck", fault=True, extra=fix)
            assert run.returncode == 0, run.stderr
            assert (
                f"drained node {NODE} and asked Slurm to reboot it: [node_problem] rocmstack: nofile-limit: "
                in (run.stdout)
            )
            state, reason = _back_down(env)
            assert _reboots(tmp) == before + n  # slurmd ran RebootProgram
            assert state == "DOWN", (state, reason)  # back, and out of service until a check passes
            assert f"(remediation {n} of 2: reboot) : reboot issued : reboot complete" in reason, reason
        gave_up = _hook(env, "healthcheck", fault=True, extra=fix)
        assert gave_up.returncode == 0, gave_up.stderr
        state, reason = _node(env)
        assert state == "DOWN+DRAIN" and reason.endswith("remediation did not help (2 tries)"), (
            state,
            reason,
        )
        assert _reboots(tmp) == before + 2  # no third reboot
        assert _hook(env, "healthcheck", fault=True, extra=fix).returncode == 0
        assert _reboots(tmp) == before + 2 and _node(env) == (state, reason)  # nor later
        fixed = _hook(env, "healthcheck", fault=False, extra=fix)
        assert f"resumed node {NODE} (nofile-limit passes; it was rebooted for" in fixed.stdout, fixed.stdout
        _wait_idle(env)
    finally:
        if _node(env)[0] != "IDLE":
            _restore(env)
            _wait_idle(env)


def test_a_user_problem_is_never_rebooted_and_the_sites_gpu_reset_comes_first(slurm):
    """A process holding a GPU (the user's) drains with --remediate but never reboots; a node problem on a node
    with no job runs the site's GPU reset command, and the next health check resumes the node once it passes;
    a reset command that fails is followed by Slurm's reboot."""
    env, tmp, _, amd = slurm
    _wait_idle(env)
    before = _reboots(tmp)
    resets = tmp / "reset-calls"
    # the shipped health check with the site's remediation settings
    site = install_hook(
        "rocmstack-health",
        tmp / "health-remediate.sh",
        _site(
            tmp,
            HISTORY=str(tmp / "health-history"),
            REMEDIATE="yes",
            GPU_RESET=f"sh -c 'echo reset >> {resets}'",
        ),
    )
    holder = subprocess.Popen(["sleep", "300"])
    try:
        amd.hold(holder.pid, 0, ENGINE)
        user = _hook(env, "healthcheck", fault=False, script=site)
        assert user.returncode == 0, user.stderr
        state, reason = _wait_state(env, want_drain=True)
        assert reason.startswith("[user_problem] rocmstack: gpu-memory-free: "), (state, reason)
        assert "remediation" not in reason and not resets.exists() and _reboots(tmp) == before
        amd.release(holder.pid)
        assert f"resumed node {NODE}" in _hook(env, "healthcheck", fault=False, script=site).stdout
        _wait_idle(env)
        node = _hook(env, "healthcheck", fault=True, script=site)
        assert f"drained node {NODE} and reset its GPUs (sh -c " in node.stdout, node.stdout
        state, reason = _node(env)
        assert "DRAIN" in state and reason.endswith("(remediation 1 of 2: GPU reset)"), (state, reason)
        assert resets.read_text() == "reset\n" and _reboots(tmp) == before
        back = _hook(env, "healthcheck", fault=False, script=site)
        assert f"resumed node {NODE} (nofile-limit passes; it was drained for" in back.stdout, back.stdout
        _wait_idle(env)
        # a reset that fails: Slurm's reboot at once
        failing = _hook(env, "healthcheck", fault=True, script=site, extra=("--gpu-reset-cmd", "false"))
        assert (
            "GPU reset of node" in failing.stdout and "false exited 1): rebooting instead" in failing.stdout
        )
        state, reason = _back_down(env)
        assert state == "DOWN" and "(remediation 1 of 2: reboot) : reboot issued" in reason, (state, reason)
        assert _reboots(tmp) == before + 1
        assert f"resumed node {NODE}" in _hook(env, "healthcheck", fault=False, script=site).stdout
        _wait_idle(env)
    finally:
        amd.release(holder.pid)
        holder.kill()
        holder.wait()
        if _node(env)[0] != "IDLE":
            _restore(env)
            _wait_idle(env)


def test_a_new_uncorrectable_gpu_error_between_jobs_drains_the_node_and_a_reboot_clears_it(slurm):
    """gpu-ras-events: the driver's counters against this boot's first run (--history). Two uncorrectable
    errors between jobs drain the node with the counter's own line; --remediate reboots it; the first run of the
    new boot passes and resumes it."""
    env, tmp, _, amd = slurm
    _wait_idle(env)
    ras = amd.sys / "class/drm/renderD128/device/ras"
    ras.mkdir(parents=True, exist_ok=True)
    (ras.parent / "uevent").write_text("DRIVER=amdgpu\nPCI_SLOT_NAME=0000:0c:00.0\n")
    (ras / "umc_err_count").write_text(
        "ue: 0\nce: 4\n"
    )  # the driver's format (tests/unit/test_doctor_ras.py)
    boot = amd.proc / "sys/kernel/random/boot_id"
    boot.parent.mkdir(parents=True, exist_ok=True)
    boot.write_text("7d6c0b0e-boot-1\n")
    history = tmp / "history"
    history.mkdir(mode=0o700, exist_ok=True)
    only = ("--fast", "--only", "gpu-ras-events")
    extra = ("--history", str(history), "--proc-root", str(amd.proc), "--remediate")
    try:
        first = _hook(env, "healthcheck", fault=False, checks=only, extra=extra)
        assert first.returncode == 0 and _node(env)[0] == "IDLE", (first.stdout, first.stderr)
        (ras / "umc_err_count").write_text("ue: 2\nce: 4\n")
        event = _hook(env, "healthcheck", fault=False, checks=only, extra=extra)
        assert "asked Slurm to reboot it" in event.stdout, (event.stdout, event.stderr)
        state, reason = _back_down(env)
        assert reason.startswith(
            "[node_problem] rocmstack: gpu-ras-events: 0000:0c:00.0 umc: 2 new uncorrectable error(s) (ue 0 -> 2), "
            "new since this boot's first run (remediation 1 of 2: reboot)"
        ), (state, reason)
        assert boot.read_text().strip() != "7d6c0b0e-boot-1"  # RebootProgram booted the node anew
        back = _hook(env, "healthcheck", fault=False, checks=only, extra=extra)
        assert f"resumed node {NODE} (gpu-ras-events passes; it was rebooted for" in back.stdout, back.stdout
        _wait_idle(env)
    finally:
        (ras / "umc_err_count").unlink(missing_ok=True)
        if _node(env)[0] != "IDLE":
            _restore(env)
            _wait_idle(env)
