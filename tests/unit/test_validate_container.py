"""Container command building for `rocmstack validate IMAGE`: least-privilege flags, exact commands."""

from __future__ import annotations

import sys

import pytest

from rocmstack.errors import EngineError, InputError
from rocmstack.validate import container
from rocmstack.validate.container import (
    InImageArgs,
    Plan,
    detect_host,
    device_flags,
    plan,
    run_plan,
    seccomp_evidence,
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


def test_amd_docker_flags_are_exactly_the_least_privilege_set():
    assert device_flags("docker", "amd") == [
        "--device",
        "/dev/kfd",
        "--device",
        "/dev/dri",
        "--group-add",
        "video",
        "--group-add",
        "render",
        "--ulimit",
        "nofile=1048576:1048576",
        "--ipc=host",
    ]
    assert device_flags("podman", "amd") == [
        *device_flags("docker", "amd")[:8],
        "--ulimit",
        container.nofile("podman"),
        "--ipc=host",
    ]


def test_daemonless_engines_ask_for_the_open_files_this_host_allows():
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    n = 1048576 if hard == resource.RLIM_INFINITY else min(1048576, hard)
    assert container.nofile("buildah") == container.nofile("podman") == f"nofile={n}:{n}"
    assert container.nofile("docker") == "nofile=1048576:1048576"  # the daemon's limits apply, not ours


def test_buildah_takes_devices_without_group_add():
    flags = device_flags("buildah", "amd")
    assert flags[:4] == ["--device", "/dev/kfd", "--device", "/dev/dri"] and "--group-add" not in flags


def test_nvidia_uses_gpus_on_docker_and_cdi_elsewhere():
    assert device_flags("docker", "nvidia")[:2] == ["--gpus", "all"]
    assert device_flags("podman", "nvidia")[:2] == ["--device", "nvidia.com/gpu=all"]
    assert device_flags("buildah", "nvidia")[:2] == ["--device", "nvidia.com/gpu=all"]


@pytest.mark.parametrize("engine", container.ENGINES)
def test_cpu_host_gets_no_device_only_the_open_file_limit(engine):
    assert device_flags(engine, "cpu") == ["--ulimit", container.nofile(engine)]


@pytest.mark.parametrize("engine", container.ENGINES)
@pytest.mark.parametrize("host", container.HOSTS)
def test_never_privileged_never_host_env(engine, host, tmp_path):
    p = plan(
        engine=engine, host=host, image="localhost/x:1", report_dir=tmp_path, args=InImageArgs(expect_gpus=0)
    )
    flat = _flat(p)
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
        args=InImageArgs(
            expect_gpus=0, skip_bench=True, baseline_name="h200.json", doctor_skip=("lock-drift",)
        ),
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
        f"{rep}/.in-image:/report",
        "--volume",
        f"{base.resolve().parent}:/baseline:ro",
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
        "/baseline/h200.json",
        "--doctor-skip",
        "lock-drift",
    )
    assert p.cleanup == ("buildah", "--storage-driver", "vfs", "rm", "c1")
    assert p.shell().splitlines()[1].startswith("buildah --storage-driver vfs run --isolation chroot")


def test_storage_driver_follows_the_build_engine_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCMSTACK_PODMAN_STORAGE_DRIVER", "overlay")
    p = plan(engine="podman", host="cpu", image="i", report_dir=tmp_path, args=InImageArgs())
    assert p.run[:3] == ("podman", "--storage-driver", "overlay")
    monkeypatch.setenv("ROCMSTACK_PODMAN_STORAGE_DRIVER", "")  # unset in effect: the build's default, vfs
    p = plan(engine="buildah", host="cpu", image="i", report_dir=tmp_path, args=InImageArgs())
    assert p.setup[:3] == ("buildah", "--storage-driver", "vfs")


def test_docker_plan_is_one_run_with_the_in_image_entrypoint(tmp_path):
    p = plan(
        engine="docker",
        host="amd",
        image="ghcr.io/o/verl:t",
        report_dir=tmp_path,
        container="c",
        args=InImageArgs(expect_gpus=8, skip_smoke=True),
    )
    assert p.setup is None and p.cleanup is None
    run = list(p.run)
    assert run[:5] == ["docker", "run", "--rm", "--name", "c"]
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


def test_seccomp_evidence_needs_a_failing_check_asking_for_it():
    def report(status, fix):
        return {"doctor": {"report": {"checks": [{"id": "x", "status": status, "fix": fix}]}}}

    assert seccomp_evidence(report("fail", "run with --security-opt seccomp=unconfined")) == "x"
    assert seccomp_evidence(report("warn", "run with --security-opt seccomp=unconfined")) is None
    assert seccomp_evidence(report("fail", "raise the ulimit")) is None
    assert seccomp_evidence({"doctor": {"report": None}}) is None


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


def test_stage_dir_is_writable_for_any_image_user(tmp_path):
    p = Plan(
        engine="podman",
        host="cpu",
        image="img",
        report_dir=tmp_path / "r",
        container="c",
        setup=None,
        cleanup=None,
        run=(sys.executable, "-c", "pass"),
    )
    assert run_plan(p) == 0
    assert (tmp_path / "r" / container.STAGE).stat().st_mode & 0o777 == 0o777


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
