"""A real image build with podman (daemonless, chroot isolation) on the CPU machine. No mock.

The fixture recipe tests/fixtures/recipes/tiny-pip.yaml goes through the shipped templates, guards, patch
applier, labels and lock; its base is a Debian bookworm made here with debootstrap and `podman import`
(no registry). The root filesystem tarball is cached in ~/.cache/rocmstack-test/ (ROCMSTACK_TEST_CACHE);
the image store is fresh per run, so cache hits and misses are those of this run alone.

Pip inside the build reaches PyPI for two tiny wheels (iniconfig, tomli) and rocmstack's own runtime
requirements (the image carries rocmstack), every one at the version and hashes of the committed lock.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from rocmstack.container import engine as engines
from tests.conftest import podman_store_env, shell_view

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "tests" / "fixtures" / "recipes" / "tiny-pip.yaml"
PATCHES = ROOT / "tests" / "fixtures" / "patches"
BASE = "localhost/rocmstack-test-base:bookworm"
BASE_VERSION = "v1"  # bump when the base recipe below changes
CACHE = Path(os.environ.get("ROCMSTACK_TEST_CACHE", Path.home() / ".cache" / "rocmstack-test"))
SOURCE_URL = "https://example.org/rocmstack-e2e"
ARCH = "gfx942"
# The fixture's patches are test-only (--patches-dir). `patches-apply` is overridden anyway, to check that
# an override lands in the labels.
RENDER = ["--gpu-arch", ARCH, "--patches-dir", str(PATCHES), "--ignore-rule", "patches-apply"]
COMMON = [*RENDER, "--engine", "podman", "--source-url", SOURCE_URL]


def source_revision_time(commit: str) -> str:
    ct = subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1", "--format=%ct", commit],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout.strip()
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(os.environ.get("SOURCE_DATE_EPOCH") or ct)))


def _need(tool: str) -> None:
    if not shutil.which(tool):
        pytest.skip(f"{tool} is not installed (ci/install-system-deps.sh installs it)")


def _base_tarball() -> Path:
    """debootstrap --variant=minbase bookworm + python3/pip, trimmed; built once and cached."""
    tarball = CACHE / f"base-bookworm-{BASE_VERSION}.tar"
    if tarball.is_file():
        return tarball
    _need("debootstrap")
    if os.geteuid() != 0:
        pytest.skip("debootstrap needs root")
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rootfs.", dir=CACHE) as tmp:
        rootfs = Path(tmp) / "rootfs"
        proc = subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                "--include=python3,python3-pip,ca-certificates",
                "bookworm",
                str(rootfs),
                "http://deb.debian.org/debian",
            ],
            capture_output=True,
            text=True,
            timeout=1200,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        # Like a -slim image: no docs, man pages or locales (vfs copies the whole tree for every layer).
        for sub in (
            "usr/share/doc",
            "usr/share/man",
            "usr/share/locale",
            "usr/share/info",
            "var/cache/apt/archives",
            "var/lib/apt/lists",
        ):
            shutil.rmtree(rootfs / sub, ignore_errors=True)
        # A ROCm base image lets root pip-install into its Python; Debian's PEP 668 marker would refuse.
        for marker in rootfs.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
            marker.unlink()
        # Trust what this machine trusts (the egress proxy's CA), so pip inside the build reaches PyPI.
        host_ca = Path("/etc/ssl/certs/ca-certificates.crt")
        if host_ca.is_file():
            shutil.copyfile(host_ca, rootfs / "etc/ssl/certs/ca-certificates.crt")
            (rootfs / "etc/pip.conf").write_text("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n")
        part = tarball.with_suffix(".part")
        with tarfile.open(part, "w") as tar:
            for entry in sorted(rootfs.iterdir()):
                if entry.name in ("proc", "sys", "dev"):
                    tar.add(entry, arcname=entry.name, recursive=False)
                else:
                    tar.add(entry, arcname=entry.name)
        part.replace(tarball)
    return tarball


def _store_env(store: Path, driver: str) -> dict[str, str]:
    shutil.rmtree(store, ignore_errors=True)
    store.mkdir(parents=True)
    return {**podman_store_env(store, driver), engines.PODMAN_DRIVER_ENV: driver}


@pytest.fixture(scope="module")
def podman_env(tmp_path_factory):
    """This module's own store: its tests bump pins, re-tag and interrupt builds, and its first build must
    start from an empty cache. The other modules share one store (conftest)."""
    yield from podman_store(tmp_path_factory)


def podman_store(tmp_path_factory):
    """An isolated podman store with the base image imported; env for every rocmstack/podman call.

    overlay where the kernel allows it (this machine does: a build is ~10x faster than with vfs, which
    copies the whole tree for every layer); vfs otherwise, as inside an unprivileged container.
    """
    _need("podman")
    tarball = _base_tarball()
    store = tmp_path_factory.mktemp("podman") / "store"
    forced = os.environ.get("ROCMSTACK_TEST_STORAGE_DRIVER")  # e.g. vfs, to run the slow path on purpose
    for driver in (forced,) if forced else ("overlay", "vfs"):
        env = _store_env(store, driver)
        proc = subprocess.run(
            ["podman", "--storage-driver", driver, "import", str(tarball), BASE],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if proc.returncode == 0:
            break
    assert proc.returncode == 0, proc.stderr
    yield env
    subprocess.run(
        ["podman", "--storage-driver", env[engines.PODMAN_DRIVER_ENV], "system", "reset", "--force"],
        env=env,
        capture_output=True,
        timeout=600,
    )
    shutil.rmtree(store, ignore_errors=True)


def rocmstack(env, *args, timeout=900):
    return subprocess.run(
        [sys.executable, "-m", "rocmstack", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def podman(env, *args, timeout=300):
    return subprocess.run(
        ["podman", "--storage-driver", env[engines.PODMAN_DRIVER_ENV], *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def exists(env, ref: str) -> bool:
    return podman(env, "image", "exists", ref).returncode == 0


def image_id(env, ref: str) -> str:
    return podman(env, "image", "inspect", "--format", "{{.Id}}", ref).stdout.strip()


def image_file(env, ref: str, path: str) -> str | None:
    engine = engines.Engine(
        name="podman", argv=("podman", "--storage-driver", env[engines.PODMAN_DRIVER_ENV]), version="test"
    )
    data = engines.read_file(engine, ref, path, runner=functools.partial(subprocess.run, env=env), env=env)
    return data.decode() if data is not None else None


@pytest.fixture(scope="module")
def first_build(podman_env, tmp_path_factory):
    out = tmp_path_factory.mktemp("images")
    proc = rocmstack(podman_env, "build", str(RECIPE), *COMMON, "--output", str(out), "--json")
    assert proc.returncode == 0, proc.stderr[-6000:]
    return {"manifest": json.loads(proc.stdout), "stderr": proc.stderr, "out": out}


def test_dry_run_prints_the_exact_command(podman_env, tmp_path):
    proc = rocmstack(
        podman_env, "build", str(RECIPE), *COMMON, "--output", str(tmp_path), "--dry-run", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    cmd = plan["command"]
    driver = podman_env[engines.PODMAN_DRIVER_ENV]
    assert cmd[:9] == [
        "podman",
        "--storage-driver",
        driver,
        "build",
        "--format",
        "oci",
        "--isolation",
        "chroot",
        "--layers",
    ]
    assert f"org.opencontainers.image.source={SOURCE_URL}" in cmd
    assert (Path(cmd[-1]) / "Dockerfile").is_file()  # the context is written, so the command runs as printed
    assert not exists(podman_env, plan["tags"]["refs"][0])  # and nothing was built


def test_build_labels_lock_tags_and_patch(podman_env, first_build):
    m = first_build["manifest"]
    tags = m["tags"]
    assert tags["content"] == "r-" + m["render_hash"][:12]
    assert tags["descriptive"] == f"tiny-2.0.1_ini2.0.0_py3.11_{ARCH}"
    assert tags["aliases"] == ["tiny-latest"]
    assert tags["applied"] == tags["refs"] and len(tags["refs"]) == 3
    for ref in tags["refs"]:
        assert exists(podman_env, ref), ref
    predicted = json.loads(rocmstack(podman_env, "tags", str(RECIPE), *RENDER, "--json").stdout)
    assert predicted["refs"] == tags["refs"]  # `rocmstack tags` names exactly what the build tagged
    assert m["engine"]["name"] == "podman" and m["base"]["image"] == BASE and m["base"]["id"]
    assert m["cache"]["misses"] > 0 and all(s["seconds"] >= 0 for s in m["steps"])
    assert Path(m["log"]).is_file() and "STEP 1/" in Path(m["log"]).read_text()

    proc = rocmstack(podman_env, "inspect", tags["refs"][0], "--engine", "podman", "--json")
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    labels, lock = seen["labels"], seen["lock"]
    # The revision is the checkout's real commit (HEAD may move while the suite runs: read it from the build).
    sha, created = m["build_args"]["ROCMSTACK_REVISION"], m["build_args"]["ROCMSTACK_CREATED"]
    commit = sha.removesuffix("-dirty")
    assert (
        len(commit) == 40
        and subprocess.run(
            ["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"], timeout=30
        ).returncode
        == 0
    )
    assert created == source_revision_time(commit)
    assert labels["org.opencontainers.image.revision"] == sha
    assert labels["org.opencontainers.image.created"] == created
    assert labels["org.opencontainers.image.source"] == SOURCE_URL
    assert labels["dev.rocmstack.recipe"] == "tiny-pip"
    assert labels["dev.rocmstack.render-hash"] == m["render_hash"]
    assert "iniconfig:2.0.0" in labels["dev.rocmstack.pins"].split(",")
    assert labels["dev.rocmstack.ignored-rules"] == "patches-apply"
    assert lock["recipe"] == "tiny-pip" and lock["render_hash"] == m["render_hash"]
    assert lock["components"]["tomli"]["version"] == "2.0.1" and lock["patches"] == ["tomli-marker"]
    assert lock["rocmstack"]["revision"] == sha
    # Installed from the committed lock (tests/fixtures/recipes/tiny-pip.lock.json): exact pins, hashes required.
    committed = json.loads(RECIPE.with_name("tiny-pip.lock.json").read_text())["entries"][ARCH]
    assert lock["packages"] == committed["packages"] and {p["name"] for p in lock["packages"]} >= {
        "iniconfig",
        "tomli",
    }
    dockerfile = shell_view(next(Path(first_build["out"]).rglob("Dockerfile")).read_text())
    # ray, verl and rocmstack's own layer (its runtime requirements, the image carries rocmstack): all three
    # from the lock, and pip check after the last of them.
    installs = "pip install --no-deps --require-hashes -r /opt/rocmstack/requirements/"
    assert dockerfile.count(installs) == 3
    assert dockerfile.index(f"{installs}rocmstack.txt") < dockerfile.index("guard.py pip-check")
    assert not [r for r in committed["rocmstack_requirements"] if f'"{r}"' in dockerfile]  # no range
    pins = image_file(podman_env, tags["refs"][0], "/opt/rocmstack/requirements/ray.txt")
    assert pins.startswith("iniconfig==2.0.0 \\\n    --hash=sha256:")
    own = image_file(podman_env, tags["refs"][0], "/opt/rocmstack/requirements/rocmstack.txt")
    assert (
        {p["name"] for p in committed["packages"] if p["layer"] == "rocmstack"}
        == {line.split("==")[0] for line in own.splitlines() if "==" in line}
        >= {"pydantic", "typer", "uv"}
    )
    log = Path(m["log"]).read_text()
    assert "rocmstack guard: pip check passed" in log
    # diff reads the image's own lock through the engine: same packages and commits as the committed lock.
    same = rocmstack(
        podman_env,
        "diff",
        tags["refs"][0],
        str(RECIPE.with_name("tiny-pip.lock.json")),
        "--engine",
        "podman",
        "--json",
    )
    assert same.returncode == 0, same.stderr
    assert [c for c in json.loads(same.stdout)["changes"] if c["section"] in ("package", "git")] == []

    foreign = rocmstack(podman_env, "inspect", BASE, "--engine", "podman")
    assert (
        foreign.returncode == 1
        and "/opt/rocmstack/lock.json is missing: not a rocmstack image" in foreign.stderr
    )

    marker = json.loads(
        image_file(podman_env, tags["refs"][0], "/opt/rocmstack/patches/applied/tomli-marker.json")
    )
    assert marker["id"] == "tomli-marker" and marker["component"] == "tomli"
    patched = image_file(podman_env, tags["refs"][0], marker["target"])
    assert 'ROCMSTACK_PATCHED = "tomli-marker"' in patched
    constraints = image_file(podman_env, tags["refs"][0], "/opt/rocmstack/constraints.txt")
    assert constraints.startswith("wheel==")  # the guard froze the base's package


def test_bumping_one_pin_rebuilds_only_from_its_layer(podman_env, first_build):
    proc = rocmstack(
        podman_env,
        "build",
        str(RECIPE),
        *COMMON,
        "--set",
        "iniconfig.version=2.1.0",
        "--output",
        str(first_build["out"]),
        "--json",
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    m = proc.stdout and json.loads(proc.stdout)
    steps = [s for s in m["steps"] if not s["instruction"].upper().startswith("FROM")]
    bumped = next(i for i, s in enumerate(steps) if "iniconfig==2.1.0" in s["instruction"])
    before, after = steps[:bumped], steps[bumped:]
    assert before and all(s["cached"] for s in before), [
        s["instruction"][:60] for s in before if not s["cached"]
    ]
    assert not any(s["cached"] for s in after), [s["instruction"][:60] for s in after if s["cached"]]
    assert m["cache"] == {"hits": len(before), "misses": len(after)}
    assert m["tags"]["descriptive"] == f"tiny-2.0.1_ini2.1.0_py3.11_{ARCH}"
    first = first_build["manifest"]["cache"]
    print(
        f"\ncache: first build {first['hits']} hits / {first['misses']} misses; "
        f"after bumping iniconfig {m['cache']['hits']} hits / {m['cache']['misses']} misses"
    )


def test_failing_patch_stops_the_build_with_its_id(podman_env, first_build):
    args = [str(RECIPE), *COMMON, "--set", "patches=[tomli-moved]"]
    manifest = first_build["out"] / f"tiny-pip-{ARCH}" / "manifest.json"
    assert manifest.is_file()  # the first build's
    proc = rocmstack(podman_env, "build", *args, "--output", str(first_build["out"]))
    tags = json.loads(
        rocmstack(podman_env, "tags", str(RECIPE), *RENDER, "--set", "patches=[tomli-moved]", "--json").stdout
    )
    assert proc.returncode == 3, proc.stderr[-4000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("rocmstack: error: build of tiny-pip failed at step ")
    assert "patch tomli-moved did not apply" in last and "full log: " in last
    assert "apply_patches.py" in last  # the failing step is named
    log = Path(last.split("full log: ", 1)[1].strip())
    assert log.is_file() and "rocmstack patch FAILED: [tomli-moved]" in log.read_text()
    assert "last 30 log lines" in proc.stderr
    assert not manifest.exists()  # no manifest of an earlier build beside a failed one
    # Nothing tagged: not the content tag of this render, and the descriptive tag still names the first image.
    assert not exists(podman_env, tags["refs"][1])
    assert first_build["manifest"]["image"]["id"].removeprefix("sha256:") == image_id(
        podman_env, tags["refs"][0]
    )


def test_ctrl_c_stops_the_engine_and_tags_nothing(podman_env, first_build):
    args = [str(RECIPE), *COMMON, "--set", "tomli.version=2.0.0"]
    tags = json.loads(
        rocmstack(podman_env, "tags", str(RECIPE), *RENDER, "--set", "tomli.version=2.0.0", "--json").stdout
    )
    alias = tags["refs"][-1]
    alias_before = image_id(podman_env, alias)
    assert alias_before  # set by the earlier builds
    out = first_build["out"] / "ctrl-c"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocmstack", "build", *args, "--output", str(out)],
        env=podman_env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    logs = out / f"tiny-pip-{ARCH}" / "logs"
    deadline = time.monotonic() + 600
    # Interrupt while the engine runs the tomli install (a RUN step, after the cached ones).
    while time.monotonic() < deadline and proc.poll() is None:
        texts = [p.read_text(errors="replace") for p in logs.glob("*.log")] if logs.is_dir() else []
        if any("tomli==2.0.0" in t and "STEP" in t for t in texts):
            break
        time.sleep(0.2)
    assert proc.poll() is None, "the build ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(
            "rocmstack: error: build interrupted: the engine was stopped and nothing was tagged (log: "
        )
    )
    assert "Traceback" not in err
    assert not any(exists(podman_env, ref) for ref in tags["immutable_refs"])
    assert image_id(podman_env, alias) == alias_before  # the floating alias did not move either
    ctx = str(out / f"tiny-pip-{ARCH}" / "context")
    leftover = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, ctx)]
    assert not leftover, "the engine kept running after Ctrl-C"


def _cmdline_has(proc_dir: Path, text: str) -> bool:
    try:
        return text in (proc_dir / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


@pytest.fixture(scope="module")
def registry(podman_env, tmp_path_factory):
    """A real OCI registry (Debian's docker-registry, the CNCF distribution server) on 127.0.0.1, plain HTTP."""
    _need("docker-registry")
    _need("skopeo")
    with serve_registry(tmp_path_factory.mktemp("registry")) as host:
        yield {"host": host, "env": podman_env}


@contextlib.contextmanager
def serve_registry(root: Path):
    """Debian's docker-registry serving ``root`` on a free loopback port: yields ``127.0.0.1:PORT``."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = root / "config.yml"
    conf.write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {root}/data\n"
        f"http:\n  addr: 127.0.0.1:{port}\nlog:\n  level: warn\n"
    )
    proc = subprocess.Popen(
        ["docker-registry", "serve", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.3)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def remote(env, ref: str) -> dict | None:
    proc = subprocess.run(
        ["skopeo", "inspect", "--tls-verify=false", "--no-tags", f"docker://{ref}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def test_push_guard_and_promote_against_a_real_registry(registry, first_build, tmp_path):
    env, host = registry["env"], registry["host"]
    out = str(first_build["out"])
    insecure = ["--registry", host, "--insecure-registry"]  # the test registry speaks plain HTTP
    # 1. Push every tag of the first build's render (the build itself is all cache hits).
    proc = rocmstack(env, "build", str(RECIPE), *COMMON, *insecure, "--push", "--output", out, "--json")
    assert proc.returncode == 0, proc.stderr[-4000:]
    m = json.loads(proc.stdout)
    assert [p["pushed"] for p in m["tags"]["pushed"]] == [True, True, True]
    for ref in m["tags"]["refs"]:
        assert remote(env, ref)["Labels"]["dev.rocmstack.render-hash"] == m["render_hash"], ref
    # 2. Again: the immutable tags are already there with this render hash and are left alone.
    again = json.loads(
        rocmstack(env, "build", str(RECIPE), *COMMON, *insecure, "--push", "--output", out, "--json").stdout
    )
    assert [p["pushed"] for p in again["tags"]["pushed"]] == [False, False, True]
    # 3. Another render under the same descriptive tag (env is not in the tag): refused, nothing pushed.
    other = [str(RECIPE), *COMMON, *insecure, "--set", "env.ROCMSTACK_FIXTURE=2"]
    proc = rocmstack(env, "build", *other, "--push", "--output", out)
    assert proc.returncode == 1, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert (
        f"refusing to push {m['tags']['refs'][0]}: it already exists in the registry with render hash "
        f"{m['render_hash'][:12]}" in last
    )
    other_tags = json.loads(
        rocmstack(
            env,
            "tags",
            str(RECIPE),
            *RENDER,
            "--registry",
            host,
            "--set",
            "env.ROCMSTACK_FIXTURE=2",
            "--json",
        ).stdout
    )
    assert remote(env, other_tags["refs"][1]) is None  # its content tag was not pushed either
    # 4. Stage only the content tag of a new render, then promote it registry-side.
    bumped = [str(RECIPE), *RENDER, *insecure, "--set", "iniconfig.version=2.1.0"]
    proc = rocmstack(
        env,
        "build",
        *bumped,
        "--engine",
        "podman",
        "--push",
        "--push-tags",
        "content",
        "--output",
        out,
        "--json",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    staged_build = json.loads(proc.stdout)
    staged, staged_hash, staged_id = (
        staged_build["tags"],
        staged_build["render_hash"],
        staged_build["image"]["id"],
    )
    assert remote(env, staged["refs"][1]) and remote(env, staged["refs"][0]) is None
    # Promotion runs the publish gate: no report, no promotion.
    proc = rocmstack(env, "publish", *bumped, "--engine", "podman", "--promote")
    assert proc.returncode == 2 and "--promote needs --reports DIR" in proc.stderr, proc.stderr[-3000:]
    assert remote(env, staged["refs"][0]) is None
    # With a passing GPU leg of the staged image (replayed: test_validate_podman.py), it is promoted.
    from test_validate_podman import ALLOW, _gpu_leg

    identity = tmp_path / "identity"
    identity.mkdir()
    (identity / "report.json").write_text(
        json.dumps(
            {
                "schema": "rocmstack.validate/2",
                "created": "2026-12-01T00:00:00+00:00",
                "seconds": 1.0,
                "mode": "container",
                "render_hash": staged_hash,
                "host": {"hostname": "runner"},
                "image": {"id": staged_id},
            }
        )
    )
    leg = _gpu_leg(identity, tmp_path / "leg", arch=ARCH)
    # Promoted and signed with the lab's key (cosign's own key pair; the registry speaks plain HTTP).
    cosign = {**env, "COSIGN_PASSWORD": ""}
    made = subprocess.run(
        ["cosign", "generate-key-pair", "--output-key-prefix", "lab"],
        cwd=tmp_path,
        env=cosign,
        capture_output=True,
    )
    assert made.returncode == 0, made.stderr
    signing = ["--sign", str(tmp_path / "lab.key")]
    # buildah, which built nothing itself, promotes through podman's store
    proc = rocmstack(
        cosign,
        "publish",
        *bumped,
        "--engine",
        "buildah",
        "--promote",
        "--reports",
        str(leg),
        *ALLOW,
        *signing,
        "--json",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    digests = {remote(env, ref)["Digest"] for ref in staged["refs"]}
    assert len(digests) == 1  # descriptive tag and alias point at the validated content tag
    (digest,) = digests
    assert f"signed {staged['repository']}@{digest} (cosign, key {tmp_path / 'lab.key'})" in proc.stderr
    assert json.loads(proc.stdout)["promoted"][-1] == {
        "ref": f"{staged['repository']}@{digest}",
        "tool": "cosign",
        "key": str(tmp_path / "lab.key"),
        "pushed": False,
        "signed": True,
    }
    for ref in staged["refs"]:
        verify = ["cosign", "verify", "--key", str(tmp_path / "lab.pub"), "--insecure-ignore-tlog=true"]
        ok = subprocess.run([*verify, "--allow-http-registry", ref], env=env, capture_output=True, text=True)
        assert ok.returncode == 0, (ref, ok.stderr[-2000:])


def test_base_from_a_mirror_or_a_folder_keeps_the_recipe_and_checks_its_digest(
    registry, first_build, tmp_path
):
    """An air-gapped build: the recipe's base registry is out of reach (registry.invalid), and the base comes
    from the lab's mirror or from a folder carried in; the render (hash, tags) is the recipe's own. Each case
    names its base differently, so that each starts without it in the store (the layers are the cache's)."""
    import yaml

    env, host = registry["env"], registry["host"]
    mirror = f"{host}/mirror/rocmstack-test-base"
    assert podman(env, "push", "--tls-verify=false", BASE, f"{mirror}:bookworm", timeout=600).returncode == 0
    digest = remote(env, f"{mirror}:bookworm")["Digest"]

    def build(case: str, *extra: str) -> subprocess.CompletedProcess:
        recipe = yaml.safe_load(RECIPE.read_text())
        recipe["base"].update(
            image=f"registry.invalid/{case}/rocmstack-test-base", tag="bookworm", digest=digest
        )
        pinned = tmp_path / case / "tiny-pip.yaml"
        pinned.parent.mkdir(exist_ok=True)
        pinned.write_text(yaml.safe_dump(recipe, sort_keys=False))
        out = str(tmp_path / case / "images")
        return rocmstack(
            env, "build", str(pinned), *COMMON, "--insecure-registry", "--output", out, "--json", *extra
        )

    def last(proc: subprocess.CompletedProcess) -> str:
        return proc.stderr.strip().splitlines()[-1]

    plain, mirrored = build("plan", "--dry-run"), build("plan", "--dry-run", "--base-from", mirror)
    assert plain.returncode == mirrored.returncode == 0, plain.stderr[-2000:] + mirrored.stderr[-2000:]
    planned = json.loads(mirrored.stdout)
    assert planned["render_hash"] == json.loads(plain.stdout)["render_hash"]
    assert planned["tags"] == json.loads(plain.stdout)["tags"]
    assert planned["base_from"] == f"docker://{mirror}@{digest}"
    # Without --base-from: the recipe's registry is out of reach, and nothing is built.
    proc = build("none")
    assert proc.returncode == 4 and "cannot pull base image registry.invalid/none/" in last(proc), (
        proc.stderr[-2000:]
    )
    # An archive of another image is not the pinned base: read, refused in one line, exit 2.
    saved = tmp_path / "other.tar"
    other = first_build["manifest"]["image"]["id"]
    assert podman(env, "save", "--format", "docker-archive", "-o", str(saved), other).returncode == 0
    proc = build("archive", "--base-from", f"docker-archive:{saved}")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"the recipe pins {digest}" in last(
        proc
    ) and "skopeo copy docker://IMAGE@DIGEST dir:FOLDER" in last(proc)
    proc = build("nowhere", "--base-from", f"dir:{tmp_path / 'absent'}")
    assert proc.returncode == 2 and "no such file or folder" in last(proc), proc.stderr[-2000:]
    # From the lab's mirror: the recipe's digest is pulled from it, and the build runs.
    proc = build("mirror", "--base-from", mirror)
    assert proc.returncode == 0, proc.stderr[-4000:]
    said = [line for line in proc.stderr.splitlines() if line.startswith("base image")]
    name = "registry.invalid/mirror/rocmstack-test-base:bookworm"
    assert said == [f"base image {name}@{digest} from docker://{mirror}@{digest} ..."], proc.stderr[:3000]
    built = json.loads(proc.stdout)
    assert built["base"]["digest"] == digest and built["base"]["id"] == first_build["manifest"]["base"]["id"]
    # A folder carried in (skopeo's dir: keeps the registry's manifest, so its digest). The store has that
    # digest by now (an image is its digest, whatever the name), so it is used as it is and not read again.
    carried = tmp_path / "carried"
    copied = subprocess.run(
        ["skopeo", "copy", "--src-tls-verify=false", f"docker://{mirror}@{digest}", f"dir:{carried}"],
        env=env,
        capture_output=True,
        timeout=600,
    )
    assert copied.returncode == 0, copied.stderr
    proc = build("folder", "--base-from", f"dir:{carried}")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (
        "is present; --base-from not read" in proc.stderr
        and json.loads(proc.stdout)["base"]["digest"] == digest
    )


def test_base_freeze_reads_the_base_image_through_buildah(podman_env, first_build, tmp_path):
    """base.provides from the real base image, cross-checked with what the build's guard froze from it."""
    proc = rocmstack(podman_env, "base-freeze", BASE, "--engine", "buildah", "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = {p["name"]: p for p in json.loads(proc.stdout)["provides"]}
    assert json.loads(proc.stdout)["python"] == "3.11" and {"pip", "wheel"} <= set(got)
    image = first_build["manifest"]["tags"]["refs"][0]
    frozen = image_file(podman_env, image, "/opt/rocmstack/constraints.txt").split()
    assert f"wheel=={got['wheel']['version']}" in frozen  # the guard read the same base independently
    recipe = tmp_path / "tiny-pip.yaml"
    shutil.copy(RECIPE, recipe)
    wrote = rocmstack(
        podman_env, "base-freeze", BASE, "--engine", "buildah", "--write", str(recipe), timeout=300
    )
    assert wrote.returncode == 0, wrote.stderr
    assert "  provides:\n    # read from localhost/rocmstack-test-base:bookworm" in recipe.read_text()
    left = podman(podman_env, "ps", "--all", "--external", "--format", "{{.Names}}").stdout
    assert "rocmstack-freeze-" not in left  # the working container is removed


def test_rocmstack_uses_the_image_store_the_users_podman_made(tmp_path, monkeypatch):
    # A user's `podman import` goes into podman's own store (overlay on most hosts); rocmstack's podman and
    # buildah calls must see it, not force another driver on it ("database graph driver mismatch").
    if not shutil.which("podman") or not shutil.which("buildah") or os.geteuid() != 0:
        pytest.skip("needs podman and buildah as root")
    store = tmp_path / "store"
    store.mkdir()
    env = podman_store_env(store, "overlay")
    if subprocess.run(["podman", "info"], env=env, capture_output=True, timeout=120).returncode != 0:
        pytest.skip("overlay storage does not work here (e.g. over overlayfs)")
    rootfs = tmp_path / "rootfs"
    (rootfs / "etc").mkdir(parents=True)
    (rootfs / "etc" / "hostname").write_text("plain\n")
    tarball = tmp_path / "rootfs.tar"
    with tarfile.open(tarball, "w") as tar:
        tar.add(rootfs, arcname=".")
    name = "localhost/rocmstack-test/plain:1"
    try:
        subprocess.run(
            ["podman", "import", str(tarball), name], env=env, check=True, capture_output=True, timeout=300
        )
        for key in ("CONTAINERS_STORAGE_CONF", "CONTAINERS_CONF"):
            monkeypatch.setenv(key, env[key])
        monkeypatch.delenv(engines.PODMAN_DRIVER_ENV, raising=False)
        engine = engines.probe_podman()
        assert isinstance(engine, engines.Engine), engine
        seen = subprocess.run(
            engine.cmd("image", "exists", name), env=env, capture_output=True, text=True, timeout=120
        )
        assert seen.returncode == 0, seen.stderr

        from rocmstack.container.engine import run_prefix

        listed = subprocess.run(
            [*run_prefix("buildah"), "images", "--format", "{{.Name}}:{{.Tag}}"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert listed.returncode == 0 and name in listed.stdout, listed.stderr
    finally:
        subprocess.run(["podman", "system", "reset", "--force"], env=env, capture_output=True, timeout=600)
