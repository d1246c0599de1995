"""Container command building for `rocmstack validate IMAGE`: least-privilege flags, exact commands."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest

from rocmstack.container.engine import ORDER
from rocmstack.errors import EngineError, InputError
from rocmstack.validate import container
from rocmstack.validate.container import (
    InImageArgs,
    Plan,
    detect_host,
    device_flags,
    plan,
    run_plan,
    seccomp_advice,
)

FORBIDDEN = (
    "--privileged",
    "-e",
    "--env",
    "--env-file",
    "--env-host",
    "--cap-add",
    "--pid=host",
    "--network=host",
)


def _flat(p: Plan) -> list[str]:
    return [arg for cmd in p.commands() for arg in cmd]


# An AMD host's device nodes as `ls -l /dev/kfd /dev/dri` shows them in ROCm/ROCm-docker pull request #93
# (https://github.com/ROCm/ROCm-docker/pull/93): kfd and renderD* root:render (gid 109 there), card*
# root:video (44, Debian's fixed gid). Regular files stand in for the character devices: only their
# group is read.
AMD_NODES = {"kfd": 109, "dri/renderD128": 109, "dri/renderD129": 109, "dri/card0": 44, "dri/card1": 44}


@pytest.fixture
def amd_dev(tmp_path):
    dev = tmp_path / "dev"
    for rel, gid in AMD_NODES.items():
        node = dev / rel
        node.parent.mkdir(parents=True, exist_ok=True)
        node.touch(mode=0o660)
        if os.geteuid() != 0:
            pytest.skip("setting a node's group needs root")
        os.chown(node, 0, gid)
    return dev


def test_amd_docker_flags_are_exactly_the_least_privilege_set(amd_dev):
    assert device_flags("docker", "amd", dev_root=amd_dev) == [
        "--device",
        f"{amd_dev}/kfd",
        "--device",
        f"{amd_dev}/dri",
        "--group-add",
        "44",
        "--group-add",
        "109",
        "--ulimit",
        "nofile=1048576:1048576",
        "--shm-size",
        "16g",
    ]
    assert device_flags("podman", "amd", dev_root=amd_dev) == [
        *device_flags("docker", "amd", dev_root=amd_dev)[:8],
        "--ulimit",
        container.nofile("podman"),
        "--shm-size",
        "16g",
    ]


def test_group_ids_are_the_hosts_numbers_never_names_never_root(amd_dev):
    # Names resolve in the image's /etc/group, whose `groupadd --system render` has another gid.
    assert container.device_gids(amd_dev) == [44, 109]
    os.chown(amd_dev / "dri" / "card1", 0, 0)
    assert container.device_gids(amd_dev) == [44, 109]  # the root group is never granted
    assert container.device_gids(amd_dev / "missing") == []


@pytest.mark.parametrize("engine", ORDER)
@pytest.mark.parametrize("host", container.HOSTS)
def test_never_the_hosts_ipc_namespace(engine, host):
    # On every host, a CPU one too: Ray's object store and the CPU smoke's weight sync live in /dev/shm.
    flags = device_flags(engine, host)
    assert not any(f.startswith("--ipc") for f in flags) and flags[flags.index("--shm-size") + 1] == "16g"


def test_daemonless_engines_ask_for_the_open_files_this_host_allows():
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    n = 1048576 if hard == resource.RLIM_INFINITY else min(1048576, hard)
    assert container.nofile("buildah") == container.nofile("podman") == f"nofile={n}:{n}"
    assert container.nofile("docker") == "nofile=1048576:1048576"  # the daemon's limits apply, not ours


def test_buildah_takes_devices_without_group_add(amd_dev):
    flags = device_flags("buildah", "amd", dev_root=amd_dev)
    assert (
        flags[:4] == ["--device", f"{amd_dev}/kfd", "--device", f"{amd_dev}/dri"]
        and "--group-add" not in flags
    )


def test_nvidia_uses_gpus_on_docker_and_cdi_elsewhere():
    assert device_flags("docker", "nvidia")[:2] == ["--gpus", "all"]
    assert device_flags("podman", "nvidia")[:2] == ["--device", "nvidia.com/gpu=all"]
    assert device_flags("buildah", "nvidia")[:2] == ["--device", "nvidia.com/gpu=all"]


@pytest.mark.parametrize("engine", ORDER)
def test_cpu_host_gets_no_device_only_open_files_and_shared_memory(engine):
    assert device_flags(engine, "cpu") == ["--ulimit", container.nofile(engine), "--shm-size", "16g"]


@pytest.mark.parametrize("engine", ORDER)
@pytest.mark.parametrize("host", container.HOSTS)
def test_never_privileged_never_host_env(engine, host, tmp_path):
    p = plan(
        engine=engine, host=host, image="localhost/x:1", report_dir=tmp_path, args=InImageArgs(expect_gpus=0)
    )
    flat = _flat(p)
    # One constant, never a host value: the in-image run prints no deprecation note for the spellings the
    # host wrote (images of the previous release know only those)
    at = flat.index("--env")
    assert flat[at + 1] == "ROCMSTACK_ARGV_FROM_HOST=1" and "--env" not in flat[at + 1 :]
    flat = flat[:at] + flat[at + 2 :]
    assert not set(FORBIDDEN) & set(flat), flat
    assert not any(a.startswith("--security-opt") for a in flat)


def test_seccomp_unconfined_only_when_asked():
    assert "seccomp=unconfined" not in device_flags("docker", "amd")
    assert device_flags("docker", "amd", seccomp_unconfined=True)[-2:] == [
        "--security-opt",
        "seccomp=unconfined",
    ]


def test_unknown_engine_or_host_is_input_error():
    with pytest.raises(InputError, match="--engine 'nerdctl'"):
        device_flags("nerdctl", "cpu")
    with pytest.raises(InputError, match="host kind"):
        device_flags("docker", "tpu")


def test_buildah_plan_is_from_run_rm_with_the_build_store(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCMSTACK_PODMAN_STORAGE_DRIVER", "vfs")
    base = tmp_path / "base" / "h200.json"
    p = plan(
        engine="buildah",
        host="cpu",
        image="localhost/t:1",
        report_dir=tmp_path / "rep",
        container="c1",
        args=InImageArgs(expect_gpus=0, skip_bench=True, baseline=True, doctor_skip=("lock-drift",)),
        baseline=base,
    )
    rep = (tmp_path / "rep").resolve()
    assert p.setup == (
        "buildah",
        "--storage-driver",
        "vfs",
        "from",
        "--pull=never",
        "--name",
        "c1",
        "--ulimit",
        container.nofile("buildah"),
        "--shm-size",
        "16g",
        "localhost/t:1",
    )
    assert p.run == (
        "buildah",
        "--storage-driver",
        "vfs",
        "run",
        "--isolation",
        "chroot",
        "--volume",
        f"{rep}/.c1/report:/report",
        "--env",
        "ROCMSTACK_ARGV_FROM_HOST=1",
        "--volume",
        f"{rep}/.c1/baseline.json:/baseline/baseline.json:ro",  # a copy of that one file, read-only
        "c1",
        "--",
        "/usr/local/bin/rocmstack",
        "validate",
        "--in-place",
        "--report",
        "/report",
        "--device",
        "auto",
        "--expect-gpus",
        "0",
        "--skip-bench",
        "--baseline",
        "/baseline/baseline.json",
        "--doctor-skip",
        "lock-drift",
    )
    assert p.cleanup == ("buildah", "--storage-driver", "vfs", "rm", "c1")
    assert p.shell().splitlines()[1].startswith("buildah --storage-driver vfs run --isolation chroot")


def test_storage_driver_follows_the_build_engine_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCMSTACK_PODMAN_STORAGE_DRIVER", "overlay")
    p = plan(engine="podman", host="cpu", image="i", report_dir=tmp_path, args=InImageArgs())
    assert p.run[:3] == ("podman", "--storage-driver", "overlay")
    # Unset in effect: podman's own storage settings.
    monkeypatch.setenv("ROCMSTACK_PODMAN_STORAGE_DRIVER", "")
    p = plan(engine="buildah", host="cpu", image="i", report_dir=tmp_path, args=InImageArgs())
    assert p.setup[:2] == ("buildah", "from")


def test_docker_plan_is_a_run_with_init_and_the_in_image_entrypoint_then_a_forced_rm(tmp_path):
    p = plan(
        engine="docker",
        host="amd",
        image="ghcr.io/o/verl:t",
        report_dir=tmp_path,
        container="c",
        args=InImageArgs(expect_gpus=8, skip_smoke=True),
    )
    assert p.setup is None and p.cleanup == ("docker", "rm", "--force", "c")
    run = list(p.run)
    assert run[:6] == ["docker", "run", "--rm", "--init", "--name", "c"]
    i = run.index("--entrypoint")
    assert run[i + 1 : i + 3] == ["/usr/local/bin/rocmstack", "ghcr.io/o/verl:t"]
    assert run[i + 3 :] == [
        "validate",
        "--in-place",
        "--report",
        "/report",
        "--device",
        "auto",
        "--expect-gpus",
        "8",
        "--skip-smoke",
    ]


def test_detect_host_from_device_nodes(tmp_path):
    dev, proc = tmp_path / "dev", tmp_path / "proc"
    dev.mkdir()
    proc.mkdir()

    def none(_name: str) -> None:
        return None

    assert detect_host(dev, proc, which=none) == "cpu"
    (dev / "nvidiactl").touch()
    assert detect_host(dev, proc, which=none) == "nvidia"
    (dev / "kfd").touch()
    assert detect_host(dev, proc, which=none) == "amd"


def test_seccomp_advice_is_read_but_never_trusted_to_be_well_formed():
    def report(status, fix):
        return {"doctor": {"report": {"checks": [{"id": "x\x1b[2J", "status": status, "fix": fix}]}}}

    assert seccomp_advice(report("fail", "run with --security-opt seccomp=unconfined")) == "x\\x1b[2J"
    assert seccomp_advice(report("warn", "run with --security-opt seccomp=unconfined")) is None
    assert seccomp_advice(report("fail", "raise the ulimit")) is None
    assert seccomp_advice({"doctor": {"report": None}}) is None
    assert seccomp_advice({"doctor": {"report": {"checks": "seccomp=unconfined"}}}) is None


# The smallest report the schema takes: what the image's rocmstack writes, less its optional parts.
VALID = {
    "schema": "rocmstack.validate/2",
    "created": "2026-11-30T00:00:00+00:00",
    "seconds": 1.0,
    "mode": "in-place",
    "passed": True,
    "verdict": "PASS: doctor",
    "render_hash": "a" * 64,
    "host": {"hostname": "h"},
    "stages": [{"name": "doctor", "status": "pass", "seconds": 1.0, "summary": "ok"}],
}


def _in_image_report(**doctor_check) -> dict:
    return {
        "schema": "rocmstack.validate/2",
        "created": "2026-11-30T00:00:00+00:00",
        "seconds": 1.0,
        "mode": "in-place",
        "passed": False,
        "verdict": "FAIL: doctor fail",
        "render_hash": "a" * 64,
        "host": {"hostname": "h", "platform": "p", "cpus": 1},
        "stages": [{"name": "doctor", "status": "fail", "seconds": 1.0, "summary": "1 failed"}],
        "doctor": {"report": {"verdict": "NOT READY", "checks": [doctor_check]}},
        "image": {},
    }


def test_the_image_cannot_ask_its_way_out_of_seccomp(tmp_path, monkeypatch):
    """The image's doctor 'fails' a check whose fix asks for seccomp=unconfined: validate runs it once, as
    planned, and only records the advice."""
    import json

    from rocmstack.validate.pipeline import ValidateOptions

    advice = _in_image_report(
        id="seccomp-probe",
        group="system",
        status="fail",
        summary="syscalls blocked",
        fix="rerun with --security-opt seccomp=unconfined",
    )
    runs = tmp_path / "runs"
    p = _plan_running(
        tmp_path,
        f"open({str(runs)!r}, 'a').write(repr(sys.argv) + '\\n')\n"
        f"(stage / 'report.json').write_text({json.dumps(advice)!r}); sys.exit(1)",
    )
    monkeypatch.setattr(  # the engine's image inspection: a rocmstack image with this render hash
        container,
        "inspect",
        lambda engine, image: {
            "id": "sha256:" + "b" * 64,
            "labels": {"dev.rocmstack.render-hash": "a" * 64},
            "repo_tags": [],
        },
    )
    report = container.validate_image(p, ValidateOptions(report_dir=p.report_dir))
    assert len(runs.read_text().splitlines()) == 1  # no second, unconfined run
    assert report["engine"]["seccomp_unconfined"] is False
    assert report["engine"]["seccomp_advice_from_image"] == "seccomp-probe"
    assert not any("seccomp=unconfined" in c or "--security-opt" in c for c in report["engine"]["commands"])
    assert report["passed"] is False
    assert report["image"]["ref"] == "img" and report["engine"]["image"] == "b" * 64  # ran by id


def test_by_id_swaps_only_the_image_argument(tmp_path):
    p = plan(
        engine="buildah",
        host="cpu",
        image="localhost/t:1",
        report_dir=tmp_path,
        container="c",
        args=InImageArgs(),
    )
    q = container.by_id(p, "sha256:" + "e" * 64)
    assert q.setup[-1] == "e" * 64 and "localhost/t:1" not in q.setup + q.run
    assert q.run == p.run and q.container == "c"  # buildah runs the container, not the image
    d = plan(
        engine="docker",
        host="cpu",
        image="localhost/t:1",
        report_dir=tmp_path,
        container="c",
        args=InImageArgs(),
    )
    r = container.by_id(d, "e" * 64).run
    assert r[r.index("--entrypoint") + 2] == "e" * 64


def test_engine_failure_without_report_is_one_engine_error(tmp_path):
    # A real child process standing in for an engine that cannot start the container.
    p = Plan(
        engine="podman",
        host="cpu",
        image="img",
        report_dir=tmp_path,
        container="c",
        setup=None,
        cleanup=None,
        run=(sys.executable, "-c", "import sys; print('Error: crun: cgroups unavailable'); sys.exit(126)"),
    )
    with pytest.raises(
        EngineError, match=r"could not run rocmstack inside img \(exit 126\).*cgroups unavailable"
    ):
        run_plan(p)
    lines = []
    with pytest.raises(EngineError):
        run_plan(p, on_line=lines.append)
    assert lines == ["Error: crun: cgroups unavailable"]


def _plan_running(tmp_path, code: str, name: str = "c") -> Plan:
    """A plan whose 'container' is a real child process given the stage path (the mounted /report)."""
    report_dir = (tmp_path / "r").resolve()
    stage = container.stage_dir(report_dir, name)
    return Plan(
        engine="podman",
        host="cpu",
        image="img",
        report_dir=report_dir,
        container=name,
        setup=None,
        cleanup=None,
        run=(sys.executable, "-c", f"import os, pathlib, sys; stage = pathlib.Path({str(stage)!r})\n{code}"),
    )


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o000])
def test_stage_is_private_to_the_run_and_writable_for_any_image_user(tmp_path, umask):
    p = _plan_running(tmp_path, "pass")
    old = os.umask(umask)
    try:
        container.make_stage(p.stage)
    finally:
        os.umask(old)
    assert p.stage.parent.name == ".c" and p.stage.parent.parent == p.report_dir
    assert stat.S_IMODE(p.stage.parent.stat().st_mode) == 0o700  # no other host user gets in
    assert stat.S_IMODE(p.stage.stat().st_mode) == 0o1777  # any image user writes, sticky
    with pytest.raises(EngineError, match="already exists"):
        container.make_stage(p.stage)  # never a folder someone prepared


def _write_report(stage: Path) -> None:
    (stage / "report.json").write_text('{"schema": "rocmstack.validate/2", "stages": []}')


def test_collect_takes_only_expected_regular_files_and_follows_no_link(tmp_path):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("registry-token-123")
    host_dir = tmp_path / "host-etc"
    host_dir.mkdir()
    (host_dir / "summary.json").write_text("host file")
    (host_dir / "passwd").write_text("root:x:0:0")
    stage = tmp_path / "stage"
    stage.mkdir()
    _write_report(stage)
    (stage / "leak.txt").symlink_to(secret)  # unexpected: ignored
    (stage / "etc").symlink_to(host_dir)  # unexpected: ignored
    (stage / "smoke").symlink_to(host_dir)  # a link on the way to smoke/summary.json
    (stage / "bench").mkdir()
    (stage / "bench" / "rollout.json").symlink_to(secret)  # a link as the expected file
    os.mkfifo(stage / "bench" / "roofline.png")  # a FIFO would block a plain read
    dest = tmp_path / "dest"
    dest.mkdir()
    refused = container.collect(stage, dest)
    assert sorted(refused) == [
        "bench/rollout.json (a link)",
        "bench/roofline.png (not a regular file)",
        "smoke (a link)",
    ]
    got = {str(f.relative_to(dest)) for f in dest.rglob("*")}
    assert got == {"report.json"}
    assert not any("registry-token" in f.read_text() for f in dest.rglob("*") if f.is_file())


def test_collect_refuses_oversized_files_and_replaces_stale_copies(tmp_path, monkeypatch):
    monkeypatch.setitem(container.COLLECT, "smoke/summary.json", 10)
    stage, dest = tmp_path / "stage", tmp_path / "dest"
    (stage / "smoke").mkdir(parents=True)
    (dest / "bench").mkdir(parents=True)
    _write_report(stage)
    (stage / "smoke" / "summary.json").write_text("x" * 11)
    (dest / "bench" / "rollout.json").write_text("from an earlier run")
    (dest / "report.json").symlink_to(tmp_path / "elsewhere")  # an earlier copy that was a link
    assert container.collect(stage, dest) == ["smoke/summary.json (larger than 10 bytes)"]
    assert not (dest / "bench" / "rollout.json").exists()  # no stale bench beside a new report
    assert not (dest / "report.json").is_symlink() and not (tmp_path / "elsewhere").exists()


def test_a_run_that_plants_links_gets_nothing_out_and_leaves_no_stage(tmp_path):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("registry-token-123")
    p = _plan_running(
        tmp_path,
        f"(stage / 'report.json').symlink_to({str(secret)!r}); (stage / 'etc').symlink_to('/etc')",
    )
    with pytest.raises(
        EngineError, match=r"wrote no usable report \(exit 0\): refused report.json \(a link\)"
    ):
        container._run_and_collect(p, None)
    assert list(p.report_dir.iterdir()) == []  # the private stage is gone, nothing was copied up
    assert secret.read_text() == "registry-token-123"


def test_a_run_with_a_real_report_hands_back_only_that(tmp_path):
    p = _plan_running(
        tmp_path,
        f"(stage / 'report.json').write_text({json.dumps(VALID)!r});"
        "(stage / 'smoke').mkdir(); (stage / 'smoke' / 'reward.png').symlink_to('/etc/passwd');"
        "(stage / 'extra.bin').write_bytes(b'x')",
    )
    got = container._run_and_collect(p, None)
    assert got.code == 0 and got.report == VALID and got.problem is None
    assert got.refused == ["smoke/reward.png (a link)"]
    assert sorted(str(f.relative_to(p.report_dir)) for f in p.report_dir.rglob("*")) == ["report.json"]


@pytest.mark.parametrize("streamed", [False, True])
def test_the_named_container_is_removed_when_the_run_times_out(tmp_path, streamed):
    marker = tmp_path / "removed"
    p = Plan(
        engine="podman",
        host="cpu",
        image="img",
        report_dir=tmp_path / "r",
        container="c",
        setup=None,
        run=(sys.executable, "-c", "import time; print('running', flush=True); time.sleep(60)"),
        cleanup=(sys.executable, "-c", f"open({str(marker)!r}, 'w').write('rm --force c')"),
    )
    with pytest.raises(EngineError, match="ran past 1s and was stopped"):
        run_plan(p, timeout_s=1, on_line=(lambda line: None) if streamed else None)
    assert marker.read_text() == "rm --force c"
    assert not (tmp_path / "r" / ".c").exists()


FIXTURES = __import__("pathlib").Path(__file__).resolve().parents[1] / "fixtures" / "doctor" / "tools"


def _kfd(root, *properties: str):
    """A KFD topology tree: node 0 a CPU (gfx_target_version 0), then one node per GPU properties text."""
    nodes = root / "class/kfd/kfd/topology/nodes"
    (nodes / "0").mkdir(parents=True)
    (nodes / "0" / "properties").write_text("simd_count 0\ngfx_target_version 0\n")
    for i, text in enumerate(properties, 1):
        (nodes / str(i)).mkdir()
        (nodes / str(i) / "properties").write_text(text)
    return root


def test_host_reads_the_arch_from_its_own_kfd_topology(tmp_path):
    # MI300X's gfx_target_version line (ROCm/rocm-cli#343) with MI350X node properties (ROCm/rocm-systems#10274).
    mi300x = (FIXTURES / "kfd-mi300x-gfx_target_version.line").read_text()
    mi350x = (FIXTURES / "kfd-mi350x-node5-properties.lines").read_text() + "gfx_target_version 90500\n"
    assert container.host_gpu_archs(_kfd(tmp_path / "a", mi300x, mi300x)) == ["gfx942"]
    assert container.host_gpu_archs(_kfd(tmp_path / "b", mi350x)) == ["gfx950"]
    assert container.host_gpu_archs(tmp_path / "no-kfd") == []


def test_an_image_cannot_claim_an_arch_the_host_does_not_have():
    assert container.arch_problem(["gfx942"], ["gfx942"]) is None
    assert container.arch_problem(["gfx950"], []) is None  # no AMD driver on the host: nothing to compare
    assert container.arch_problem(["gfx950"], ["gfx942"]) == (
        "the doctor in the image reports GPU arch gfx950, the host's driver has gfx942"
    )
    assert "reports GPU arch none" in (container.arch_problem([], ["gfx942"]) or "")


def test_the_report_names_the_one_arch_it_ran_on():
    from rocmstack.validate.pipeline import device_archs, single_arch

    doctor = {"platform": {"gpu_archs": ["gfx950", "gfx950"]}}
    assert device_archs(doctor) == ["gfx950"] and single_arch(device_archs(doctor)) == "gfx950"
    assert single_arch(["gfx942", "gfx950"]) is None  # a mixed node stands for no single arch
    assert device_archs(None) == [] and single_arch([]) is None


def _cpu_image(monkeypatch):
    monkeypatch.setattr(  # the engine's image inspection: a rocmstack image with this render hash
        container,
        "inspect",
        lambda engine, image: {
            "id": "sha256:" + "b" * 64,
            "labels": {"dev.rocmstack.render-hash": "a" * 64},
            "repo_tags": [],
        },
    )
    monkeypatch.setattr(container, "attach_sbom", lambda *a: None)
    monkeypatch.setattr(container, "host_gpu_archs", lambda: ["gfx942"])


@pytest.mark.parametrize(
    ("broken", "named"),
    [
        ({k: v for k, v in VALID.items() if k != "host"}, "host: field required"),
        ({**VALID, "stages": [{"name": "doctor", "status": "pass", "seconds": 1}]}, "stages.0.summary"),
        ({**VALID, "smoke": {"summary": {"final": {}}}}, "smoke.summary.criteria: field required"),
        ({**VALID, "host": "h", "stages": "all"}, "host: input should be a valid dictionary"),
        ({**VALID, "schema": "rocmstack.doctor/1"}, "schema 'rocmstack.doctor/1'"),
        ("[not json", "not readable JSON"),
    ],
)
def test_a_malformed_in_image_report_is_a_collect_failure_not_a_crash(tmp_path, monkeypatch, broken, named):
    """Issue 20: a report missing `host`, a stage's `summary` or the smoke's `criteria` crashed the writer."""
    from rocmstack.validate.pipeline import ValidateOptions

    _cpu_image(monkeypatch)
    text = broken if isinstance(broken, str) else json.dumps(broken)
    p = _plan_running(tmp_path, f"(stage / 'report.json').write_text({text!r})")
    report = container.validate_image(p, ValidateOptions(report_dir=p.report_dir))
    assert report["passed"] is False and report["verdict"].startswith("FAIL: collect fail")
    first = report["stages"][0]
    assert first["name"] == "collect" and first["status"] == "fail"
    assert "report.json from the image: " in first["summary"] and named in first["summary"], first
    assert "\n" not in first["summary"]
    written = json.loads((p.report_dir / "report.json").read_text())
    assert written["stages"] == report["stages"] and (p.report_dir / "report.html").is_file()


def test_the_host_writes_its_arch_and_options_over_the_images(tmp_path, monkeypatch):
    """Issue 20.4: the image says gfx950 and expect_gpus 1; the host ran it on gfx942 with --expect-gpus 8."""
    from rocmstack.publish.gate import report_arch
    from rocmstack.validate.pipeline import ValidateOptions

    _cpu_image(monkeypatch)
    claims = {**VALID, "gpu_arch": "gfx950", "gpu_archs": ["gfx950"], "options": {"expect_gpus": 1}}
    p = _plan_running(tmp_path, f"(stage / 'report.json').write_text({json.dumps(claims)!r})")
    report = container.validate_image(p, ValidateOptions(report_dir=p.report_dir, expect_gpus=8))
    facts = report["host_checked"]
    assert facts["gpu_arch"] == "gfx942" and facts["gpu_archs"] == ["gfx942"]
    assert facts["options"]["expect_gpus"] == 8 and report["options"]["expect_gpus"] == 8
    assert report["gpu_arch"] == "gfx942" and report_arch(report) == "gfx942"
    assert report["image_claimed"] == {
        "gpu_arch": "gfx950",
        "gpu_archs": ["gfx950"],
        "options": {"expect_gpus": 1},
    }
    assert report["passed"] is False  # and the host's image stage says why
    assert report["stages"][0]["summary"].startswith("the doctor in the image reports GPU arch gfx950")


def test_only_a_private_copy_of_the_baseline_file_reaches_the_image(tmp_path):
    """Issue 20.3: the baseline's folder (a checkout: .git/config, files beside it) was mounted."""
    folder = tmp_path / "checkout"
    (folder / ".git").mkdir(parents=True)
    (folder / ".git" / "config").write_text("extraheader = AUTHORIZATION: basic c2VjcmV0")
    (folder / "h200.json").write_text('{"entries": []}')
    p = plan(
        engine="podman",
        host="cpu",
        image="img",
        report_dir=tmp_path / "r",
        args=InImageArgs(baseline=True),
        baseline=folder / "h200.json",
        container="c",
    )
    mounts = [p.run[i + 1] for i, a in enumerate(p.run) if a == "--volume"]
    copy = p.report_dir / ".c" / "baseline.json"
    assert mounts == [f"{p.stage}:/report", f"{copy}:/baseline/baseline.json:ro"]
    assert not any(str(folder) in a for a in p.run)
    seen = tmp_path / "seen.txt"
    # The 'container' reports what it finds where the mount's source is: the copy alone, 0644, in a 0700 folder.
    run = (
        sys.executable,
        "-c",
        f"import os, stat; c = {str(copy)!r}; d = os.path.dirname(c); open({str(seen)!r}, 'w').write("
        "repr((open(c).read(), oct(stat.S_IMODE(os.stat(c).st_mode)), oct(stat.S_IMODE(os.stat(d).st_mode)), "
        "sorted(os.listdir(d)))))",
    )
    container.run_plan(Plan(**{**p.__dict__, "run": run, "cleanup": None}))
    assert eval(seen.read_text()) == ('{"entries": []}', "0o644", "0o700", ["baseline.json", "report"])
    shutil.rmtree(p.stage.parent)


def test_an_oversized_baseline_is_refused_and_leaves_no_stage(tmp_path, monkeypatch):
    monkeypatch.setattr(container, "BASELINE_LIMIT", 8)
    big = tmp_path / "b.json"
    big.write_text("x" * 9)
    p = plan(
        engine="podman", host="cpu", image="i", report_dir=tmp_path / "r", args=InImageArgs(), baseline=big
    )
    with pytest.raises(InputError, match="larger than 8 bytes"):
        container.run_plan(p, runner=lambda *a, **k: pytest.fail("ran"))
    assert not p.stage.parent.exists()


def test_validate_imports_point_one_way():
    """container -> pipeline/report -> schema; nothing below imports what is above it (issue 20)."""
    import ast

    root = Path(container.__file__).parent
    graph = {}
    for path in root.glob("*.py"):
        mods = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module.startswith("rocmstack.validate."):
                    mods.add(node.module.rsplit(".", 1)[1])
                elif node.module == "rocmstack.validate":
                    mods |= {a.name for a in node.names}
        graph[path.stem] = mods - {path.stem}

    def reach(start, seen=()):
        for nxt in graph.get(start, ()):
            if nxt in seen:
                continue
            yield nxt
            yield from reach(nxt, (*seen, nxt))

    cycles = sorted(m for m in graph if m in set(reach(m)))
    assert cycles == []
    assert graph["schema"] == set()
    assert graph["report"] == {"schema"} and "container" not in graph["pipeline"]


# A stand-in for `podman` as read_file calls it (create, cp, rm): a real process on real pipes. `cp CID:PATH -`
# writes a tar stream as podman does, the file in 64 KiB chunks, and records how many bytes it got out;
# `cp CID:PATH DEST` (a copy to disk) writes the whole file there.
FAKE_ENGINE = """
import io, json, pathlib, sys, tarfile
spec = json.loads(pathlib.Path(sys.argv[1]).read_text())
sent = pathlib.Path(sys.argv[1]).with_name("sent")
verb, args = sys.argv[2], sys.argv[3:]
if verb == "create":
    print("cid")
if verb != "cp":
    sys.exit(0)
if spec["kind"] == "absent":  # podman 4.3.1's own words for a path that is not in the container
    sys.stderr.write('Error: "/f" could not be found on container c0ffee: no such file or directory\\n')
    sys.exit(125)
if spec["kind"] == "no-container":
    sys.stderr.write('Error: no container with name or ID "c0ffee" found: no such container\\n')
    sys.exit(125)
info = tarfile.TarInfo("f")
if spec["kind"] == "link":
    info.type, info.linkname = tarfile.SYMTYPE, "/etc/shadow"
info.size = spec["size"] if spec["kind"] == "file" else 0
out = sys.stdout.buffer if args[1] == "-" else open(args[1], "wb")
if args[1] == "-":
    out.write(info.tobuf(tarfile.GNU_FORMAT))
n, chunk = 0, b"x" * 65536
try:
    while n < info.size:
        piece = chunk[: info.size - n]
        out.write(piece)
        out.flush()
        n += len(piece)
        sent.write_text(str(n))
    if args[1] == "-":
        out.write(b"\\0" * (-info.size % 512 + 1024))
except BrokenPipeError:
    sys.exit(1)
"""


def _fake_engine(tmp_path: Path, **spec):
    from rocmstack.container import engine as engines

    script, spec_file = tmp_path / "engine.py", tmp_path / "spec.json"
    script.write_text(FAKE_ENGINE)
    spec_file.write_text(json.dumps(spec))
    return engines.Engine(name="podman", argv=(sys.executable, str(script), str(spec_file)), version="t")


def _sent(tmp_path: Path) -> int:
    path = tmp_path / "sent"
    return int(path.read_text()) if path.exists() else 0


def test_read_file_takes_only_a_bounded_regular_file_out_of_an_image(tmp_path):
    from rocmstack.container import engine as engines

    assert engines.read_file(_fake_engine(tmp_path, kind="file", size=4), "i", "/f", 4) == b"xxxx"
    assert engines.read_file(_fake_engine(tmp_path, kind="absent"), "i", "/f", 4) is None
    with pytest.raises(EngineError, match="larger than 4 bytes"):
        engines.read_file(_fake_engine(tmp_path, kind="file", size=5), "i", "/f", 4)
    with pytest.raises(EngineError, match="not a regular file"):
        engines.read_file(_fake_engine(tmp_path, kind="link"), "i", "/f", 4)
    # an engine that cannot answer (another store, a container gone) says nothing about the file
    with pytest.raises(EngineError, match="no such container"):
        engines.read_file(_fake_engine(tmp_path, kind="no-container"), "i", "/f", 4)


def test_read_file_bounds_the_copy_not_only_what_it_keeps(tmp_path):
    """A 32 MiB file against a 1 MiB limit: the engine is stopped once the limit is past, so the host
    takes in about the limit (plus a pipe's buffer), not the whole file (the old copy took all of it)."""
    from rocmstack.container import engine as engines

    limit, size = 1 << 20, 32 << 20
    with pytest.raises(EngineError, match="larger than 1,048,576 bytes"):
        engines.read_file(_fake_engine(tmp_path, kind="file", size=size), "i", "/f", limit)
    assert _sent(tmp_path) < 4 << 20, _sent(tmp_path)  # limit + TAR_SLACK + a pipe buffer, with room


def _validate_report_text(monkeypatch, text: str) -> dict:
    """validate_image on an in-image report.json with TEXT: the real collect, load, verdict and report
    writers; only the container run is a function that writes the file where the image would."""
    import tempfile

    from rocmstack.validate.pipeline import ValidateOptions

    def run(p, **_kw):
        container.make_stage(p.stage)
        (p.stage / "report.json").write_text(text, encoding="utf-8")
        return 0

    monkeypatch.setattr(container, "run_plan", run)
    with tempfile.TemporaryDirectory() as tmp:
        p = _plan_running(Path(tmp), "pass")
        return container.validate_image(p, ValidateOptions(report_dir=p.report_dir))


@pytest.mark.parametrize(
    ("stages", "says"),
    [
        ([{"name": 7, "status": "pass", "seconds": 1.0, "summary": "ok"}], "stages.0.name"),
        ([{"name": None, "status": "skipped", "seconds": 1.0, "summary": "ok"}], "stages.0.name"),
    ],
)
def test_a_stage_name_that_is_not_a_string_is_a_collect_failure(monkeypatch, stages, says):
    _cpu_image(monkeypatch)
    report = _validate_report_text(monkeypatch, json.dumps({**VALID, "stages": stages}))
    assert report["passed"] is False and report["verdict"].startswith("FAIL: collect fail")
    assert says in report["stages"][0]["summary"]


@pytest.mark.parametrize("status", ["PASS", "ok", True, 1, None, "warn"])
def test_a_stage_status_that_is_not_ours_fails_the_verdict(monkeypatch, status):
    """Only "pass" passes: an image's "PASS" or true is not read as one (a false READY)."""
    _cpu_image(monkeypatch)
    stages = [{"name": "doctor", "status": status, "seconds": 1.0, "summary": "ok"}]
    doc = {**VALID, "gpu_archs": ["gfx942"], "stages": stages}  # the host's arch: only the status can fail
    report = _validate_report_text(monkeypatch, json.dumps(doc))
    assert report["passed"] is False and report["verdict"].startswith("FAIL: doctor ")


@pytest.mark.parametrize("depth", [900, 100_000])
def test_a_deeply_nested_in_image_report_is_a_collect_failure(monkeypatch, depth):
    _cpu_image(monkeypatch)
    text = json.dumps({**VALID, "extra": "@"}).replace('"@"', "[" * depth + "]" * depth)
    report = _validate_report_text(monkeypatch, text)
    assert report["passed"] is False and report["stages"][0]["name"] == "collect"


def _json_like():
    from hypothesis import strategies as st

    leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
    keys = st.sampled_from(["name", "status", "seconds", "summary", "pass", "skipped", "id", "x"])
    return st.recursive(
        leaves,
        lambda kids: (
            st.lists(kids, max_size=3) | st.dictionaries(keys | st.text(max_size=4), kids, max_size=4)
        ),
        max_leaves=12,
    )


def _reports():
    from hypothesis import strategies as st

    status = st.sampled_from(["pass", "fail", "error", "skip", "skipped", "PASS", "ok"]) | _json_like()
    stage = st.fixed_dictionaries(
        {
            "name": st.text(max_size=6) | _json_like(),
            "status": status,
            "seconds": _json_like(),
            "summary": _json_like(),
        }
    )
    fields = st.dictionaries(
        st.sampled_from(
            [
                "stages",
                "host",
                "passed",
                "verdict",
                "doctor",
                "smoke",
                "bench",
                "image",
                "gpu_archs",
                "render_hash",
            ]
        ),
        _json_like() | st.lists(stage, max_size=3),
        max_size=4,
    )
    base = {**VALID, "gpu_archs": ["gfx942"]}  # the host's arch: the image stage passes, the rest decides
    # an older image writes validate/1 (its skipped stage spelled "skipped"): read too, judged the same way
    schemas = st.sampled_from(["rocmstack.validate/1", "rocmstack.validate/2"])
    return st.tuples(st.lists(stage, max_size=4), fields, schemas).map(
        lambda t: {**base, "stages": t[0], **t[1], "schema": t[2]}
    )


def test_random_in_image_reports_get_a_verdict_never_a_traceback(monkeypatch):
    """Whatever JSON the image writes, the host answers with a verdict (or a collect failure): no
    exception, one verdict line, and PASS only when every stage the host counts passed."""
    from hypothesis import HealthCheck, given, settings

    _cpu_image(monkeypatch)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(_reports())
    def check(doc):
        report = _validate_report_text(monkeypatch, json.dumps(doc))
        assert isinstance(report["passed"], bool) and "\n" not in report["verdict"]
        if report["passed"]:
            assert all(s["status"] in ("pass", "skip") for s in report["stages"])
            assert report["verdict"].startswith("PASS")

    check()
