"""The Slurm hook's pure parts: reading `scontrol show node -o`, `show job -d -o` and `listpids` (verbatim
from Debian's slurm-wlm 22.05.8, recorded by tests/integration/test_doctor_slurm_daemons.py's set-up), the
reason lines, the node name, what a hook decides for each state, and scontrol's time limit."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from rocmstack.doctor.model import GpuScope
from rocmstack.doctor.slurm import (
    REASON_MAX,
    Breaker,
    Job,
    NodeState,
    Remedy,
    act,
    decide,
    expand_hostlist,
    failure_lines,
    gres_tracks_gpus,
    index_list,
    job_allocation,
    judged_nothing,
    node_name,
    open_breaker,
    out_by_us,
    parse_fleet,
    parse_jobs,
    parse_listpids,
    parse_node,
    reset_breaker,
    scope_lines,
    scope_report,
)
from rocmstack.errors import EngineError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures/doctor/slurm"


def test_an_admin_drain_is_read_without_slurms_user_and_time():
    node = parse_node((FIXTURES / "scontrol-show-node-drained-22.05.8.txt").read_text(), "vm")
    assert node.state == "IDLE+DRAIN"
    assert node.reason == "admin: replacing a cable"
    assert node.drained and not node.drained_by_us


def test_an_idle_node_has_no_reason():
    node = parse_node((FIXTURES / "scontrol-show-node-idle-22.05.8.txt").read_text(), "vm")
    assert (node.state, node.reason, node.drained) == ("IDLE", "", False)


def test_our_own_drain_is_told_by_its_prefix():
    text = (FIXTURES / "scontrol-show-node-drained-22.05.8.txt").read_text()
    ours = text.replace(
        "Reason=admin: replacing a cable", "Reason=rocmstack: gpu-ecc: 3 uncorrectable ECC error(s)"
    )
    node = parse_node(ours, "vm")
    assert node.drained_by_us and node.reason == "rocmstack: gpu-ecc: 3 uncorrectable ECC error(s)"


def test_one_bounded_printable_line_per_failure():
    report = {
        "checks": [
            {
                "id": "gpu-ecc",
                "status": "fail",
                "summary": "3 uncorrectable\nECC error(s)",
                "problem": "node",
            },
            {"id": "ray-env", "status": "pass", "summary": "fine"},
            {"id": "dev-shm", "status": "error", "summary": "x" * 500, "problem": "user"},
        ]
    }
    lines = failure_lines(report)
    assert lines[0] == "[node_problem] rocmstack: gpu-ecc: 3 uncorrectable\\nECC error(s)"
    assert lines[1].startswith("[user_problem] rocmstack: dev-shm: xxx") and len(lines[1]) == REASON_MAX
    assert len(lines) == 2


def test_a_tagged_reason_and_an_untagged_one_of_an_earlier_release_are_both_ours():
    tagged = NodeState("vm", "IDLE+DRAIN", "[user_problem] rocmstack: gpu-memory-free: 1 GPU(s) lack")
    assert tagged.drained_by_us and tagged.drained_for == "gpu-memory-free" and tagged.problem == "user"
    old = NodeState("vm", "IDLE+DRAIN", "rocmstack: nofile-limit: open-file limit soft=1024")
    assert old.drained_by_us and old.drained_for == "nofile-limit" and old.problem is None
    theirs = NodeState("vm", "IDLE+DRAIN", "[node_problem] admin: cable")
    assert not theirs.drained_by_us and theirs.problem is None
    resumed = decide(_report(gpu_memory_free="pass"), tagged)
    assert (
        resumed.action == "resume" and "it was drained for gpu-memory-free: 1 GPU(s) lack)" in resumed.message
    )


def test_node_name_prefers_the_option_then_slurmd():
    assert node_name("gpu07", {"SLURMD_NODENAME": "gpu01"}) == "gpu07"
    assert node_name(None, {"SLURMD_NODENAME": "gpu01"}) == "gpu01"
    assert "." not in node_name(None, {})


# `scontrol show node vm -o` from the real slurmctld 22.05.8 (select/cons_tres, two GPUs as a gres) after
# `scontrol update state=down reason=...`, `state=fail`, a reservation with flags=maint, and `scontrol reboot`
# on the idle node and on one running a job.
_HEAD = (
    "NodeName=vm Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=0.28 "
    "AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:2 NodeAddr=127.0.0.1 NodeHostName=vm "
    "Version=22.05.8 OS=Linux 6.18.44-fc-v1098 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=1 AllocMem=0 "
)
_TAIL = (
    " ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=debug  "
    "BootTime=2026-12-02T11:44:41 SlurmdStartTime=2026-12-02T13:02:42 LastBusyTime=2026-12-02T13:02:52 "
    "CfgTRES=cpu=1,mem=1M,billing=1 AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatts=0 "
    "ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s"
)
SHOWN = {
    "down": _HEAD
    + "FreeMem=22199 Sockets=1 Boards=1 State=DOWN"
    + _TAIL
    + " Reason=admin: PSU swap [root@2026-12-02T13:02:57]",
    "fail": _HEAD
    + "FreeMem=22158 Sockets=1 Boards=1 State=IDLE+FAIL"
    + _TAIL
    + " Reason=admin: failing DIMM [root@2026-12-02T13:03:01]",
    "maint": _HEAD + "FreeMem=22158 Sockets=1 Boards=1 State=IDLE+MAINTENANCE+RESERVED" + _TAIL,
    "reboot-issued": _HEAD
    + "FreeMem=22158 Sockets=1 Boards=1 State=DOWN+REBOOT_ISSUED"
    + _TAIL
    + " Reason=admin: firmware update : reboot issued [root@2026-12-02T13:03:26]",
    "reboot-requested": _HEAD.replace("CPUAlloc=0", "CPUAlloc=1")
    + "FreeMem=21304 Sockets=1 Boards=1 State=ALLOCATED+REBOOT_REQUESTED"
    + _TAIL.replace("AllocTRES=", "AllocTRES=cpu=1")
    + " Reason=admin: firmware update [root@2026-12-02T13:03:44]",
}
FOREIGN = {
    "down": ("DOWN",),
    "fail": ("FAIL",),
    "maint": ("MAINTENANCE",),
    "reboot-issued": ("DOWN", "REBOOT_ISSUED"),
    "reboot-requested": ("REBOOT_REQUESTED",),
}


def _report(**statuses: str) -> dict:
    return {
        "checks": [
            {"id": cid.replace("_", "-"), "status": st, "summary": f"{st} here"}
            for cid, st in statuses.items()
        ]
    }


def _ours(check: str, state: str = "IDLE+DRAIN") -> NodeState:
    return NodeState("vm", state, f"rocmstack: {check}: open-file limit soft=1024")


@pytest.mark.parametrize("case", sorted(SHOWN))
def test_a_state_someone_else_set_is_read_as_theirs(case):
    node = parse_node(SHOWN[case], "vm")
    assert node.foreign == FOREIGN[case]
    assert not node.drained_by_us


@pytest.mark.parametrize("case", sorted(SHOWN))
def test_a_state_someone_else_set_is_neither_drained_nor_resumed(case):
    node = parse_node(SHOWN[case], "vm")
    for report in (_report(nofile_limit="fail"), _report(nofile_limit="pass")):
        decision = decide(report, node)
        assert decision.action == "left-as-is", decision
        assert decision.message.startswith(f"rocmstack: node vm is left as it is: State={node.state} (")


def test_our_own_drain_under_an_admins_down_or_maintenance_is_left_too():
    for state in ("DOWN+DRAIN", "IDLE+DRAIN+MAINTENANCE+RESERVED", "IDLE+DRAIN+FAIL"):
        assert decide(_report(nofile_limit="pass"), _ours("nofile-limit", state)).action == "left-as-is"


def test_another_tools_drain_is_left_as_it_is():
    node = NodeState("vm", "IDLE+DRAIN", "nhc: eth0 down")
    assert decide(_report(nofile_limit="fail"), node).action == "left-as-is"
    assert decide(_report(nofile_limit="pass"), node).action == "left-as-is"


def test_a_node_in_service_is_drained_on_a_failure_only():
    for state in ("IDLE", "MIXED", "ALLOCATED+COMPLETING", "IDLE+NOT_RESPONDING", "IDLE+RESERVED"):
        node = NodeState("vm", state, "")
        assert decide(_report(nofile_limit="fail"), node).action == "drain", state
        assert decide(_report(nofile_limit="pass"), node).action == "none", state


def test_a_run_that_judged_nothing_neither_drains_nor_resumes():
    assert judged_nothing({"checks": []}) and judged_nothing(_report(nofile_limit="skip", dev_shm="skip"))
    assert not judged_nothing(_report(nofile_limit="skip", dev_shm="error"))
    for node in (_ours("nofile-limit"), NodeState("vm", "IDLE", "")):
        decision = decide(_report(nofile_limit="skip", dev_shm="skip"), node)
        assert decision.action == "judged-nothing"
        assert "judged nothing (2 check(s), none ran)" in decision.message


def test_judged_nothing_asks_slurmctld_nothing():
    lines: list[str] = []
    env = {"PATH": "/nonexistent"}  # no scontrol: any call would raise
    outcome = act(_report(nofile_limit="skip"), "prolog", "vm", env, lines.append)
    assert (outcome.action, outcome.exit_code) == ("judged-nothing", 0)
    assert lines == [
        "rocmstack: the run judged nothing (1 check(s), none ran): node vm is neither drained nor resumed"
    ]


def test_resuming_needs_the_check_that_drained_the_node_to_pass_in_this_run():
    node = _ours("nofile-limit")
    assert node.drained_for == "nofile-limit"
    kept = decide(_report(visibility_masks="pass"), node)
    assert kept.action == "kept-drained"
    assert kept.message == (
        "rocmstack: node vm stays drained: nofile-limit, which drained it, did not run in this run"
    )
    assert decide(_report(visibility_masks="pass", nofile_limit="skip"), node).action == "kept-drained"
    assert decide(_report(nofile_limit="pass"), node).action == "resume"
    assert decide(_report(nofile_limit="warn", dev_shm="skip"), node).action == "resume"
    # our prefix without a check id in it: nothing says what would clear it
    assert decide(_report(nofile_limit="pass"), NodeState("vm", "IDLE+DRAIN", "rocmstack: ")).action == (
        "kept-drained"
    )


def test_a_new_failure_keeps_the_check_that_drained_the_node_named():
    node = _ours("nofile-limit")
    # the check that drained it did not run: the reason stays as it is
    assert decide(_report(dev_shm="fail", nofile_limit="skip"), node).action == "kept-drained"
    # it failed again after another one: it stays first in the reason
    again = decide(_report(dev_shm="fail", nofile_limit="fail"), node)
    assert again.action == "drain"
    assert again.message == "[node_problem] rocmstack: nofile-limit: fail here (+1 more)"


def test_only_the_jobs_gpu_variables_are_the_allocation():
    env = {
        "ROCR_VISIBLE_DEVICES": "0",
        "CUDA_VISIBLE_DEVICES": "0",
        "GPU_DEVICE_ORDINAL": "0",
        "ZE_AFFINITY_MASK": "0",
        "SLURM_JOB_GPUS": "0",
        "HIP_VISIBLE_DEVICES": "1",  # never set by slurmd: the node's (or the admin's) own
        "SLURM_JOB_ID": "7",
    }
    slurmd_sets = (
        "CUDA_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "ZE_AFFINITY_MASK",
        "GPU_DEVICE_ORDINAL",
        "SLURM_JOB_GPUS",
    )
    assert job_allocation(env) == dict.fromkeys(slurmd_sets, "0")


def _slow_scontrol(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "bin").mkdir()
    script = tmp_path / "bin/scontrol"
    script.write_text(f"#!/bin/sh\ntouch {tmp_path}/called\nsleep 30\n")
    script.chmod(0o755)
    return {"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_scontrol_ends_by_the_deadline(tmp_path):
    env = _slow_scontrol(tmp_path)
    started = time.monotonic()
    with pytest.raises(EngineError, match=r"scontrol show node did not answer in 0\.[45]"):
        act(_report(nofile_limit="fail"), "healthcheck", "vm", env, lambda _: None, started + 0.5)
    assert time.monotonic() - started < 5  # not SCONTROL_TIMEOUT (20 s), nor the wrapper's 30 s


def test_no_scontrol_call_once_the_budget_is_spent(tmp_path):
    env = _slow_scontrol(tmp_path)
    with pytest.raises(EngineError, match="no time left"):
        act(_report(nofile_limit="fail"), "healthcheck", "vm", env, lambda _: None, time.monotonic() - 1)
    assert not (tmp_path / "called").exists()


def test_the_resume_line_says_rocmstack_once():
    # The drain reason starts with "rocmstack: " too: quoted whole, the line read "rocmstack: rocmstack: ...".
    decision = decide(_report(nofile_limit="pass"), _ours("nofile-limit"))
    assert decision.action == "resume"
    assert decision.message == (
        "rocmstack: resumed node vm (nofile-limit passes; it was drained for nofile-limit: open-file limit "
        "soft=1024)"
    )
    assert decision.message.count("rocmstack:") == 1


# -- what a hook may judge: the jobs on this node and their GPUs ----------------------------------------


def test_running_jobs_and_the_gpus_slurm_gave_them_on_this_node():
    text = (FIXTURES / "scontrol-show-job-d-two-gpu-jobs-22.05.8.txt").read_text()
    assert parse_jobs(text, "vm") == [Job("1", "RUNNING", (0,)), Job("2", "RUNNING", (1,))]
    assert parse_jobs(text, "gpu07") == []  # not on this node


def test_a_completed_job_holds_nothing():
    text = (FIXTURES / "scontrol-show-job-d-completed-22.05.8.txt").read_text()
    assert "JobState=COMPLETED" in text and "GRES= " in text  # what it says once the jobs ended
    assert parse_jobs(text, "vm") == []


def test_a_job_over_several_nodes_with_a_typed_gres():
    # scontrol show job -d's group per node set; a typed GRES ("gpu:TYPE:N(IDX:...)") and a second GRES
    line = (
        "JobId=77 JobName=grpo UserId=lab(1000) JobState=RUNNING Reason=None NodeList=gpu[01-02,07] "
        "Nodes=gpu[01-02] CPU_IDs=0-31 Mem=0 GRES=gpu:mi300x:2(IDX:0-1),nic:1(IDX:0) "
        "Nodes=gpu07 CPU_IDs=0-15 Mem=0 GRES=gpu:mi300x:3(IDX:4,6-7) Features=(null)"
    )
    assert parse_jobs(line, "gpu02") == [Job("77", "RUNNING", (0, 1))]
    assert parse_jobs(line, "gpu07") == [Job("77", "RUNNING", (4, 6, 7))]
    assert parse_jobs(line.replace("RUNNING", "PENDING"), "gpu02") == []
    assert parse_jobs(line.replace("RUNNING", "SUSPENDED"), "gpu02")[0].gpus == (0, 1)  # still holds them


def test_slurm_before_21_08_names_the_indexes_gres_idx():
    line = "JobId=9 JobState=RUNNING NodeList=n4 Nodes=n4 CPU_IDs=0-3 Mem=0 GRES_IDX=gpu(IDX:2-3) Features=(null)"
    assert parse_jobs(line, "n4") == [Job("9", "RUNNING", (2, 3))]


def test_a_cpu_job_runs_on_the_node_without_gpus():
    line = "JobId=5 JobState=RUNNING Nodes=vm CPU_IDs=0 Mem=0 GRES= MinCPUsNode=1"
    assert parse_jobs(line, "vm") == [Job("5", "RUNNING", ())]


def test_slurms_host_lists():
    assert expand_hostlist("gpu[01-03,07],login1") == ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]
    assert expand_hostlist("r[1-2]n[1-2]") == ["r1n1", "r1n2", "r2n1", "r2n2"]
    assert expand_hostlist("vm") == ["vm"]
    assert expand_hostlist("gpu[0-99999999]") == ["gpu[0-99999999]"]  # never expanded beyond any cluster


def test_index_lists():
    assert index_list("0-1,3") == (0, 1, 3)
    assert index_list("3") == (3,)
    assert index_list("") == ()
    assert index_list("GPU-61ba3c7e") == ()  # not an index list (a UUID mask): nothing assumed


def test_the_processes_slurmd_tracks():
    text = (FIXTURES / "scontrol-listpids-two-jobs-22.05.8.txt").read_text()
    assert parse_listpids(text) == {4221: "1", 4218: "2", 4219: "2"}
    assert parse_listpids("No job steps exist on this node.") == {}


def test_whether_slurm_gives_out_the_nodes_gpus():
    assert gres_tracks_gpus((FIXTURES / "scontrol-show-node-mixed-gres-22.05.8.txt").read_text())
    assert not gres_tracks_gpus(
        (FIXTURES / "scontrol-show-node-idle-22.05.8.txt").read_text().replace("Gres=gpu:2", "Gres=(null)")
    )


def test_what_a_hook_says_it_leaves_out():
    health = GpuScope(
        hook="healthcheck", in_use={0: ("12",), 3: ("12", "14")}, running=frozenset({"12", "14"})
    )
    assert scope_lines(health) == [
        "rocmstack: GPU 0 is in use by job 12: left out of the memory and active checks",
        "rocmstack: GPU 3 is in use by job 12, job 14: left out of the memory and active checks",
    ]
    prolog = GpuScope(hook="prolog", job="15", judged=frozenset({1}), in_use={0: ("12",)})
    assert scope_lines(prolog) == ["rocmstack: judging job 15's GPUs only: 1"]
    assert scope_report(prolog) == {
        "job": "15",
        "judged": [1],
        "in_use": {"0": ["12"]},
        "running_jobs": [],
        "gres_tracks_gpus": True,
    }
    assert scope_report(None) is None


def _fleet_text(nodes: list[tuple[str, str, str, str]]) -> str:
    """`scontrol show node -o` of several nodes: the recorded line of one, renamed, restated and repartitioned."""
    line = (FIXTURES / "scontrol-show-node-drained-22.05.8.txt").read_text().strip()
    out = []
    for name, state, reason, parts in nodes:
        one = line.replace("NodeName=vm ", f"NodeName={name} ").replace("State=IDLE+DRAIN", f"State={state}")
        one = one.replace("Partitions=debug", f"Partitions={parts}")
        out.append(one.replace("Reason=admin: replacing a cable", f"Reason={reason}" if reason else ""))
    return "\n".join(out) + "\n"


def test_the_breaker_counts_the_nodes_of_this_nodes_partitions_that_rocmstack_took_out():
    text = _fleet_text(
        [
            ("gpu01", "IDLE", "", "gpu"),
            ("gpu02", "IDLE+DRAIN", "[node_problem] rocmstack: gpu-ecc: 3 errors", "gpu"),
            (
                "gpu03",
                "DOWN+DRAIN",
                "rocmstack: nofile-limit: low",
                "gpu,debug",
            ),  # an earlier release's, down since
            ("gpu04", "IDLE+DRAIN", "admin: replacing a cable", "gpu"),  # not ours
            ("cpu01", "IDLE+DRAIN", "[user_problem] rocmstack: dev-shm: full", "cpu"),  # another partition
        ]
    )
    fleet = parse_fleet(text)
    assert [n.state.name for n in fleet] == ["gpu01", "gpu02", "gpu03", "gpu04", "cpu01"]
    assert out_by_us(fleet, "gpu01") == (["gpu"], ["gpu02", "gpu03"], 4)
    assert Breaker().cap(4) == 1 and Breaker().cap(10) == 1 and Breaker().cap(25) == 2
    assert Breaker(max_share=0.5, max_nodes=3).cap(100) == 3


def test_the_breaker_record_is_whole_or_absent_and_a_reset_returns_it(tmp_path):
    breaker = Breaker(file=tmp_path / "state" / "breaker.json")
    assert reset_breaker(breaker) is None
    open_breaker(breaker, {"opened_by": "gpu01", "why": "2 of 4 node(s) ..."})
    assert [p.name for p in breaker.file.parent.iterdir()] == ["breaker.json"]  # no temporary left
    assert reset_breaker(breaker) == {"opened_by": "gpu01", "why": "2 of 4 node(s) ..."}
    assert not breaker.file.exists()


# -- remediation: states read from Slurm 22.05.8 around `scontrol reboot ASAP nextstate=DOWN` (recorded by
# tests/integration/test_doctor_slurm_daemons.py's set-up: RebootProgram restarts slurmd as a booted node)
REMEDY = Remedy(tries=2)


def _shown(name: str) -> NodeState:
    return parse_node((FIXTURES / f"scontrol-show-node-{name}-22.05.8.txt").read_text(), "vm")


def _node_fault(**extra: str) -> dict:
    return _report(nofile_limit="fail", **extra)


def test_a_node_problem_in_service_is_drained_and_rebooted_a_user_problem_only_drained():
    node = NodeState("vm", "IDLE", "")
    first = decide(_node_fault(), node, REMEDY)
    assert first.action == "remediate"
    assert first.message.startswith("[node_problem] rocmstack: nofile-limit: fail here")
    assert first.message.endswith(" (remediation 1 of 2: reboot)")
    user = {"checks": [{"id": "dev-shm", "status": "fail", "summary": "stale files", "problem": "user"}]}
    assert decide(user, node, REMEDY).action == "drain"  # the next job's Prolog judges it again
    assert decide(_node_fault(), node).action == "drain"  # no --remediate: as before


def test_a_gpu_reset_comes_first_where_the_site_gave_one_and_no_job_is_on_the_node():
    remedy = Remedy(tries=2, gpu_reset=("amd-smi", "reset", "-G"))
    node = NodeState("vm", "IDLE", "")
    assert decide(_node_fault(), node, remedy, busy=False).message.endswith("(remediation 1 of 2: GPU reset)")
    assert decide(_node_fault(), node, remedy, busy=True).message.endswith("(remediation 1 of 2: reboot)")
    # the GPU reset did not help: the next try is a reboot
    reset = NodeState(
        "vm", "IDLE+DRAIN", "[node_problem] rocmstack: nofile-limit: low (remediation 1 of 2: GPU reset)"
    )
    assert decide(_node_fault(), reset, remedy, busy=False).message.endswith("(remediation 2 of 2: reboot)")


def test_while_slurm_reboots_the_node_no_hook_touches_it():
    node = _shown("rebooting")
    assert node.state == "DOWN+DRAIN+REBOOT_ISSUED" and node.rebooting_by_us and node.out_by_us
    assert node.remediation == (1, 2, "reboot")
    for report in (_node_fault(), _report(nofile_limit="pass")):
        decision = decide(report, node, REMEDY)
        assert decision.action == "left-as-is" and "is rebooting for rocmstack" in decision.message


def test_back_from_the_reboot_it_is_resumed_only_when_the_check_that_drained_it_passes():
    node = _shown("down-after-reboot")
    assert node.state == "DOWN" and node.reason.endswith(
        "(remediation 1 of 2: reboot) : reboot issued : reboot complete"
    )
    assert node.down_after_our_reboot and node.drained_for == "nofile-limit" and node.out_by_us
    passed = decide(_report(nofile_limit="pass"), node, REMEDY)
    assert passed.action == "resume" and "nofile-limit passes; it was rebooted for" in passed.message
    assert (
        decide(_report(nofile_limit="pass"), node).action == "resume"
    )  # --remediate since dropped: the same
    assert decide(_report(nofile_limit="skip", dev_shm="pass"), node, REMEDY).action == "kept-drained"
    again = decide(_node_fault(), node, REMEDY)
    assert again.action == "remediate" and again.message.endswith("(remediation 2 of 2: reboot)")
    assert decide(_node_fault(), node).action == "kept-drained"  # no --remediate now: it stays down


def test_after_the_last_try_the_node_stays_drained_saying_remediation_did_not_help():
    last = NodeState("vm", "DOWN", _shown("down-after-reboot").reason.replace("1 of 2", "2 of 2"))
    gave_up = decide(_node_fault(), last, REMEDY)
    assert gave_up.action == "drain"
    assert gave_up.message.endswith("(remediation 2 of 2: reboot) - remediation did not help (2 tries)")
    assert len(gave_up.message) <= REASON_MAX
    node = _shown("gave-up-after-reboot")  # DOWN+DRAIN, as Slurm shows a drain set on a DOWN node
    assert node.state == "DOWN+DRAIN" and node.out_by_us
    assert decide(_node_fault(), node, REMEDY).action == "kept-drained"  # never a third try
    assert decide(_report(nofile_limit="pass"), node, REMEDY).action == "resume"  # fixed by hand: back


def test_an_admins_down_of_a_node_rocmstack_drained_without_a_reboot_stays_theirs():
    node = NodeState(
        "vm", "DOWN+DRAIN", "[node_problem] rocmstack: nofile-limit: low (remediation 1 of 2: GPU reset)"
    )
    assert not node.down_after_our_reboot
    assert decide(_report(nofile_limit="pass"), node, REMEDY).action == "left-as-is"


def test_the_breaker_counts_nodes_rebooting_or_down_after_a_reboot_of_ours():
    rebooting, down = _shown("rebooting"), _shown("down-after-reboot")
    line = "NodeName={} Arch=x86_64 State={} Partitions=gpu Reason={} [root@2026-12-05T06:08:56]"
    text = "\n".join(
        [
            line.format("gpu01", "IDLE", ""),
            line.format("gpu02", rebooting.state, rebooting.reason),
            line.format("gpu03", down.state, down.reason),
            line.format("gpu04", "DOWN", "admin: PSU"),
        ]
    )
    assert out_by_us(parse_fleet(text), "gpu01") == (["gpu"], ["gpu02", "gpu03"], 4)
