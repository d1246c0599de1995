"""validate -> report -> publish on the podman-built test image, for real: buildah runs rocmstack inside the
image (chroot isolation: `podman run` needs cgroups this machine lacks), and publish pushes to a real
registry (Debian's docker-registry, the CNCF distribution server) on localhost, read back with skopeo.

The image is the build test's (tests/integration/test_build_podman.py: debootstrap'd Debian base, the
tiny-pip fixture recipe); its fixtures and helpers are reused, not copied. That image has no torch, so the
in-image run here is the doctor (`--skip-smoke --skip-bench`, CPU mode, 0 GPUs expected), without its
lock-drift check: the fixture's lock records a placeholder torch 0.0 that the image rightly lacks (the
doctor reports exactly that drift otherwise). The GRPO smoke and the bench inside an image are covered by
test_validate_image_smoke.py (opt-in: it installs torch into the image; there lock-drift runs too).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from test_build_podman import ROOT, podman, rocmstack

from rocmstack.container import engine as engines
from rocmstack.render.sbom import schema_errors
from rocmstack.validate.schema import parse_report
from tests.conftest import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
ARGS = ["--expect-gpus", "0", "--skip-smoke", "--skip-bench", "--skip", "lock-drift"]


def _need(tool: str) -> None:
    if not shutil.which(tool):
        pytest.skip(f"{tool} is not installed (apt-get install {tool})")


@pytest.fixture(scope="module")
def image(first_build):
    return first_build["manifest"]["tags"]["refs"][0]


@pytest.fixture(scope="module")
def validated(podman_env, image, tmp_path_factory):
    _need("buildah")
    out = tmp_path_factory.mktemp("validate") / "report"
    proc = rocmstack(
        podman_env, "validate", image, "--engine", "buildah", *ARGS, "--output", str(out), "--json"
    )
    return {"proc": proc, "dir": out}


def test_validate_in_the_image_passes_in_cpu_mode(validated, first_build):
    proc = validated["proc"]
    assert proc.returncode == 0, proc.stderr[-6000:]
    report = json.loads(proc.stdout)
    manifest = first_build["manifest"]
    assert report["passed"] and report["verdict"] == "PASS: doctor (smoke, bench skipped)"
    assert report["mode"] == "container" and report["render_hash"] == manifest["render_hash"]
    assert report["image"]["id"].removeprefix("sha256:") == manifest["image"]["id"].removeprefix("sha256:")
    assert report["image"]["labels"]["dev.rocmstack.recipe"] == "tiny-pip"
    # The report came from inside: the image's own lock and patch markers, checked by its own rocmstack.
    assert report["image"]["lock"]["render_hash"] == manifest["render_hash"]
    assert report["image"]["applied_patches"] == ["tomli-marker"]
    checks = {c["id"]: c for c in report["doctor"]["report"]["checks"]}
    assert checks["patches-applied"]["status"] == "pass", checks["patches-applied"]
    assert checks["nofile-limit"]["status"] in ("pass", "warn")  # the container got the open-file limit
    assert "lock-drift" not in checks and report["doctor"]["report"]["options"]["skip"] == ["lock-drift"]
    assert report["doctor"]["report"]["options"]["expect_gpus"] == 0
    commands = report["engine"]["commands"]
    assert [c[3] for c in commands] == ["from", "run", "rm"] and commands[1][4:6] == ["--isolation", "chroot"]
    # One constant, never a host value: the in-image run prints no deprecation note for the spelling the host
    # wrote (--doctor-skip lock-drift, which the previous release's images know), and none reached stderr
    run = list(commands[1])
    at = run.index("--env")
    assert run[at + 1] == "ROCMSTACK_ARGV_FROM_HOST=1" and "--doctor-skip" in run
    del run[at : at + 2]
    assert not any(a in ("--privileged", "-e", "--env") for c in (commands[0], run, commands[2]) for a in c)
    assert "deprecated" not in proc.stderr
    out = validated["dir"]
    assert {p.name for p in out.iterdir()} == {"report.json", "report.md", "report.html", "sbom.cdx.json"}
    # The SBOM beside the report is the one rendered into the image (read by the host from the image).
    context_sbom = Path(first_build["manifest"]["log"]).parents[1] / "context/rocmstack/sbom.cdx.json"
    assert (out / "sbom.cdx.json").read_bytes() == context_sbom.read_bytes()
    assert report["sbom"]["sha256"] == hashlib.sha256(context_sbom.read_bytes()).hexdigest()
    assert schema_errors((out / "sbom.cdx.json").read_text()) is None
    assert json.loads((out / "report.json").read_text()) == report
    assert "image | validate: doctor: running the checks" in proc.stderr  # the in-image progress was shown


def test_no_working_container_is_left_behind(validated, podman_env):
    driver = podman_env[engines.PODMAN_DRIVER_ENV]
    left = subprocess.run(
        ["buildah", "--storage-driver", driver, "containers", "--all", "--format", "{{.ContainerName}}"],
        env=podman_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert left.returncode == 0, left.stderr
    report = json.loads((validated["dir"] / "report.json").read_text())
    name = report["engine"]["container"]
    assert name.startswith("rocmstack-validate-") and name not in left.stdout.split()
    assert report["engine"]["commands"][0][:3] == ["buildah", "--storage-driver", driver]  # the build's store


def test_dry_run_prints_what_the_real_run_ran(validated, podman_env, image):
    proc = rocmstack(
        podman_env,
        "validate",
        image,
        "--engine",
        "buildah",
        *ARGS,
        "--output",
        str(validated["dir"]),
        "--dry-run",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    planned = json.loads(proc.stdout)["commands"]
    report = json.loads((validated["dir"] / "report.json").read_text())
    ran = report["engine"]["commands"]
    name = ran[0][ran[0].index("--name") + 1]
    image_id = report["image"]["id"].removeprefix("sha256:")
    # The real run differs only in the random container name and in running the inspected image by its id.
    expected = [
        [image_id if a == image else a.replace(planned[0][planned[0].index("--name") + 1], name) for a in c]
        for c in planned
    ]
    assert expected == ran


# -- publish -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def registry(podman_env, tmp_path_factory):
    """A real OCI registry on localhost, over TLS with a throw-away certificate that podman and skopeo trust
    through SSL_CERT_FILE (skopeo 1.9 ignores CONTAINERS_REGISTRIES_CONF, so "insecure" cannot be scoped)."""
    for tool in ("docker-registry", "skopeo", "openssl"):
        _need(tool)
    root = tmp_path_factory.mktemp("registry")
    port = free_port()
    made = subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-keyout",
            str(root / "key.pem"),
            "-out",
            str(root / "cert.pem"),
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        capture_output=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    system_cas = Path("/etc/ssl/certs/ca-certificates.crt")
    bundle = root / "bundle.pem"
    bundle.write_bytes(
        (system_cas.read_bytes() if system_cas.is_file() else b"") + (root / "cert.pem").read_bytes()
    )
    (root / "config.yml").write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {root}/data\nhttp:\n  addr: 127.0.0.1:{port}\n"
        f"  tls:\n    certificate: {root}/cert.pem\n    key: {root}/key.pem\nlog:\n  level: error\n"
    )
    with open(root / "registry.log", "w") as log:  # the registry keeps its own copy of the descriptor
        proc = subprocess.Popen(
            ["docker-registry", "serve", str(root / "config.yml")], stdout=log, stderr=log
        )
    context = ssl.create_default_context(cafile=str(root / "cert.pem"))
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"https://localhost:{port}/v2/", timeout=2, context=context).read()
            break
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, (root / "registry.log").read_text()
            time.sleep(0.2)
    env = {**podman_env, "SSL_CERT_FILE": str(bundle)}
    yield {"host": f"localhost:{port}", "env": env}
    proc.terminate()
    proc.wait(timeout=30)


def _retag(env, manifest, repo: str) -> dict[str, str]:
    """The build's tags, moved into the registry's namespace: {tag: ref}."""
    refs = {}
    for tag in (manifest["tags"]["descriptive"], manifest["tags"]["content"], *manifest["tags"]["aliases"]):
        ref = f"{repo}:{tag}"
        assert podman(env, "tag", manifest["image"]["id"], ref).returncode == 0
        refs[tag] = ref
    return refs


def _remote_hash(env, ref: str) -> str | None:
    out = subprocess.run(
        ["skopeo", "inspect", "--no-tags", f"docker://{ref}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if out.returncode != 0:
        return None
    return (json.loads(out.stdout).get("Labels") or {}).get("dev.rocmstack.render-hash", "<no label>")


# The GPU half of a leg cannot run here (no AMD GPU): it replays the real GPU run recorded in
# docs/evidence/validate-h200-final (`rocmstack validate --in-place --expect-gpus 1` on one H200: doctor,
# GRPO smoke and rollout bench on cuda). The arch comes from the real KFD topology lines of an MI300X
# (ROCm/rocm-cli#343) and an MI350X-class node (ROCm/rocm-systems#10274), read by the host's own reader.
# The identity half (mode, image id, render hash, engine) is the real container run of the test image.
# Recorded as rocmstack.validate/1: read as every reader reads it.
GPU_RUN = parse_report(
    json.loads((ROOT / "docs/evidence/validate-h200-final/report.json").read_text()), "validate-h200-final"
)
KFD = ROOT / "tests/fixtures/doctor/tools"
# That run was on an NVIDIA node outside an image, so the doctor skipped the AMD-only and image checks;
# publish is told so explicitly, as a publisher would have to.
ALLOW = [
    "--accept-skipped",
    "amdsmi-import,nvidia-packages,version-floors,lock-drift,patches-applied",
]


def _kfd_arch(tmp: Path, properties: str) -> str:
    from rocmstack.validate.container import host_gpu_archs

    node = tmp / "class/kfd/kfd/topology/nodes/1"
    node.mkdir(parents=True)
    (node / "properties").write_text(properties)
    (archs,) = host_gpu_archs(tmp)
    return archs


@pytest.fixture(scope="module")
def arch_of(tmp_path_factory):
    mi300x = (KFD / "kfd-mi300x-gfx_target_version.line").read_text()
    mi350x = (KFD / "kfd-mi350x-node5-properties.lines").read_text() + "gfx_target_version 90500\n"
    return {
        "mi300x": _kfd_arch(tmp_path_factory.mktemp("mi300x"), mi300x),
        "mi350x": _kfd_arch(tmp_path_factory.mktemp("mi350x"), mi350x),
    }


def _gpu_leg(src: Path, dest: Path, *, arch: str, image_id: str | None = None, **changes) -> Path:
    """One validation leg's report folder: this image's identity, the replayed GPU run, the arch."""
    dest.mkdir(parents=True, exist_ok=True)
    report = json.loads((src / "report.json").read_text())
    report.update(
        {k: GPU_RUN[k] for k in ("passed", "verdict", "stages", "options", "doctor", "smoke", "bench")}
    )
    # What the host writes over the image's claims: the arch its driver saw, the options it ran with.
    facts = {"gpu_arch": arch, "gpu_archs": [arch], "options": GPU_RUN["options"]}
    report.update({**facts, "host_gpu_archs": [arch], "host_checked": facts})
    if image_id:
        report["image"] = {**report["image"], "id": image_id}
    report.update(changes)
    (dest / "report.json").write_text(json.dumps(report))
    return dest


def test_publish_refuses_a_failed_or_foreign_report(validated, registry, first_build, arch_of, tmp_path):
    env, manifest = registry["env"], first_build["manifest"]
    refs = _retag(env, manifest, f"{registry['host']}/refused/tiny")
    target = refs[manifest["tags"]["descriptive"]]
    arch = arch_of["mi300x"]
    failed = _gpu_leg(
        validated["dir"], tmp_path / "failed", arch=arch, passed=False, verdict="FAIL: doctor fail"
    )
    proc = rocmstack(env, "publish", target, "--reports", str(failed), "--engine", "podman", *ALLOW)
    assert proc.returncode == 1 and "its validation report did not pass (FAIL: doctor fail)" in proc.stderr
    other = _gpu_leg(validated["dir"], tmp_path / "other", arch=arch, render_hash="0" * 64)
    proc = rocmstack(env, "publish", target, "--reports", str(other), "--engine", "podman", *ALLOW)
    assert proc.returncode == 1 and "the report is for render hash 000000000000" in proc.stderr
    assert all(_remote_hash(env, ref) is None for ref in refs.values())  # nothing reached the registry


def test_publish_refuses_the_doctor_only_cpu_report(validated, registry, first_build):
    """Issue 16.9: `PASS: doctor (smoke, bench skipped)` from a CPU run opened the gate."""
    env, manifest = registry["env"], first_build["manifest"]
    refs = _retag(env, manifest, f"{registry['host']}/weak/tiny")
    target = refs[manifest["tags"]["descriptive"]]
    proc = rocmstack(env, "publish", target, "--reports", str(validated["dir"]), "--engine", "podman")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert f"refusing to publish {target}: the smoke stage did not pass (skip)" in proc.stderr
    assert all(_remote_hash(env, ref) is None for ref in refs.values())


def test_publish_pushes_every_tag_once_and_guards_immutable_ones(
    validated, registry, first_build, arch_of, tmp_path
):
    env, manifest = registry["env"], first_build["manifest"]
    repo = f"{registry['host']}/e2e/tiny"
    refs = _retag(env, manifest, repo)
    target = refs[manifest["tags"]["descriptive"]]
    leg = _gpu_leg(validated["dir"], tmp_path / "leg", arch=arch_of["mi300x"])
    proc = rocmstack(env, "publish", target, "--reports", str(leg), "--engine", "podman", *ALLOW, "--json")
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout)
    assert sorted(p["ref"] for p in result["pushed"]) == sorted(refs.values())
    assert all(p["pushed"] for p in result["pushed"])
    for ref in refs.values():
        assert _remote_hash(env, ref) == manifest["render_hash"], ref
    # Again: the immutable tags are already there with this render, so they are left alone.
    again = json.loads(
        rocmstack(
            env, "publish", target, "--reports", str(leg), "--engine", "podman", *ALLOW, "--json"
        ).stdout
    )
    by_ref = {p["ref"]: p for p in again["pushed"]}
    for tag in (manifest["tags"]["descriptive"], manifest["tags"]["content"]):
        assert by_ref[refs[tag]]["pushed"] is False


def test_publish_never_moves_an_existing_immutable_tag(validated, registry, first_build, arch_of, tmp_path):
    env, manifest = registry["env"], first_build["manifest"]
    repo = f"{registry['host']}/taken/tiny"
    refs = _retag(env, manifest, repo)
    descriptive = refs[manifest["tags"]["descriptive"]]
    # Someone pushed another image (the bare base: no render-hash label) under the descriptive tag first.
    squatter = f"{repo}:squat"
    assert podman(env, "tag", first_build["manifest"]["base"]["id"], squatter).returncode == 0
    assert podman(env, "push", squatter, descriptive, timeout=600).returncode == 0
    leg = _gpu_leg(validated["dir"], tmp_path / "leg", arch=arch_of["mi300x"])
    proc = rocmstack(env, "publish", descriptive, "--reports", str(leg), "--engine", "podman", *ALLOW)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert (
        f"refusing to push {descriptive}: it already exists in the registry with render hash no rocmstack "
        "render-hash label" in proc.stderr
    )
    assert _remote_hash(env, refs[manifest["tags"]["content"]]) is None  # refused before anything was pushed


def _cosign(env, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["cosign", *args],
        env={**env, "COSIGN_PASSWORD": "pw"},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _path_without(tool: str, tmp: Path) -> str:
    """A PATH with every program of this one but TOOL: links in a folder of their own."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        for program in Path(folder).glob("*") if Path(folder).is_dir() else ():
            link = bin_dir / program.name
            if program.name != tool and not link.exists() and os.access(program, os.X_OK):
                link.symlink_to(program)
    return str(bin_dir)


def _signature_policy(repo: str, public: Path) -> dict:
    """docs/publish.md's policy, as written, for this repository and key."""
    text = (ROOT / "docs/publish.md").read_text()
    block = text.split("<!-- signature-policy:begin -->", 1)[1].split("<!-- signature-policy:end -->", 1)[0]
    policy = json.loads(block.strip().removeprefix("```json").removesuffix("```"))
    (rule,) = policy["transports"]["docker"].pop("ghcr.io/acme/verl")
    policy["transports"]["docker"][repo] = [{**rule, "keyPath": str(public)}]
    return policy


def test_publish_signs_the_validated_digest_and_only_its_key_verifies(
    validated, registry, first_build, arch_of, tmp_path
):
    for tool in ("cosign", "skopeo"):
        _need(tool)
    env, manifest = registry["env"], first_build["manifest"]
    repo = f"{registry['host']}/signed/tiny"
    refs = _retag(env, manifest, repo)
    target = refs[manifest["tags"]["descriptive"]]
    leg = _gpu_leg(validated["dir"], tmp_path / "leg", arch=arch_of["mi300x"])
    keys = tmp_path / "keys"
    keys.mkdir()
    for name in ("lab", "other"):
        made = _cosign(env, "generate-key-pair", "--output-key-prefix", name, cwd=keys)
        assert made.returncode == 0, made.stderr
    passfile = keys / "passphrase"
    passfile.write_text("pw\n")
    publish = ["publish", target, "--reports", str(leg), "--engine", "podman", *ALLOW, "--json"]
    signing = ["--sign", str(keys / "lab.key"), "--sign-passphrase-file", str(passfile)]
    # 1. No cosign on the PATH: skopeo signs, and Debian's is built without sigstore. The tags are pushed
    #    and unsigned, and the one line says so, with cosign as the fix.
    proc = rocmstack({**env, "PATH": _path_without("cosign", tmp_path)}, *publish, *signing)
    assert proc.returncode == 4, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert "with skopeo failed:" in last and "Debian-local change: sigstore disabled" in last, last
    assert "install cosign" in last and "pushed but unsigned" in last and "pw" not in proc.stderr
    assert all(_remote_hash(env, ref) == manifest["render_hash"] for ref in refs.values())
    assert _cosign(
        env, "verify", "--key", str(keys / "lab.pub"), "--insecure-ignore-tlog=true", target
    ).returncode
    # 2. With cosign: the pushed tags are left alone and the digest they hold is signed.
    proc = rocmstack(env, *publish, *signing)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    by_ref = {p["ref"]: p["pushed"] for p in result["pushed"]}
    assert not by_ref[target] and not by_ref[refs[manifest["tags"]["content"]]]  # immutable: left alone
    (signed,) = result["signed"]
    digest = json.loads(
        subprocess.run(
            ["skopeo", "inspect", "--no-tags", f"docker://{target}"],
            env=env,
            capture_output=True,
            timeout=120,
        ).stdout
    )["Digest"]
    assert signed == {"ref": f"{repo}@{digest}", "tool": "cosign", "key": str(keys / "lab.key")}
    # 3. The lab's public key verifies every tag; another key and an unsigned image are refused.
    for ref in refs.values():
        ok = _cosign(env, "verify", "--key", str(keys / "lab.pub"), "--insecure-ignore-tlog=true", ref)
        assert ok.returncode == 0, (ref, ok.stderr[-2000:])
        assert f'"docker-manifest-digest":"{digest}"' in ok.stdout
    wrong = _cosign(env, "verify", "--key", str(keys / "other.pub"), "--insecure-ignore-tlog=true", target)
    assert wrong.returncode != 0 and "no matching signatures" in wrong.stderr, wrong.stderr[-2000:]
    unsigned = f"{registry['host']}/unsigned/tiny:x"
    assert podman(env, "push", manifest["image"]["id"], unsigned, timeout=600).returncode == 0
    bare = _cosign(env, "verify", "--key", str(keys / "lab.pub"), "--insecure-ignore-tlog=true", unsigned)
    assert bare.returncode != 0 and "no signatures found" in bare.stderr, bare.stderr[-2000:]
    # 4. The documented node policy, as written, loads into containers/image: Debian's build parses it and
    #    stops at the sigstore check it was built without (a policy it cannot read fails before that).
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(_signature_policy(repo, keys / "lab.pub")))
    registries_d = tmp_path / "registries.d"
    registries_d.mkdir()
    (registries_d / "lab.yaml").write_text(f"docker:\n  {repo}:\n    use-sigstore-attachments: true\n")
    pull = subprocess.run(
        [
            "skopeo",
            "--policy",
            str(policy),
            "--registries.d",
            str(registries_d),
            "copy",
            f"docker://{target}",
            f"dir:{tmp_path / 'pulled'}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (
        pull.returncode != 0
        and "Source image rejected: Debian-local change: sigstore disabled" in pull.stderr
    )


# -- per-arch legs: two images, one of them claiming two archs ---------------------------------------------


def _derived(env, base: str, tmp: Path, render_hash: str, archs: str) -> str:
    """A real image on top of the test image, labelled as a render for ARCHS (what `rocmstack build` stamps)."""
    tmp.mkdir(parents=True)
    (tmp / "Containerfile").write_text(
        f'FROM {base}\nLABEL dev.rocmstack.render-hash="{render_hash}" dev.rocmstack.gpu-archs="{archs}"\n'
    )
    proc = podman(
        env,
        "build",
        "--pull=never",
        "--isolation",
        "chroot",
        "--format",
        "docker",
        "--iidfile",
        str(tmp / "iid"),
        "-f",
        str(tmp / "Containerfile"),
        str(tmp),
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return (tmp / "iid").read_text().strip().removeprefix("sha256:")


def _tag(env, image_id: str, repo: str, tags: list[str]) -> list[str]:
    refs = [f"{repo}:{t}" for t in tags]
    for ref in refs:
        assert podman(env, "tag", image_id, ref).returncode == 0
    return refs


def _download(artifacts: Path, pattern: str, dest: Path) -> Path:
    """What the publish job's download-artifact step does: every artifact matching PATTERN in its own folder."""
    for leg in sorted(artifacts.glob(pattern)):
        shutil.copytree(leg, dest / leg.name)
    return dest


def test_a_two_arch_image_with_a_failing_leg_is_not_published_the_other_image_is(
    validated, registry, first_build, arch_of, tmp_path
):
    from rocmstack.build.matrix import REPORT_ARTIFACT

    env, host = registry["env"], registry["host"]
    gfx942, gfx950 = arch_of["mi300x"], arch_of["mi350x"]
    assert (gfx942, gfx950) == ("gfx942", "gfx950")
    base = first_build["manifest"]["tags"]["refs"][0]
    h_two, h_one = hashlib.sha256(b"two-arch").hexdigest(), hashlib.sha256(b"one-arch").hexdigest()
    two = _derived(env, base, tmp_path / "two", h_two, f"{gfx942};{gfx950}")
    one = _derived(env, base, tmp_path / "one", h_one, gfx950)
    two_refs = _tag(env, two, f"{host}/legs/two", ["tiny_gfx942_gfx950", f"r-{h_two[:12]}"])
    one_refs = _tag(env, one, f"{host}/legs/one", ["tiny_gfx950", f"r-{h_one[:12]}"])

    # Every leg uploads its report under its own name; the gfx950 leg of the two-arch image failed.
    artifacts = tmp_path / "artifacts"

    def leg(render_hash, arch, image_id, **changes):
        name = REPORT_ARTIFACT.format(render_hash=render_hash, arch=arch)
        return _gpu_leg(
            validated["dir"],
            artifacts / name,
            arch=arch,
            image_id=image_id,
            render_hash=render_hash,
            **changes,
        )

    leg(h_two, gfx942, two)
    failing = leg(h_two, gfx950, two, passed=False, verdict="FAIL: smoke fail")
    leg(h_one, gfx950, one)

    def publish(ref, render_hash, where):
        reports = _download(artifacts, REPORT_ARTIFACT.format(render_hash=render_hash, arch="*"), where)
        return rocmstack(
            env, "publish", ref, "--reports", str(reports), "--engine", "podman", *ALLOW, "--json"
        )

    refused = publish(two_refs[0], h_two, tmp_path / "dl-two")
    assert refused.returncode == 1, refused.stderr[-3000:]
    assert "gfx950: refusing to publish" in refused.stderr and "FAIL: smoke fail" in refused.stderr
    published = publish(one_refs[0], h_one, tmp_path / "dl-one")
    assert published.returncode == 0, published.stderr[-3000:]
    assert json.loads(published.stdout)["validated_archs"] == [gfx950]
    assert all(_remote_hash(env, ref) == h_one for ref in one_refs)
    assert all(_remote_hash(env, ref) is None for ref in two_refs)  # nothing of the two-arch image

    # A leg that never reported is no better than a failed one.
    shutil.rmtree(failing)
    missing = publish(two_refs[0], h_two, tmp_path / "dl-two-missing")
    assert missing.returncode == 1 and f"no report ran on {gfx950}" in missing.stderr, missing.stderr[-3000:]
    # Nor is the other image's passing gfx950 report: it was made from another image.
    leg(h_two, gfx950, one)
    foreign = publish(two_refs[0], h_two, tmp_path / "dl-two-foreign")
    assert foreign.returncode == 1 and f"{gfx950}: refusing to publish" in foreign.stderr
    assert f"made from image {one[:12]}" in foreign.stderr, foreign.stderr[-3000:]
    assert all(_remote_hash(env, ref) is None for ref in two_refs)
    # Its own passing gfx950 leg opens the gate for both archs.
    shutil.rmtree(artifacts / REPORT_ARTIFACT.format(render_hash=h_two, arch=gfx950))
    leg(h_two, gfx950, two)
    both = publish(two_refs[0], h_two, tmp_path / "dl-two-both")
    assert both.returncode == 0, both.stderr[-3000:]
    assert json.loads(both.stdout)["validated_archs"] == [gfx942, gfx950]
    assert all(_remote_hash(env, ref) == h_two for ref in two_refs)
