"""Engine detection, commands and error classification.

Detection runs the real CLIs found on PATH (this machine: a docker client with no daemon, and podman);
the "nothing installed" cases hide them with an empty PATH lookup. Error texts are verbatim engine output.
"""

from __future__ import annotations

import ast
import functools
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from rocmstack.container import engine as E
from rocmstack.errors import EngineError, InputError

# Verbatim: `podman --storage-driver vfs pull docker.io/rocm/primus:v26.7` on this machine (podman 4.3.1,
# no route to Docker Hub), 2026-11-29.
PODMAN_NO_REGISTRY = (
    "Trying to pull docker.io/rocm/primus:v26.7...\n"
    "Error: initializing source docker://rocm/primus:v26.7: pinging container registry registry-1.docker.io: "
    'Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on 10.255.255.53:53: no such host\n'
)
# Verbatim: `docker version` with the client installed and no daemon (docker 28 client, this machine).
# Docker's client, verbatim, when nothing answers on its socket (moby client/errors.go, connectionFailed).
DOCKER_NO_DAEMON = (
    "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"
)


def no_tools(_name):
    return None


def test_nothing_installed_is_one_line_saying_what_to_install():
    with pytest.raises(EngineError) as err:
        E.detect("auto", which=no_tools)
    line = err.value.one_line()
    assert "\n" not in line
    assert "docker: not installed" in line and "podman: not installed" in line
    assert "apt-get install podman buildah" in line and "buildx" in line


def test_docker_without_daemon_is_explained():
    if not shutil.which("docker"):
        pytest.skip("no docker client on this machine")
    found = E.probe_docker()
    if isinstance(found, E.Engine):
        pytest.skip("a Docker daemon answers here")
    assert found.startswith("docker: daemon not reachable") or "buildx" in found
    with pytest.raises(EngineError, match="--engine docker cannot build"):
        E.detect("docker")


def test_auto_falls_back_to_podman():
    if not shutil.which("podman"):
        pytest.skip("podman is not installed")
    which = lambda name: None if name == "docker" else shutil.which(name)  # noqa: E731 - hide docker only
    engine = E.detect("auto", which=which)
    assert engine.name == "podman" and engine.argv[0] == "podman"
    assert engine.version[0].isdigit()


def test_bad_engine_choice_and_builder_with_podman():
    with pytest.raises(InputError, match="unknown engine"):
        E.detect("kaniko")
    with pytest.raises(InputError, match="--builder"):
        E.detect("podman", builder="b1")


def test_storage_driver_override(monkeypatch):
    monkeypatch.setenv(E.PODMAN_DRIVER_ENV, "overlay")
    assert E.podman_prefix() == ("podman", "--storage-driver", "overlay")
    monkeypatch.delenv(E.PODMAN_DRIVER_ENV)
    assert E.podman_prefix() == ("podman",)  # podman's own storage settings, as the user's podman uses


@pytest.mark.parametrize(
    ("short", "full"),
    [
        ("rocm/primus:v26.7", "docker.io/rocm/primus:v26.7"),
        ("ubuntu:24.04", "docker.io/library/ubuntu:24.04"),
        ("localhost/rocmstack-test-base:bookworm", "localhost/rocmstack-test-base:bookworm"),
        ("ghcr.io/org/img:1", "ghcr.io/org/img:1"),
        ("localhost:5000/img:1", "localhost:5000/img:1"),
    ],
)
def test_qualify(short, full):
    assert E.qualify(short) == full


# Verbatim from `make build` on a machine without a route to Docker Hub (podman 4.3.1, Debian 12).
PODMAN_NO_ROUTE = (
    "Error: initializing source docker://rocm/primus:v26.7: pinging container registry registry-1.docker.io: "
    'Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on 10.255.255.53:53: '
    "no such host"
)


def test_a_long_cause_is_shortened_at_a_link_of_the_chain_never_mid_word():
    text = E.classify_pull_error("rocm/primus:v26.7", PODMAN_NO_ROUTE)
    detail = text.split(" (", 1)[1].removesuffix(")")
    assert detail.startswith("...") and len(detail) <= 160
    kept = detail.removeprefix("...")
    assert PODMAN_NO_ROUTE.endswith(": " + kept)  # starts where a link of the chain starts
    assert text.endswith("no such host)")


def test_classify_unreachable_registry_keeps_the_cause():
    text = E.classify_pull_error("rocm/primus:v26.7", PODMAN_NO_REGISTRY)
    assert text.startswith("registry docker.io is unreachable from this machine")
    assert text.endswith("no such host)")
    # No daemon: the registry was never asked, so it is not the registry's failure.
    assert E.classify_pull_error("rocm/primus:v26.7", DOCKER_NO_DAEMON).startswith(
        "the Docker daemon is not reachable"
    )


def test_classify_other_failures():
    assert "has no such image" in E.classify_pull_error(
        "ghcr.io/a/b:1", "Error: reading manifest 1 in ghcr.io/a/b: manifest unknown"
    )
    assert "refused access" in E.classify_pull_error(
        "ghcr.io/a/b:1", "Error: unauthorized: authentication required"
    )


def test_podman_build_command_is_exact(tmp_path):
    engine = E.Engine(name="podman", argv=("podman", "--storage-driver", "vfs"), version="4.3.1")
    cmd = E.build_command(
        engine,
        context=tmp_path,
        iidfile=tmp_path / "iid",
        build_args={"ROCMSTACK_REVISION": "abc", "ROCMSTACK_CREATED": "2026-11-29T00:00:00Z"},
        labels={"org.opencontainers.image.source": "https://example.org/x"},
        cache_from=("quay.io/a/cache",),
    )
    assert cmd == [
        "podman",
        "--storage-driver",
        "vfs",
        "build",
        "--format",
        "oci",
        "--isolation",
        "chroot",
        "--layers",
        "--platform",
        "linux/amd64",
        "--iidfile",
        str(tmp_path / "iid"),
        "--file",
        str(tmp_path / "Dockerfile"),
        "--build-arg",
        "ROCMSTACK_CREATED=2026-11-29T00:00:00Z",
        "--build-arg",
        "ROCMSTACK_REVISION=abc",
        "--label",
        "org.opencontainers.image.source=https://example.org/x",
        "--cache-from",
        "quay.io/a/cache",
        str(tmp_path),
    ]
    assert "-t" not in cmd and "--tag" not in cmd  # tags come after success only


def test_a_timestamp_fixes_podmans_times_and_no_cache_runs_every_step(tmp_path):
    podman = E.Engine(name="podman", argv=("podman",), version="4.3.1")
    cmd = E.build_command(
        podman,
        context=tmp_path,
        iidfile=tmp_path / "iid",
        build_args={},
        labels={},
        timestamp=1796549221,
        no_cache=True,
    )
    assert cmd[cmd.index("--timestamp") + 1] == "1796549221" and "--no-cache" in cmd
    assert cmd.index("--timestamp") < cmd.index("--iidfile")  # an option of build, before the context
    docker = E.Engine(name="docker", argv=("docker",), version="28.2.2")
    cmd = E.build_command(
        docker, context=tmp_path, iidfile=tmp_path / "iid", build_args={}, labels={}, timestamp=1
    )
    assert "--timestamp" not in cmd and "--no-cache" not in cmd  # BuildKit takes no --timestamp


def test_buildx_build_command(tmp_path):
    engine = E.Engine(name="docker", argv=("docker",), version="28.2.2", builder="ci")
    cmd = E.build_command(
        engine,
        context=tmp_path,
        iidfile=tmp_path / "iid",
        build_args={},
        labels={},
        cache_to=("type=registry,ref=r/c,mode=max",),
    )
    assert cmd[:7] == ["docker", "buildx", "build", "--builder", "ci", "--progress=plain", "--load"]
    assert cmd[-3:] == ["--cache-to", "type=registry,ref=r/c,mode=max", str(tmp_path)]


def test_real_podman_missing_image(podman_store):
    engine = E.Engine(name="podman", argv=("podman", "--storage-driver", "vfs"), version="x")
    runner = functools.partial(subprocess.run, env=podman_store)
    assert not E.image_present(engine, "localhost/nothing-here:1", runner=runner)
    with pytest.raises(EngineError, match="not found in the podman image store"):
        E.inspect_image(engine, "localhost/nothing-here:1", runner=runner)


def test_remote_labels_needs_skopeo_with_podman():
    engine = E.Engine(name="podman", argv=("podman",), version="x")
    with pytest.raises(EngineError, match="skopeo"):
        E.remote_labels(engine, "ghcr.io/a/b:1", which=no_tools)


def test_push_and_copy_commands_honour_insecure_registries():
    podman = E.Engine(name="podman", argv=("podman", "--storage-driver", "vfs"), version="x")
    assert E.push_command(podman, "h:5000/a:1") == ["podman", "--storage-driver", "vfs", "push", "h:5000/a:1"]
    insecure = E.Engine(name="podman", argv=("podman",), version="x", tls_verify=False)
    assert E.push_command(insecure, "h:5000/a:1") == ["podman", "push", "--tls-verify=false", "h:5000/a:1"]
    assert E.copy_command(insecure, "h:5000/a:r-1", "h:5000/a:v1") == [
        "skopeo",
        "copy",
        "--all",
        "--src-tls-verify=false",
        "--dest-tls-verify=false",
        "docker://h:5000/a:r-1",
        "docker://h:5000/a:v1",
    ]
    docker = E.Engine(name="docker", argv=("docker",), version="x", tls_verify=False)
    assert E.push_command(docker, "h:5000/a:1") == [
        "docker",
        "push",
        "h:5000/a:1",
    ]  # the daemon's setting decides
    assert E.copy_command(docker, "r/a:r-1", "r/a:v1") == [
        "docker",
        "buildx",
        "imagetools",
        "create",
        "--tag",
        "r/a:v1",
        "r/a:r-1",
    ]


# `docker buildx inspect elated_tesla`, as printed in docker/buildx docs/reference/buildx_inspect.md (the
# builder block; the node block follows with its own "Driver Options:" line).
BUILDX_INSPECT = """Name:          elated_tesla
Driver:        docker-container
Last Activity: 2022-11-30 12:42:47 +0100 CET

Nodes:
Name:           elated_tesla0
Endpoint:       unix:///var/run/docker.sock
Driver Options: env.BUILDKIT_STEP_LOG_MAX_SIZE="10485760"
Status:         running
"""


def test_buildx_asks_for_provenance_unless_the_docker_driver_refuses_it(tmp_path):
    assert E.buildx_driver(BUILDX_INSPECT) == "docker-container"
    assert E.buildx_driver("no such builder") is None

    def cmd(driver):
        engine = E.Engine(name="docker", argv=("docker",), version="28.2.2", driver=driver)
        return E.build_command(engine, context=tmp_path, iidfile=tmp_path / "iid", build_args={}, labels={})

    with_attest = cmd(E.buildx_driver(BUILDX_INSPECT))
    i = with_attest.index("--attest")
    assert with_attest[i + 1] == "type=provenance,mode=max"
    # The plain docker driver refuses attestations ("Attestation is not supported for the docker driver").
    assert "--attest" not in cmd("docker") and "--attest" not in cmd(None)
    podman = E.Engine(name="podman", argv=("podman",), version="5")
    assert "--attest" not in E.build_command(
        podman, context=tmp_path, iidfile=tmp_path / "iid", build_args={}, labels={}
    )


def test_podman_pushes_the_checked_image_id_and_promote_reads_by_digest():
    from rocmstack.container.engine import Engine, by_digest, push_command

    podman = Engine(name="podman", argv=("podman",), version="4")
    assert push_command(podman, "r.io/a/b:t", "sha256:" + "c" * 64) == [
        "podman",
        "push",
        "c" * 64,
        "r.io/a/b:t",
    ]
    assert push_command(podman, "r.io/a/b:t") == ["podman", "push", "r.io/a/b:t"]
    docker = Engine(name="docker", argv=("docker",), version="27")
    assert push_command(docker, "r.io/a/b:t", "c" * 64) == ["docker", "push", "r.io/a/b:t"]
    assert (
        by_digest("localhost:5000/a/b:r-123", "sha256:" + "d" * 64) == "localhost:5000/a/b@sha256:" + "d" * 64
    )


def test_remote_manifest_of_an_index_lists_its_images_not_its_attestations():
    """skopeo's --raw of a tag holding an OCI index (as `podman manifest push` or buildx with provenance
    writes it): the result names the config digests of the index's images, and no config of its own."""
    import json

    mine = "sha256:" + "1" * 64
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": "sha256:" + "a" * 64,
                "size": 1,
                "platform": {"architecture": "amd64", "os": "linux"},
            },
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": "sha256:" + "b" * 64,
                "size": 1,
                "annotations": {"vnd.docker.reference.type": "attestation-manifest"},
                "platform": {"architecture": "unknown", "os": "unknown"},
            },
        ],
    }
    answers = {
        "docker://r.io/x:t": json.dumps(index),
        "docker://r.io/x@sha256:" + "a" * 64: json.dumps({"schemaVersion": 2, "config": {"digest": mine}}),
    }
    asked = []

    def runner(argv, **kw):
        asked.append(argv[-1])
        if "--raw" in argv:
            return subprocess.CompletedProcess(argv, 0, answers[argv[-1]], "")
        return subprocess.CompletedProcess(argv, 0, json.dumps({"Digest": "sha256:" + "c" * 64}), "")

    engine = E.Engine(name="podman", argv=("podman",), version="x")
    remote = E.remote_manifest(engine, "r.io/x:t", which=lambda tool: "/usr/bin/" + tool, runner=runner)
    assert remote == {
        "digest": "sha256:" + "c" * 64,
        "config": None,
        "index": True,
        "images": [mine],
        "more": False,
    }
    assert "docker://r.io/x@sha256:" + "b" * 64 not in asked  # the attestation is not read


@pytest.fixture
def docker_down(tmp_path, monkeypatch):
    """A `docker` on PATH that answers every command as docker does with no daemon: the message, exit 1."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "docker"
    fake.write_text(f"#!/bin/sh\necho '{DOCKER_NO_DAEMON}' >&2\nexit 1\n")
    fake.chmod(0o755)
    path = f"{bindir}:{E.os.environ['PATH']}"
    monkeypatch.setenv("PATH", path)
    return path


def test_a_docker_daemon_that_is_down_is_not_an_absent_image(docker_down):
    """A daemon that was down was reported as "image ... not found" (fix: build it or pull it)."""
    engine = E.Engine(name="docker", argv=("docker",), version="")
    for call in (E.inspect_image, E.image_present):
        with pytest.raises(EngineError) as err:
            call(engine, "rocmstack/verl:x")
        assert err.value.exit_code == 4
        assert err.value.message == f"docker: daemon not reachable ({DOCKER_NO_DAEMON})"
        assert "systemctl start docker" in (err.value.fix or "") and "not found" not in err.value.one_line()


def test_validate_with_docker_down_exits_4_naming_the_daemon(docker_down):
    from tests.conftest import run_cli

    res = run_cli("validate", "rocmstack/verl:x", "--engine", "docker", env={"PATH": docker_down})
    assert res.code == 4
    last = res.err.strip().splitlines()[-1]
    assert last.startswith(
        "rocmstack: error: docker: daemon not reachable (Cannot connect to the Docker daemon"
    )
    assert "not found" not in last and "Traceback" not in res.err


def test_buildah_steps_and_run_prefix_share_the_builds_image_store(monkeypatch):
    monkeypatch.setenv(E.PODMAN_DRIVER_ENV, "vfs")
    assert E.run_prefix("docker") == ("docker",)
    assert E.run_prefix("buildah") == ("buildah", "--storage-driver", "vfs")
    setup, run, cleanup = E.buildah_steps("img:1", "c1", ("true",), from_flags=("--device", "/dev/kfd"))
    assert setup == (
        "buildah",
        "--storage-driver",
        "vfs",
        "from",
        "--pull=never",
        "--name",
        "c1",
        "--device",
        "/dev/kfd",
        "img:1",
    )
    assert run == ("buildah", "--storage-driver", "vfs", "run", "--isolation", "chroot", "c1", "--", "true")
    assert cleanup == ("buildah", "--storage-driver", "vfs", "rm", "c1")


def fake_engines(working: set[str]):
    """which() and a runner for engines that are installed and answer their version probe when in WORKING
    (docker: a daemon with buildx); the runner records every command it was given."""
    calls: list[list[str]] = []

    def which(name):
        return f"/usr/bin/{name}" if name in working else None

    def runner(argv, **_kw):
        calls.append(list(argv))
        answers = {
            "docker": "28.0.1",
            "podman": "4.3.1",
            "buildah": "buildah version 1.28.2 (image-spec 1.1.0)",
        }
        if argv[0] in working:
            out = "" if argv[1:3] == ["buildx", "inspect"] else answers[argv[0]]
            return subprocess.CompletedProcess(argv, 0, out, "")
        return subprocess.CompletedProcess(argv, 1, "", f"{argv[0]}: cannot connect")

    return which, runner, calls


@pytest.mark.parametrize(
    ("working", "need", "picked"),
    [
        # this CI machine: podman and buildah (the docker client has no daemon)
        ({"podman", "buildah"}, "build", "podman"),
        ({"podman", "buildah"}, "run", "podman"),
        ({"podman", "buildah"}, "probe", "buildah"),
        # docker only
        ({"docker"}, "build", "docker"),
        ({"docker"}, "run", "docker"),
        ({"docker"}, "probe", "docker"),
        # all three: a working Docker daemon first for every use
        ({"docker", "podman", "buildah"}, "build", "docker"),
        ({"docker", "podman", "buildah"}, "run", "docker"),
        ({"docker", "podman", "buildah"}, "probe", "docker"),
        # buildah alone runs commands in images, it never builds or pushes
        ({"buildah"}, "run", "buildah"),
        ({"buildah"}, "probe", "buildah"),
    ],
)
def test_detect_walks_the_one_order_for_what_the_use_needs(working, need, picked):
    which, runner, _ = fake_engines(working)
    assert E.detect("auto", need=need, which=which, runner=runner).name == picked
    assert E.ORDER == ("docker", "podman", "buildah")


def test_detect_keeps_its_build_default_and_names_every_engine_it_tried():
    which, runner, calls = fake_engines({"buildah"})
    with pytest.raises(EngineError) as err:
        E.detect(which=which, runner=runner)  # need="build": buildah is never tried
    assert "docker: not installed; podman: not installed" in err.value.one_line()
    assert not any(c[0] == "buildah" for c in calls)
    with pytest.raises(EngineError, match=r"\(docker: not installed; buildah: not installed\)"):
        E.detect(need="probe", which=fake_engines(set())[0], runner=runner)


def test_an_engine_a_use_cannot_take_is_one_input_error_line_naming_the_choices():
    with pytest.raises(InputError) as err:
        E.detect("buildah")
    assert err.value.message == "--engine 'buildah': not an engine for this command"
    assert err.value.fix == "one of auto, docker, podman"
    with pytest.raises(InputError) as err:
        E.choose("lxc", need="run")
    assert err.value.message == "--engine 'lxc': unknown engine"
    assert err.value.fix == "one of auto, docker, podman, buildah"
    with pytest.raises(InputError, match="--builder"):
        E.detect("buildah", need="run", builder="b1")


def test_choose_takes_an_explicit_engine_unprobed_and_auto_through_detect():
    assert E.choose("podman", need="probe", which=lambda _n: None) == "podman"
    which, _, _ = fake_engines(set())
    with pytest.raises(EngineError, match="no usable container engine"):
        E.choose("auto", need="run", which=which)


def test_every_engine_help_lists_the_one_list():
    assert E.engine_help("build") == "auto | docker | podman (auto: the first of docker, podman that works)"
    assert E.engine_help("run").startswith("auto | docker | podman | buildah (auto: the first of docker, ")


def test_run_in_image_argv_for_buildah_podman_and_docker(monkeypatch):
    monkeypatch.setenv(E.PODMAN_DRIVER_ENV, "vfs")
    cmd = ("python3", "-c", "print(1)")
    buildah = E.run_in_image_argv("buildah", "img:1", cmd, name="c1", flags=("--device", "/dev/kfd"))
    assert buildah.setup == (
        "buildah", "--storage-driver", "vfs", "from", "--pull=never", "--name", "c1", "--device", "/dev/kfd", "img:1",
    )  # fmt: skip
    assert buildah.run == (
        "buildah",
        "--storage-driver",
        "vfs",
        "run",
        "--isolation",
        "chroot",
        "c1",
        "--",
        *cmd,
    )
    assert buildah.cleanup == ("buildah", "--storage-driver", "vfs", "rm", "c1")
    podman = E.run_in_image_argv("podman", "img:1", cmd, name="c1", pull_never=True)
    assert podman.setup is None and podman.cleanup is None
    assert podman.run == (
        "podman", "--storage-driver", "vfs", "run", "--rm", "--pull=never", "--entrypoint", "python3", "img:1",
        "-c", "print(1)",
    )  # fmt: skip
    docker = E.run_in_image_argv(
        "docker",
        "img:1",
        cmd,
        name="c1",
        flags=("--gpus", "all"),
        mounts=("--volume", "/a:/b"),
        init=True,
        named=True,
    )
    assert docker.run == (
        "docker", "run", "--rm", "--init", "--name", "c1", "--gpus", "all", "--volume", "/a:/b", "--entrypoint",
        "python3", "img:1", "-c", "print(1)",
    )  # fmt: skip
    assert docker.cleanup == ("docker", "rm", "--force", "c1")
    assert docker.commands() == [docker.run, docker.cleanup]


def test_run_in_image_returns_the_run_and_always_removes_the_working_container(monkeypatch):
    monkeypatch.delenv(E.PODMAN_DRIVER_ENV, raising=False)
    calls: list[list[str]] = []

    def runner(argv, **kw):
        calls.append(list(argv))
        if "run" in argv:
            raise subprocess.TimeoutExpired(argv, kw["timeout"])
        return subprocess.CompletedProcess(argv, 0, "", "")

    out = E.run_in_image("buildah", "img:1", ("true",), name="c1", timeout=5, runner=runner)
    assert out.returncode == 124 and "no answer in 5s" in out.stderr
    assert [c[1] for c in calls] == ["from", "run", "rm"] and calls[-1] == ["buildah", "rm", "c1"]


def test_run_in_image_stops_when_the_image_cannot_be_opened():
    calls: list[list[str]] = []

    def runner(argv, **_kw):
        calls.append(list(argv))
        return subprocess.CompletedProcess(argv, 125, "", "Error: img:1: image not known")

    with pytest.raises(EngineError, match=r"buildah cannot open image img:1: Error: img:1: image not known"):
        E.run_in_image("buildah", "img:1", ("true",), name="c1", timeout=5, runner=runner)
    assert len(calls) == 1 and "from" in calls[0]


def test_run_in_image_names_a_missing_engine():
    def runner(argv, **_kw):
        raise FileNotFoundError(argv[0])

    with pytest.raises(EngineError, match="docker is not installed"):
        E.run_in_image("docker", "img:1", ("true",), name="c1", timeout=5, runner=runner)


def test_store_engine_reads_the_store_each_engine_builds_into(monkeypatch):
    """inspect, read_file and a dry run's command take the store unprobed: buildah's is podman's."""
    monkeypatch.setenv(E.PODMAN_DRIVER_ENV, "vfs")
    docker, podman, buildah = (E.store_engine(n) for n in ("docker", "podman", "buildah"))
    assert (docker.name, docker.argv) == ("docker", ("docker",))
    assert (podman.name, podman.argv) == ("podman", ("podman", "--storage-driver", "vfs"))
    assert buildah == podman and E.store_engine("podman", "(not usable here)").version == "(not usable here)"


def _recorded(rc=0, stdout=""):
    calls: list[list[str]] = []

    def runner(argv, **_kw):
        calls.append(list(argv))
        return subprocess.CompletedProcess(argv, rc, stdout, "")

    return calls, runner


def test_the_engine_object_runs_each_engines_own_command(monkeypatch):
    """tag, untag, push, copy and inspect_remote: one call each, with the engine's own argv."""
    monkeypatch.setenv(E.PODMAN_DRIVER_ENV, "vfs")
    podman = E.named("podman", "5")
    docker = E.Engine(name="docker", argv=("docker",), version="27", builder="ci")
    calls, runner = _recorded()
    for engine in (podman, docker):
        engine.tag("sha256:ab", "r.io/a:1", runner=runner)
        engine.untag("sha256:ab", "r.io/a:1", runner=runner)
        engine.push("r.io/a:1", "sha256:ab", runner=runner)
        engine.copy("r.io/a@sha256:cd", "r.io/a:v1", runner=runner)
        engine.inspect_remote("r.io/a:1", runner=runner)
    pod = ["podman", "--storage-driver", "vfs"]
    assert calls == [
        [*pod, "tag", "sha256:ab", "r.io/a:1"],
        [*pod, "untag", "sha256:ab", "r.io/a:1"],
        [*pod, "push", "ab", "r.io/a:1"],
        ["skopeo", "copy", "--all", "docker://r.io/a@sha256:cd", "docker://r.io/a:v1"],
        ["skopeo", "inspect", "--no-tags", "docker://r.io/a:1"],
        ["docker", "tag", "sha256:ab", "r.io/a:1"],
        ["docker", "image", "rm", "--no-prune", "r.io/a:1"],
        ["docker", "push", "r.io/a:1"],
        ["docker", "buildx", "imagetools", "create", "--tag", "r.io/a:v1", "r.io/a@sha256:cd"],
        ["docker", "buildx", "imagetools", "inspect", "r.io/a:1"],
    ]
    calls.clear()
    E.Engine(name="podman", argv=("podman",), version="5", tls_verify=False).inspect_remote(
        "h:5000/a:1", runner
    )
    assert calls == [["skopeo", "inspect", "--tls-verify=false", "--no-tags", "docker://h:5000/a:1"]]


def test_a_missing_engine_or_a_silent_one_is_an_exit_code_not_an_exception():
    def missing(argv, **_kw):
        raise FileNotFoundError(argv[0])

    def silent(argv, **kw):
        raise subprocess.TimeoutExpired(argv, kw["timeout"])

    engine = E.named("docker")
    assert engine.tag("ab", "r/a:1", runner=missing).returncode == 127
    out = engine.push("r/a:1", runner=silent)
    assert out.returncode == 124 and f"no answer in {E.PUSH_TIMEOUT}s" in out.stderr


def test_what_each_engine_does_differently_is_asked_of_the_engine(monkeypatch):
    monkeypatch.delenv(E.PODMAN_DRIVER_ENV, raising=False)
    docker, podman, buildah = (E.named(n) for n in ("docker", "podman", "buildah"))
    assert [e.argv for e in (docker, podman, buildah)] == [("docker",), ("podman",), ("buildah",)]
    assert (docker.daemon, podman.daemon, buildah.daemon) == (True, False, False)
    assert (docker.group_add, podman.group_add, buildah.group_add) == (True, True, False)
    assert (docker.pulls_transports, podman.pulls_transports) == (False, True)
    assert docker.gpu_flags() == ["--gpus", "all"]
    assert podman.gpu_flags() == buildah.gpu_flags() == ["--device", "nvidia.com/gpu=all"]
    assert (docker.progress, podman.progress) == (E.BUILDKIT_PROGRESS, E.STEP_PROGRESS)
    # only a named buildx builder pulls by itself
    assert E.Engine(name="docker", argv=("docker",), version="x", builder="ci").builder_pulls
    assert (
        not docker.builder_pulls
        and not E.Engine(name="podman", argv=(), version="x", builder="ci").builder_pulls
    )
    # publish: buildah's image store is podman's, which pushes it
    assert [E.store_choice(c) for c in E.ENGINES] == ["auto", "docker", "podman", "podman"]


# Outside container/ nothing branches on an engine's name or reaches into the engine module's private
# helpers: what differs is asked of the Engine. The command layer included.
ENGINE_MODULE = "rocmstack.container.engine"
ENGINE_NAMES = frozenset(E.ORDER)


def _names_an_engine(node: ast.AST) -> bool:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_an_engine(e) for e in node.elts)
    return isinstance(node, ast.Constant) and node.value in ENGINE_NAMES


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def engine_name_branches(source: str) -> list[str]:
    """Each place SOURCE compares a literal engine name (==, !=, in, not in, is, a match case), or uses a
    private name of the engine module (``engines._run``, ``from ... import _run``), as "line N: what"."""
    tree = ast.parse(source)
    module = {ENGINE_MODULE}  # the names the engine module is bound to in SOURCE
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "rocmstack.container":
            module |= {a.asname or a.name for a in node.names if a.name == "engine"}
        elif isinstance(node, ast.Import):
            module |= {a.asname for a in node.names if a.name == ENGINE_MODULE and a.asname}
        if isinstance(node, ast.ImportFrom) and node.module == ENGINE_MODULE:
            found += [f"line {node.lineno}: imports {a.name}" for a in node.names if a.name.startswith("_")]
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(_names_an_engine(n) for n in (node.left, *node.comparators)):
            found.append(f"line {node.lineno}: compares with an engine name: {ast.unparse(node)}")
        elif isinstance(node, ast.MatchValue) and _names_an_engine(node.value):
            found.append(f"line {node.lineno}: matches an engine name: {ast.unparse(node.value)}")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and _dotted(node.value) in module
        ):
            found.append(f"line {node.lineno}: uses {ast.unparse(node)}")
    return sorted(found, key=lambda f: int(f.split(":")[0].split()[1]))


def test_nothing_outside_container_branches_on_an_engines_name():
    package = Path(E.__file__).parents[1]
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        if rel.parts[0] == "container":
            continue
        found += [f"rocmstack/{rel}: {f}" for f in engine_name_branches(path.read_text(encoding="utf-8"))]
    assert not found, "ask the Engine (container/engine.py) instead:\n" + "\n".join(found)


def test_the_engine_name_guard_catches_each_kind_of_branch():
    injected = textwrap.dedent("""
        from rocmstack.container import engine as engines
        from rocmstack.container.engine import _run, qualify
        import rocmstack.container.engine as E2
        if engine.name == "docker":
            pass
        flags = [] if "podman" != chosen else ["-x"]
        if choice in ("auto", "buildah"):
            pass
        if engine.name not in ["docker"]:
            pass
        match engine.name:
            case "podman":
                pass
        engines._run(["podman", "tag"], 5)
        out = E2._last_line("x")
        rocmstack.container.engine._run(["x"], 1)
    """)
    found = engine_name_branches(injected)
    assert [f.split(":")[0] for f in found] == [f"line {n}" for n in (3, 5, 7, 8, 10, 13, 15, 16, 17)]
    # naming an engine is fine: messages, argv, the ENGINES tuple, asking the engine, other modules' privates
    clean = textwrap.dedent("""
        from rocmstack.container import engine as engines
        ENGINES = ("auto", "docker", "podman", "buildah")
        argv = ["docker", "buildx", "build"]
        message = f"--base-from: for podman and buildah, not {engine.name}"
        if engine.daemon or engine.name == other.name or "docker" + x:
            flags = engine.gpu_flags()
        engines.last_line(out.stderr)
        other._run()
        self._run()
    """)
    assert engine_name_branches(clean) == []
