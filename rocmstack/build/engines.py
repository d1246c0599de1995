"""Container engines: BuildKit through ``docker buildx build``, or daemonless podman.

The docker Python SDK does not speak BuildKit, so every engine is driven through its CLI, with argument
lists and timeouts. An :class:`Engine` is a frozen value: the command prefix (podman carries its storage
driver, so every later call sees the same image store) plus what was detected about it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rocmstack.errors import EngineError, InputError

ENGINES = ("auto", "docker", "podman")
PROBE_TIMEOUT = 20
QUICK_TIMEOUT = 120
PULL_TIMEOUT = 4 * 3600  # a ROCm base image is tens of GB
PUSH_TIMEOUT = 4 * 3600
# By default rocmstack's podman and buildah calls use podman's own storage settings (storage.conf, or its
# pick: overlay where the kernel allows it, vfs otherwise), so they see the images that the user's own
# `podman import` / `podman pull` put there; forcing a driver on a store made with another one fails
# ("database graph driver mismatch"). ROCMSTACK_PODMAN_STORAGE_DRIVER forces one for every call (build,
# tag, inspect, and `rocmstack validate`'s buildah), so they all still see the same image store.
PODMAN_DRIVER_ENV = "ROCMSTACK_PODMAN_STORAGE_DRIVER"
INSTALL_HINT = (
    "install podman and buildah for daemonless builds (Debian/Ubuntu: apt-get install podman buildah), "
    "or start a Docker daemon with the buildx plugin (docker-buildx-plugin)"
)

Runner = Callable[..., subprocess.CompletedProcess]
Which = Callable[[str], str | None]  # shutil.which's shape


@dataclass(frozen=True, kw_only=True)
class Engine:
    name: str  # "docker" | "podman"
    argv: tuple[
        str, ...
    ]  # command prefix, e.g. ("docker",), ("podman",) or ("podman", "--storage-driver", "vfs")
    version: str
    builder: str | None = None  # docker buildx builder instance
    driver: str | None = None  # that builder's buildx driver: docker, docker-container, kubernetes, remote
    # False for a plain-HTTP or self-signed registry (--insecure-registry): podman/skopeo get
    # --tls-verify=false; docker takes this from the daemon's insecure-registries setting instead.
    tls_verify: bool = True

    def cmd(self, *args: str) -> list[str]:
        return [*self.argv, *args]

    def describe(self) -> str:
        return f"{self.name} {self.version}" + (f" (builder {self.builder})" if self.builder else "")


def _run(argv: Sequence[str], timeout: float, runner: Runner = subprocess.run) -> subprocess.CompletedProcess:
    try:
        return runner(list(argv), capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        return subprocess.CompletedProcess(list(argv), 127, "", f"{argv[0]}: not installed")
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(
            list(argv), 124, "", f"{' '.join(argv[:3])}: no answer in {timeout:.0f}s"
        )


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


def podman_prefix() -> tuple[str, ...]:
    driver = os.environ.get(PODMAN_DRIVER_ENV, "").strip()
    return ("podman", "--storage-driver", driver) if driver else ("podman",)


def probe_docker(
    builder: str | None = None, *, which: Which = shutil.which, runner: Runner = subprocess.run
) -> Engine | str:
    """An Engine, or a short reason why docker buildx cannot build here."""
    if not which("docker"):
        return "docker: not installed"
    server = _run(["docker", "version", "--format", "{{.Server.Version}}"], PROBE_TIMEOUT, runner)
    if server.returncode != 0 or not server.stdout.strip():
        return f"docker: daemon not reachable ({_last_line(server.stderr or server.stdout)})"
    bx = _run(["docker", "buildx", "version"], PROBE_TIMEOUT, runner)
    if bx.returncode != 0:
        return "docker: the buildx plugin is missing (install docker-buildx-plugin)"
    ins = _run(["docker", "buildx", "inspect", *([builder] if builder else [])], PROBE_TIMEOUT, runner)
    if builder and ins.returncode != 0:
        return f"docker: buildx builder {builder!r} not found ({_last_line(ins.stderr)})"
    return Engine(
        name="docker",
        argv=("docker",),
        version=server.stdout.strip(),
        builder=builder,
        driver=buildx_driver(ins.stdout) if ins.returncode == 0 else None,
    )


def buildx_driver(inspect_text: str) -> str | None:
    """The ``Driver:`` of ``docker buildx inspect`` (the builder's first line block)."""
    match = re.search(r"^Driver:\s+(\S+)\s*$", inspect_text, flags=re.MULTILINE)
    return match[1] if match else None


def attests(engine: Engine) -> bool:
    """Whether the build asks BuildKit for a provenance attestation: every buildx driver but the plain
    ``docker`` one, which refuses attestations ("Attestation is not supported for the docker driver")."""
    return engine.name == "docker" and engine.driver is not None and engine.driver != "docker"


def probe_podman(*, which: Which = shutil.which, runner: Runner = subprocess.run) -> Engine | str:
    if not which("podman"):
        return "podman: not installed"
    prefix = podman_prefix()
    out = _run([*prefix, "version", "--format", "{{.Client.Version}}"], PROBE_TIMEOUT, runner)
    if out.returncode != 0 or not out.stdout.strip():
        return f"podman: not usable ({_last_line(out.stderr or out.stdout)})"
    return Engine(name="podman", argv=prefix, version=out.stdout.strip())


def detect(
    choice: str = "auto",
    *,
    builder: str | None = None,
    which: Which = shutil.which,
    runner: Runner = subprocess.run,
) -> Engine:
    """docker buildx when a daemon answers, else podman; one EngineError line when neither works."""
    if choice not in ENGINES:
        raise InputError(f"--engine {choice!r}: unknown engine", fix=f"one of {', '.join(ENGINES)}")
    if builder and choice == "podman":
        raise InputError("--builder names a docker buildx builder; it does not apply to --engine podman")
    reasons = []
    if choice in ("auto", "docker"):
        found = probe_docker(builder, which=which, runner=runner)
        if isinstance(found, Engine):
            return found
        reasons.append(found)
        if choice == "docker":
            raise EngineError(
                f"--engine docker cannot build: {found}",
                fix="start the Docker daemon with buildx, or use --engine podman",
            )
    found = probe_podman(which=which, runner=runner)
    if isinstance(found, Engine):
        return found
    reasons.append(found)
    raise EngineError(f"no usable container engine ({'; '.join(reasons)})", fix=INSTALL_HINT)


def qualify(image: str) -> str:
    """Fully qualify a short name (``rocm/primus:v26.7`` -> ``docker.io/rocm/primus:v26.7``).

    Podman refuses unqualified names when no unqualified-search registry is configured; Docker assumes
    docker.io. Qualifying removes the difference.
    """
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return image
    return f"docker.io/{image}" if sep else f"docker.io/library/{image}"


def registry_of(image: str) -> str:
    return qualify(image).split("/", 1)[0]


_UNREACHABLE = re.compile(
    r"no such host|dial tcp|connection refused|i/o timeout|network is unreachable|TLS handshake timeout|"
    r"Temporary failure in name resolution|could not resolve|server misbehaving|no route to host|"
    r"context deadline exceeded|connection reset",
    re.IGNORECASE,
)
_NOT_FOUND = re.compile(
    r"manifest unknown|not found|does not exist|no such image|name unknown", re.IGNORECASE
)
_DENIED = re.compile(r"unauthorized|denied|authentication required|forbidden", re.IGNORECASE)


def _tail(text: str, limit: int) -> str:
    """The end of ``text`` in at most ``limit`` characters, starting at a link of the error chain (after
    ": ") or at least at a word, never inside one."""
    if len(text) <= limit:
        return text
    tail = text[-(limit - 3) :]
    cut = text[: len(text) - len(tail)]
    if cut.endswith((" ", ":")):  # the tail already starts at a boundary
        return "..." + tail.lstrip(": ")
    for sep in (": ", " "):
        at = tail.find(sep)
        if at != -1 and at + len(sep) < len(tail):
            return "..." + tail[at + len(sep) :]
    return "..." + tail


def classify_pull_error(image: str, output: str) -> str:
    """One sentence: why the registry did not give us this image."""
    registry = registry_of(image)
    detail = _tail(_last_line(output), 160)  # the cause is at the end of the engine's error chain
    if _UNREACHABLE.search(output):
        return f"registry {registry} is unreachable from this machine ({detail})"
    if _DENIED.search(output):
        login = f"`docker login {registry}` / `podman login {registry}`"
        return f"registry {registry} refused access (log in with {login}) ({detail})"
    if _NOT_FOUND.search(output):
        return f"registry {registry} has no such image or tag ({detail})"
    return f"pull from registry {registry} failed ({detail})"


def image_present(engine: Engine, ref: str, runner: Runner = subprocess.run) -> bool:
    args = (
        ("image", "exists", ref)
        if engine.name == "podman"
        else ("image", "inspect", "--format", "{{.Id}}", ref)
    )
    return _run(engine.cmd(*args), QUICK_TIMEOUT, runner).returncode == 0


def build_command(
    engine: Engine,
    *,
    context: Path,
    iidfile: Path,
    build_args: dict[str, str],
    labels: dict[str, str],
    cache_from: Sequence[str] = (),
    cache_to: Sequence[str] = (),
    target_platform: str = "linux/amd64",
) -> list[str]:
    """The exact build invocation. No -t: tags are applied only after the build succeeded."""
    if engine.name == "docker":
        argv = engine.cmd("buildx", "build")
        if engine.builder:
            argv += ["--builder", engine.builder]
        argv += ["--progress=plain", "--load", "--platform", target_platform]
        if attests(engine):
            # SLSA provenance with every build step and material (base digest, sources); BuildKit keeps it
            # where the image goes through its image exporter (a push, the containerd image store).
            argv += ["--attest", "type=provenance,mode=max"]
    else:
        # docker format: the OCI format drops SHELL (the Dockerfile relies on bash -o pipefail).
        # chroot isolation: no cgroups or namespaces needed, so it builds inside unprivileged containers.
        argv = engine.cmd(
            "build", "--format", "docker", "--isolation", "chroot", "--layers", "--platform", target_platform
        )
    argv += ["--iidfile", str(iidfile), "--file", str(context / "Dockerfile")]
    for key, value in sorted(build_args.items()):
        argv += ["--build-arg", f"{key}={value}"]
    for key, value in sorted(labels.items()):
        argv += ["--label", f"{key}={value}"]
    for ref in cache_from:
        argv += ["--cache-from", ref]
    for ref in cache_to:
        argv += ["--cache-to", ref]
    argv.append(str(context))
    return argv


def inspect_image(engine: Engine, ref: str, runner: Runner = subprocess.run) -> dict:
    """Normalised ``image inspect``: id, labels, repo digests, created."""
    out = _run(engine.cmd("image", "inspect", ref), QUICK_TIMEOUT, runner)
    if out.returncode != 0:
        raise EngineError(
            f"image {ref} not found in the {engine.name} image store ({_last_line(out.stderr)})",
            fix="build it first, or pull it",
        )
    data = json.loads(out.stdout)[0]
    config = data.get("Config") or {}
    labels = config.get("Labels") or data.get("Labels") or {}
    return {
        "id": data.get("Id", ""),
        "labels": dict(labels),
        "repo_digests": list(data.get("RepoDigests") or []),
        "repo_tags": list(data.get("RepoTags") or []),
        "created": data.get("Created"),
        "digest": data.get("Digest"),
    }


READ_LIMIT = 64 << 20  # the most read_file takes out of an image


def read_file(
    engine: Engine, ref: str, path: str, limit: int = READ_LIMIT, runner: Runner = subprocess.run
) -> bytes | None:
    """Copy one file out of an image without running it (create, cp, rm); None when it is absent.

    The image is untrusted: what came out is read only as a regular file (never through a link) of at
    most LIMIT bytes; anything else is an EngineError naming it."""
    created = _run(engine.cmd("create", ref, "true"), QUICK_TIMEOUT, runner)
    if created.returncode != 0:
        raise EngineError(f"cannot open image {ref} to read {path} ({_last_line(created.stderr)})")
    cid = created.stdout.strip().splitlines()[-1]
    try:
        with tempfile.TemporaryDirectory(prefix="rocmstack-cp.") as tmp:
            dest = Path(tmp) / "out"
            cp = _run(engine.cmd("cp", f"{cid}:{path}", str(dest)), QUICK_TIMEOUT, runner)
            if cp.returncode != 0 or not (dest.is_file() or dest.is_symlink()):
                return None
            try:
                fd = os.open(dest, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
            except OSError:
                raise EngineError(f"{path} in image {ref} is not a regular file") from None
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    raise EngineError(f"{path} in image {ref} is not a regular file")
                data = f.read(limit + 1)
            if len(data) > limit:
                raise EngineError(f"{path} in image {ref} is larger than {limit:,} bytes")
            return data
    finally:
        _run(engine.cmd("rm", "--force", cid), QUICK_TIMEOUT, runner)


def remote_labels(
    engine: Engine, ref: str, *, which: Which = shutil.which, runner: Runner = subprocess.run
) -> dict | None:
    """The labels of ``ref`` in its registry, without pulling it; None when the tag does not exist."""
    if engine.name == "docker":
        out = _run(
            engine.cmd("buildx", "imagetools", "inspect", ref, "--format", "{{json .Image}}"),
            QUICK_TIMEOUT,
            runner,
        )
    else:
        if not which("skopeo"):
            raise EngineError(
                f"cannot check whether {ref} already exists: skopeo is not installed",
                fix="apt-get install skopeo (the immutability guard reads the registry's labels with it)",
            )
        tls = [] if engine.tls_verify else ["--tls-verify=false"]
        out = _run(
            ["skopeo", "inspect", *tls, "--no-tags", f"docker://{qualify(ref)}"], QUICK_TIMEOUT, runner
        )
    if out.returncode != 0:
        text = out.stderr + out.stdout
        if _NOT_FOUND.search(text) and not _UNREACHABLE.search(text):
            return None
        raise EngineError(f"cannot check whether {ref} already exists: {classify_pull_error(ref, text)}")
    data = json.loads(out.stdout)
    if engine.name == "podman":
        return dict(data.get("Labels") or {})
    if "config" not in data and data:  # a multi-platform index: {platform: config}
        data = next(iter(data.values()))
    return dict((data.get("config") or {}).get("Labels") or {})


def remote_manifest(
    engine: Engine,
    ref: str,
    *,
    which: Callable[[str], str | None] = shutil.which,
    runner: Runner = subprocess.run,
) -> dict | None:
    """``{"digest": manifest digest, "config": config digest}`` of ``ref`` in its registry, None when the tag
    does not exist. The config digest is the image id, the same before and after a push, so it says
    which build a tag holds; it is None for a multi-platform index.
    """
    if engine.name == "docker":
        describe = engine.cmd("buildx", "imagetools", "inspect", ref, "--format", "{{json .Manifest}}")
        raw = engine.cmd("buildx", "imagetools", "inspect", ref, "--raw")
    else:
        if not which("skopeo"):
            raise EngineError(
                f"cannot read the digest of {ref}: skopeo is not installed", fix="apt-get install skopeo"
            )
        tls = [] if engine.tls_verify else ["--tls-verify=false"]
        describe = ["skopeo", "inspect", *tls, "--no-tags", f"docker://{qualify(ref)}"]
        raw = ["skopeo", "inspect", *tls, "--raw", f"docker://{qualify(ref)}"]
    outs = [_run(argv, QUICK_TIMEOUT, runner) for argv in (describe, raw)]
    for out in outs:
        if out.returncode != 0:
            text = out.stderr + out.stdout
            if _NOT_FOUND.search(text) and not _UNREACHABLE.search(text):
                return None
            raise EngineError(f"cannot read the digest of {ref}: {classify_pull_error(ref, text)}")
    digest = json.loads(outs[0].stdout).get("Digest" if engine.name != "docker" else "digest")
    config = (json.loads(outs[1].stdout).get("config") or {}).get("digest")
    return {"digest": digest, "config": config}


def by_digest(ref: str, digest: str) -> str:
    """``repo@sha256:…``: the one manifest a tag pointed at when it was read, whatever the tag does later."""
    from rocmstack.build.tags import parse_reference

    return f"{parse_reference(ref).name}@{digest}"


def push_command(engine: Engine, ref: str, source: str | None = None) -> list[str]:
    """Push ``ref``; podman pushes ``source`` (an image id: the very image that was checked) to it."""
    tls = [] if engine.tls_verify or engine.name == "docker" else ["--tls-verify=false"]
    if source and engine.name != "docker":
        return engine.cmd("push", *tls, source.removeprefix("sha256:"), ref)
    return engine.cmd("push", *tls, ref)


def copy_command(engine: Engine, source: str, dest: str) -> list[str]:
    """Registry-to-registry tag copy (no pull): buildx imagetools for docker, skopeo for podman."""
    if engine.name == "docker":
        return engine.cmd("buildx", "imagetools", "create", "--tag", dest, source)
    tls = [] if engine.tls_verify else ["--src-tls-verify=false", "--dest-tls-verify=false"]
    return ["skopeo", "copy", "--all", *tls, f"docker://{qualify(source)}", f"docker://{qualify(dest)}"]
