"""A hostile image through `validate` and `publish`, for real: it gets nothing out and nothing past the gate.

The image is the build test's image (tests/integration/test_build_podman.py) with its in-image rocmstack
replaced by a script that does what an untrusted image can: it plants links to host files and folders
where the host collects the report, leaves a FIFO and a setuid file there, writes a report that claims
to pass with markup and terminal escapes in every field, has its doctor ask for seccomp=unconfined,
and ships its lock unreadable. buildah runs it (chroot isolation, as in test_validate_podman.py), and
publish and the push guard face a real registry (that module's fixture).
"""

from __future__ import annotations

import json
import stat
import subprocess
import textwrap

import pytest
from test_build_podman import podman, rocmstack, serve_registry
from test_validate_podman import ARGS, _need, registry  # noqa: F401  (registry: a fixture)

from rocmstack.container import engine as engines
from rocmstack.contract import RENDER_HASH_LABEL
from rocmstack.errors import CheckFailed
from rocmstack.publish import push

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
HOSTILE = "localhost/rocmstack-test-hostile:latest"
MARKUP = "<script>alert(1)</script><img src=x onerror=alert(2)>\x1b[2J[red]x[/red]|\n| forged |"
SECRET = "registry-token-do-not-leak"

FAKE_ROCMSTACK = textwrap.dedent("""\
    #!/usr/bin/python3
    import json, os
    SECRET_FILE, HOST_DIR, HASH, MARKUP = {secret!r}, {host_dir!r}, {render_hash!r}, {markup!r}
    out = "/report"
    os.symlink(SECRET_FILE, f"{{out}}/leak.txt")
    os.symlink("/etc", f"{{out}}/etc")
    os.symlink(HOST_DIR, f"{{out}}/smoke")
    os.mkdir(f"{{out}}/bench")
    os.symlink(SECRET_FILE, f"{{out}}/bench/rollout.json")
    os.mkfifo(f"{{out}}/bench/roofline.png")
    stage = {{"name": MARKUP, "status": "pass", "seconds": MARKUP, "summary": MARKUP}}
    report = {{
        "schema": "rocmstack.validate/2", "rocmstack_version": MARKUP, "created": MARKUP, "seconds": MARKUP,
        "mode": "container", "passed": True, "verdict": "PASS: " + MARKUP, "render_hash": HASH,
        "image": {{"ref": MARKUP, "id": MARKUP, "labels": {{"dev.rocmstack.x": MARKUP}}, "lock": None}},
        "engine": {{"engine": MARKUP, "commands": [[MARKUP]]}},
        "host": {{"hostname": MARKUP, "platform": MARKUP, "cpus": MARKUP}},
        "stages": [stage, dict(stage, name="smoke"), dict(stage, name="bench")],
        "doctor": {{"report": {{"verdict": MARKUP, "checks": [{{
            "id": "seccomp-probe", "group": MARKUP, "status": "fail", "summary": MARKUP,
            "fix": "run with --security-opt seccomp=unconfined " + MARKUP}}]}}}},
    }}
    with open(f"{{out}}/report.json", "w") as f:
        json.dump(report, f)
    os.chmod(f"{{out}}/report.json", 0o4777)
    print(MARKUP, flush=True)
""")


@pytest.fixture(scope="module")
def hostile(podman_env, first_build, tmp_path_factory):
    _need("buildah")
    root = tmp_path_factory.mktemp("hostile")
    secret = root / "host-secret.txt"
    secret.write_text(SECRET)
    host_dir = root / "host-dir"
    host_dir.mkdir()
    (host_dir / "summary.json").write_text(json.dumps({"token": SECRET}))
    ctx = root / "ctx"
    ctx.mkdir()
    manifest = first_build["manifest"]
    (ctx / "rocmstack").write_text(
        FAKE_ROCMSTACK.format(
            secret=str(secret), host_dir=str(host_dir), render_hash=manifest["render_hash"], markup=MARKUP
        )
    )
    (ctx / "Containerfile").write_text(
        f"FROM {manifest['image']['id']}\nUSER 0\n"
        "COPY --chmod=0755 rocmstack /usr/local/bin/rocmstack\n"
        "RUN chmod 0600 /opt/rocmstack/lock.json\nUSER 1000\n"
    )
    made = podman(
        podman_env,
        "build",
        "--isolation",
        "chroot",
        "--format",
        "docker",
        "-t",
        HOSTILE,
        str(ctx),
        timeout=600,
    )
    assert made.returncode == 0, made.stderr[-3000:]
    out = root / "report"
    proc = rocmstack(
        podman_env, "validate", HOSTILE, "--engine", "buildah", *ARGS, "--output", str(out), "--json"
    )
    return {"proc": proc, "dir": out, "root": root, "manifest": manifest}


def test_validate_gets_nothing_out_of_a_hostile_image(hostile):
    proc, out = hostile["proc"], hostile["dir"]
    assert proc.returncode == 1, proc.stderr[-4000:]
    report = json.loads(proc.stdout)
    assert report["passed"] is False
    collect = report["stages"][0]
    assert collect["name"] == "collect" and collect["status"] == "fail"
    for refused in (
        "smoke (a link)",
        "bench/rollout.json (a link)",
        "bench/roofline.png (not a regular file)",
    ):
        assert refused in collect["summary"]
    # Nothing of the host came back: only the host's three report files and the image's SBOM (which the
    # host reads from the image itself, not from the run), none holding the secret.
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert files == ["report.html", "report.json", "report.md", "sbom.cdx.json"]
    assert report["sbom"]["path"] == "/opt/rocmstack/sbom.cdx.json"
    for p in out.rglob("*"):
        assert SECRET not in p.read_text(errors="replace") and "root:x:0:0" not in p.read_text(
            errors="replace"
        )
        assert not stat.S_IMODE(p.lstat().st_mode) & (stat.S_ISUID | stat.S_IWOTH), p
    page = (out / "report.html").read_text()
    assert "<script" not in page and "<img src=x" not in page
    assert "<script" not in (out / "report.md").read_text()
    # The terminal got no escape sequence from the image.
    assert "\x1b[2J" not in proc.stderr and "image | <script>" in proc.stderr


def test_the_image_does_not_choose_its_sandbox(hostile):
    report = json.loads(hostile["proc"].stdout)
    engine = report["engine"]
    assert engine["seccomp_unconfined"] is False and engine["seccomp_advice_from_image"] == "seccomp-probe"
    assert len(engine["commands"]) == 3  # from, run, rm: no second, unconfined run
    assert not any("--security-opt" in c for c in engine["commands"])


def test_validate_runs_the_inspected_image_by_id(hostile, podman_env):
    report = json.loads(hostile["proc"].stdout)
    image_id = podman(podman_env, "image", "inspect", "--format", "{{.Id}}", HOSTILE).stdout.strip()
    assert report["image"]["ref"] == HOSTILE and report["image"]["id"].removeprefix("sha256:") == image_id
    assert report["engine"]["commands"][0][-1] == image_id  # buildah from <id>, not the tag
    assert report["image"]["digest"], report["image"]


def test_publish_keeps_the_gate_shut_and_the_registry_empty(hostile, registry):  # noqa: F811  (a fixture)
    env = registry["env"]
    manifest = hostile["manifest"]
    repo = f"{registry['host']}/hostile/tiny"
    refs = [f"{repo}:{manifest['tags']['descriptive']}", f"{repo}:{manifest['tags']['content']}"]
    for ref in refs:
        assert podman(env, "tag", HOSTILE, ref).returncode == 0
    proc = rocmstack(env, "publish", refs[0], "--reports", str(hostile["dir"]), "--engine", "podman")
    assert proc.returncode == 1 and "refusing to publish" in proc.stderr, proc.stderr[-3000:]
    for ref in refs:
        seen = subprocess.run(
            ["skopeo", "inspect", "--no-tags", f"docker://{ref}"], env=env, capture_output=True, timeout=120
        )
        assert seen.returncode != 0, ref  # nothing reached the registry


def test_the_guard_tells_two_builds_of_one_render_apart(hostile, registry, podman_env, monkeypatch):  # noqa: F811  (fixtures)
    """The hostile image carries the first build's render-hash label: a registry tag holding it must not
    count as 'already pushed' for the real build (the tags would split between two builds)."""
    env = registry["env"]
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    manifest = hostile["manifest"]
    ref = f"{registry['host']}/split/tiny:{manifest['tags']['content']}"
    assert podman(env, "tag", HOSTILE, ref).returncode == 0
    assert podman(env, "push", ref, timeout=600).returncode == 0
    engine = engines.Engine(
        name="podman", argv=("podman", "--storage-driver", env[engines.PODMAN_DRIVER_ENV]), version="test"
    )
    hostile_id = podman(env, "image", "inspect", "--format", "{{.Id}}", HOSTILE).stdout.strip()
    assert push.guard_verdict(engine, ref, manifest["render_hash"], image_id=hostile_id) == "skip"
    with pytest.raises(CheckFailed, match="from another build"):
        push.guard_verdict(engine, ref, manifest["render_hash"], image_id=manifest["image"]["id"])
    remote = engines.remote_manifest(engine, ref)
    assert remote and remote["config"] == "sha256:" + hostile_id and remote["digest"].startswith("sha256:")


# -- small images of their own: `podman import` of a few files, no build -------------------------------


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory):
    """An isolated podman store holding images imported from a few files: the tests below need an image's
    files and its id, not a build."""
    from test_build_podman import _store_env

    _need("podman")
    root = tmp_path_factory.mktemp("tiny")
    env = None
    for driver in ("overlay", "vfs"):
        candidate = _store_env(root / "store", driver)
        if podman(candidate, "info").returncode == 0:
            env = candidate
            break
    assert env is not None, "podman has no usable storage driver here"

    def image(ref: str, files: dict[str, bytes | str], label: str = "") -> str:
        tree = root / ref.replace("/", "_").replace(":", "_")
        tree.mkdir()
        for name, content in files.items():
            if isinstance(content, str):
                (tree / name).symlink_to(content)
            else:
                (tree / name).write_bytes(content)
        subprocess.run(["tar", "-C", str(tree), "-cf", f"{tree}.tar", "."], check=True, timeout=120)
        change = ["--change", f"LABEL {RENDER_HASH_LABEL}={label}"] if label else []
        made = podman(env, "import", *change, f"{tree}.tar", ref, timeout=600)
        assert made.returncode == 0, made.stderr
        return podman(env, "image", "inspect", "--format", "{{.Id}}", ref).stdout.strip()

    yield {"env": env, "root": root, "image": image}
    podman(env, "system", "reset", "--force")


# Runs the engine with the host's disk allowance for `cp` cut to 8 MiB (RLIMIT_FSIZE): a copy of the
# file to disk fails there; a stream through a pipe is not a file write and is bounded by the reader.
CP_FSIZE_WRAPPER = textwrap.dedent("""\
    import os, resource, sys
    if "cp" in sys.argv[1:]:
        resource.setrlimit(resource.RLIMIT_FSIZE, (8 << 20, 8 << 20))
    os.execvp(sys.argv[1], sys.argv[1:])
""")


def test_read_file_bounds_the_copy_out_of_a_real_image(tiny_store, monkeypatch):
    """A 64 MiB file against a 1 MiB limit (the SBOM read of validate): refused as too large, with no more
    than the limit taken in; the old whole-file copy onto the host's disk could not even start here."""
    import sys

    env = tiny_store["env"]
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    ref = "localhost/rocmstack-test-bigfile:1"
    tiny_store["image"](ref, {"big": b"\0" * (64 << 20), "small": b"sbom", "link": "/etc/passwd"})
    wrapper = tiny_store["root"] / "cp-fsize.py"
    wrapper.write_text(CP_FSIZE_WRAPPER)
    engine = engines.Engine(
        name="podman",
        argv=(sys.executable, str(wrapper), "podman", "--storage-driver", env[engines.PODMAN_DRIVER_ENV]),
        version="test",
    )
    assert engines.read_file(engine, ref, "/small", 1 << 20) == b"sbom"
    with pytest.raises(engines.EngineError, match="larger than 1,048,576 bytes"):
        engines.read_file(engine, ref, "/big", 1 << 20)
    assert engines.read_file(engine, ref, "/absent", 1 << 20) is None
    # podman resolves the link inside the image, where /etc/passwd is not: nothing of the host's comes out
    assert engines.read_file(engine, ref, "/link", 1 << 20) is None
    assert not list(podman(env, "ps", "--all", "--quiet").stdout.split())  # every container removed


def test_the_guard_reads_a_multi_platform_index_for_what_it_holds(tiny_store, tmp_path, monkeypatch):
    """A real registry tag holding an OCI index (`podman manifest push --all`) of another build of the same
    render: the index's digest is no build's image, and the guard refuses instead of skipping the push (the
    old answer, 'this build is already there', split the tags between the two builds)."""
    _need("docker-registry")
    _need("skopeo")
    env = tiny_store["env"]
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    render_hash = "c" * 64
    this_build = tiny_store["image"]("localhost/rocmstack-test-build-a:1", {"f": b"a"}, render_hash)
    other_build = tiny_store["image"]("localhost/rocmstack-test-build-b:1", {"f": b"b"}, render_hash)
    with serve_registry(tmp_path) as host:
        engine = engines.Engine(
            name="podman",
            argv=("podman", "--storage-driver", env[engines.PODMAN_DRIVER_ENV]),
            version="test",
            tls_verify=False,
        )
        builds = {"other": "localhost/rocmstack-test-build-b:1", "mine": "localhost/rocmstack-test-build-a:1"}
        for name, image in builds.items():
            index = f"localhost/rocmstack-test-index-{name}:1"
            assert podman(env, "manifest", "create", index).returncode == 0
            assert podman(env, "manifest", "add", index, f"containers-storage:{image}").returncode == 0
            pushed = podman(
                env,
                "manifest",
                "push",
                "--all",
                "--tls-verify=false",
                index,
                f"docker://{host}/split/tiny:{name}",
            )
            assert pushed.returncode == 0, pushed.stderr
        other_tag, mine_tag = f"{host}/split/tiny:other", f"{host}/split/tiny:mine"
        with pytest.raises(CheckFailed, match="multi-platform index whose images"):
            push.guard_verdict(engine, other_tag, render_hash, image_id=this_build)
        remote = engines.remote_manifest(engine, other_tag)
        assert remote is not None and remote.get("index") and remote["images"] == ["sha256:" + other_build]
        assert push.guard_verdict(engine, mine_tag, render_hash, image_id=this_build) == "skip"
