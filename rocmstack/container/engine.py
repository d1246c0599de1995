"""Container engines: BuildKit through ``docker buildx build``, daemonless podman, and buildah to run a command
in an image where ``podman run`` cannot (no cgroups or namespaces).

The docker Python SDK does not speak BuildKit, so every engine is driven through its CLI, with argument
lists and timeouts. An :class:`Engine` is a frozen value: the command prefix (podman carries its storage
driver, so every later call sees the same image store) plus what was detected about it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import IO, cast

from rocmstack.container.reference import parse_reference
from rocmstack.errors import EngineError, InputError
from rocmstack.signals import INTERRUPTS, stop_signals_interrupt

# The choices of every --engine option.
ENGINES = ("auto", "docker", "podman", "buildah")
# The one order ``auto`` tries them in: a working Docker daemon is what most users mean when they have one;
# podman next (daemonless, the build's own store); buildah last, and only to run a command in an image.
ORDER = ("docker", "podman", "buildah")


@dataclass(frozen=True)
class Need:
    """What one use of an engine takes: the engines --engine may name, and those ``auto`` tries (in ORDER)."""

    engines: tuple[str, ...]
    auto: tuple[str, ...]


NEEDS = MappingProxyType(
    {
        # build, tag, inspect, read a file, push: buildx or podman (buildah shares podman's store)
        "build": Need(("docker", "podman"), ("docker", "podman")),
        # run rocmstack in an image with the host's GPUs: buildah last, it has no --group-add for their groups
        "run": Need(ORDER, ORDER),
        # run a stdlib-only probe with no device: podman run needs cgroups and namespaces, buildah's chroot does
        # not and sees the same store, so auto takes buildah for podman (--engine podman still runs podman)
        "probe": Need(ORDER, ("docker", "buildah")),
    }
)


def engine_help(need: str = "build") -> str:
    """The --engine help of a command with this need, from the one list."""
    return f"{' | '.join(('auto', *NEEDS[need].engines))} (auto: the first of {', '.join(NEEDS[need].auto)} that works)"


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
# How a build's output marks its steps (build.progress follows both): BuildKit's --progress=plain
# ("#5 [2/3] RUN ...", "#5 DONE 1.2s"), and buildah's, which podman build prints ("STEP 2/3: RUN ...").
BUILDKIT_PROGRESS = "buildkit"
STEP_PROGRESS = "step"


@dataclass(frozen=True, kw_only=True)
class Engine:
    name: str  # "docker" | "podman" | "buildah" (buildah only runs a command in an image)
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

    # What the engines do differently, asked of the engine: nothing outside this package compares names.

    @property
    def daemon(self) -> bool:
        """A daemon starts its containers (docker), not this process: our own rlimits do not bound them."""
        return self.name == "docker"

    @property
    def group_add(self) -> bool:
        """Takes --group-add for the host's device groups (buildah's ``from`` has none)."""
        return self.name != "buildah"

    @property
    def pulls_transports(self) -> bool:
        """Its pull reads containers-transports sources (docker://, dir:, oci:, docker-archive:); docker's
        reads a registry reference only."""
        return self.name != "docker"

    @property
    def builder_pulls(self) -> bool:
        """A named buildx builder pulls the base by itself, into its own cache, not the image store."""
        return self.name == "docker" and bool(self.builder)

    @property
    def progress(self) -> str:
        """How its build output marks steps: BUILDKIT_PROGRESS or STEP_PROGRESS."""
        return BUILDKIT_PROGRESS if self.name == "docker" else STEP_PROGRESS

    def gpu_flags(self) -> list[str]:
        """Every NVIDIA GPU: docker's --gpus goes through the NVIDIA container toolkit, podman and buildah
        take CDI names."""
        return ["--gpus", "all"] if self.name == "docker" else ["--device", "nvidia.com/gpu=all"]

    def tag(self, image_id: str, ref: str, runner: Runner = subprocess.run) -> subprocess.CompletedProcess:
        """Tag IMAGE_ID as REF in the image store."""
        return _run(self.cmd("tag", image_id, ref), QUICK_TIMEOUT, runner)

    def untag(self, image_id: str, ref: str, runner: Runner = subprocess.run) -> subprocess.CompletedProcess:
        """Take the tag REF off IMAGE_ID again, never the image itself: podman untags, docker removes the
        name only (--no-prune keeps its untagged parents)."""
        args = ("untag", image_id, ref) if self.name == "podman" else ("image", "rm", "--no-prune", ref)
        return _run(self.cmd(*args), QUICK_TIMEOUT, runner)

    def push(
        self, ref: str, source: str | None = None, runner: Runner = subprocess.run
    ) -> subprocess.CompletedProcess:
        """``push_command``, run (PUSH_TIMEOUT)."""
        return _run(push_command(self, ref, source), PUSH_TIMEOUT, runner)

    def copy(self, source: str, dest: str, runner: Runner = subprocess.run) -> subprocess.CompletedProcess:
        """``copy_command``, run (PUSH_TIMEOUT): registry to registry, nothing pulled."""
        return _run(copy_command(self, source, dest), PUSH_TIMEOUT, runner)

    def inspect_remote(self, ref: str, runner: Runner = subprocess.run) -> subprocess.CompletedProcess:
        """Ask REF's registry for its manifest, pulling nothing: exit 0 when the registry answers with it."""
        if self.name == "docker":
            argv = self.cmd("buildx", "imagetools", "inspect", ref)
        else:
            tls = [] if self.tls_verify else ["--tls-verify=false"]
            argv = ["skopeo", "inspect", *tls, "--no-tags", f"docker://{qualify(ref)}"]
        return _run(argv, QUICK_TIMEOUT, runner)


def _run(argv: Sequence[str], timeout: float, runner: Runner = subprocess.run) -> subprocess.CompletedProcess:
    try:
        return runner(list(argv), capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        return subprocess.CompletedProcess(list(argv), 127, "", f"{argv[0]}: not installed")
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(
            list(argv), 124, "", f"{' '.join(argv[:3])}: no answer in {timeout:.0f}s"
        )


def last_line(text: str) -> str:
    """The last line of an engine's output that says something: where its error chain ends."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


def podman_prefix() -> tuple[str, ...]:
    driver = os.environ.get(PODMAN_DRIVER_ENV, "").strip()
    return ("podman", "--storage-driver", driver) if driver else ("podman",)


def run_prefix(engine: str) -> tuple[str, ...]:
    """The command prefix of an engine that runs a command in an image (docker, podman or buildah): podman
    and buildah get the build's own storage flags, so they see the image store it built into."""
    if engine == "docker":
        return ("docker",)
    return (engine, *podman_prefix()[1:])


def named(name: str, version: str = "") -> Engine:
    """The engine NAME (docker, podman or buildah), unprobed, with the prefix that runs it: what it does
    (``Engine.gpu_flags``, ``group_add``, ...) for a command that holds only the name."""
    return Engine(name=name, argv=run_prefix(name), version=version)


def store_choice(choice: str) -> str:
    """The --engine choice that reads and pushes the image store CHOICE names: buildah builds and pushes
    nothing itself, it shares podman's store; auto stays auto."""
    return "podman" if choice == "buildah" else choice


def store_engine(name: str, version: str = "") -> Engine:
    """The engine that reads the image store NAME (docker, podman or buildah) builds into, unprobed: docker's
    own, else podman's, which buildah shares. For inspecting an image, reading a file out of it or showing
    a command."""
    store = "docker" if name == "docker" else "podman"
    return Engine(name=store, argv=run_prefix(store), version=version)


def buildah_steps(
    image: str,
    name: str,
    command: Sequence[str],
    *,
    from_flags: Sequence[str] = (),
    run_flags: Sequence[str] = (),
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """buildah's from, run, rm of COMMAND in IMAGE, as a working container NAME.

    chroot isolation needs no cgroups or namespaces: it works where ``podman run`` does not. FROM_FLAGS
    (devices, ulimits, /dev/shm) go on ``buildah from``, RUN_FLAGS (mounts) on ``buildah run``."""
    prefix = run_prefix("buildah")
    setup = (*prefix, "from", "--pull=never", "--name", name, *from_flags, image)
    run = (*prefix, "run", "--isolation", "chroot", *run_flags, name, "--", *command)
    cleanup = (*prefix, "rm", name)
    return setup, run, cleanup


def probe_docker(
    builder: str | None = None, *, which: Which = shutil.which, runner: Runner = subprocess.run
) -> Engine | str:
    """An Engine, or a short reason why docker buildx cannot build here."""
    if not which("docker"):
        return "docker: not installed"
    server = _run(["docker", "version", "--format", "{{.Server.Version}}"], PROBE_TIMEOUT, runner)
    if server.returncode != 0 or not server.stdout.strip():
        return f"docker: daemon not reachable ({last_line(server.stderr or server.stdout)})"
    bx = _run(["docker", "buildx", "version"], PROBE_TIMEOUT, runner)
    if bx.returncode != 0:
        return "docker: the buildx plugin is missing (install docker-buildx-plugin)"
    ins = _run(["docker", "buildx", "inspect", *([builder] if builder else [])], PROBE_TIMEOUT, runner)
    if builder and ins.returncode != 0:
        return f"docker: buildx builder {builder!r} not found ({last_line(ins.stderr)})"
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
        return f"podman: not usable ({last_line(out.stderr or out.stdout)})"
    return Engine(name="podman", argv=prefix, version=out.stdout.strip())


def probe_buildah(*, which: Which = shutil.which, runner: Runner = subprocess.run) -> Engine | str:
    if not which("buildah"):
        return "buildah: not installed"
    out = _run(["buildah", "--version"], PROBE_TIMEOUT, runner)  # "buildah version 1.28.2 (image-spec ...)"
    words = out.stdout.split()
    if out.returncode != 0 or len(words) < 3:
        return f"buildah: not usable ({last_line(out.stderr or out.stdout)})"
    return Engine(name="buildah", argv=run_prefix("buildah"), version=words[2])


def check_choice(choice: str, need: str = "build") -> None:
    """One InputError line for an --engine value that is no engine, or no engine for this use."""
    if choice not in ENGINES:
        raise InputError(f"--engine {choice!r}: unknown engine", fix=f"one of {', '.join(ENGINES)}")
    if choice != "auto" and choice not in NEEDS[need].engines:
        serves = ", ".join(("auto", *NEEDS[need].engines))
        raise InputError(f"--engine {choice!r}: not an engine for this command", fix=f"one of {serves}")


def detect(
    choice: str = "auto",
    *,
    need: str = "build",
    builder: str | None = None,
    which: Which = shutil.which,
    runner: Runner = subprocess.run,
) -> Engine:
    """The first engine of ORDER that serves NEED and works (docker: a daemon that answers, with buildx),
    or the one chosen; one EngineError line when none works."""
    check_choice(choice, need)
    if builder and choice not in ("auto", "docker"):
        raise InputError(f"--builder names a docker buildx builder; it does not apply to --engine {choice}")
    probes: dict[str, Callable[[], Engine | str]] = {
        "docker": lambda: probe_docker(builder, which=which, runner=runner),
        "podman": lambda: probe_podman(which=which, runner=runner),
        "buildah": lambda: probe_buildah(which=which, runner=runner),
    }
    reasons = []
    for name in [n for n in ORDER if n in NEEDS[need].auto] if choice == "auto" else [choice]:
        found = probes[name]()
        if isinstance(found, Engine):
            return found
        reasons.append(found)
        if choice == "docker":
            raise EngineError(
                f"--engine docker cannot build: {found}",
                fix="start the Docker daemon with buildx, or use --engine podman",
            )
    raise EngineError(f"no usable container engine ({'; '.join(reasons)})", fix=INSTALL_HINT)


def choose(choice: str = "auto", *, need: str = "run", which: Which = shutil.which) -> str:
    """The engine that runs a command in an image: the one chosen, unprobed (a dry run still shows its
    commands, and a missing one says so when it runs), or what ``detect`` finds for NEED."""
    check_choice(choice, need)
    return choice if choice != "auto" else detect(need=need, which=which).name


@dataclass(frozen=True, kw_only=True)
class InImage:
    """The commands that run a command in an image: buildah's from, run, rm; docker's or podman's run, and
    for a named container a forced rm."""

    setup: tuple[str, ...] | None
    run: tuple[str, ...]
    cleanup: tuple[str, ...] | None

    def commands(self) -> list[tuple[str, ...]]:
        return [c for c in (self.setup, self.run, self.cleanup) if c]


def run_in_image_argv(
    engine: str,
    image: str,
    argv: Sequence[str],
    *,
    name: str,
    flags: Sequence[str] = (),
    mounts: Sequence[str] = (),
    init: bool = False,
    pull_never: bool = False,
    named: bool = False,
) -> InImage:
    """ARGV run in IMAGE as a working container NAME. FLAGS (devices, ulimits, /dev/shm) and MOUNTS go
    where each engine takes them. docker/podman: INIT adds --init (the command is not PID 1, which ignores
    SIGTERM); PULL_NEVER keeps the engine off the registry; NAMED names the container and removes it again
    afterwards, since --rm does not help when the engine client is killed (timeout, signal)."""
    if engine == "buildah":
        setup, run, cleanup = buildah_steps(image, name, argv, from_flags=flags, run_flags=mounts)
        return InImage(setup=setup, run=run, cleanup=cleanup)
    prefix = run_prefix(engine)
    run = (
        *prefix,
        "run",
        "--rm",
        *(["--init"] if init else []),
        *(["--pull=never"] if pull_never else []),
        *(["--name", name] if named else []),
        *flags,
        *mounts,
        "--entrypoint",
        argv[0],
        image,
        *argv[1:],
    )
    return InImage(setup=None, run=run, cleanup=(*prefix, "rm", "--force", name) if named else None)


Execute = Callable[[Sequence[str], float], subprocess.CompletedProcess]


def _call(argv: Sequence[str], timeout: float, runner: Runner) -> subprocess.CompletedProcess:
    """One engine command; exit 124 when it runs past TIMEOUT, an EngineError when the engine is missing."""
    try:
        return runner(list(argv), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise EngineError(
            f"{argv[0]} is not installed",
            fix="install podman and buildah (apt-get install podman buildah) or Docker",
        ) from None
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(list(argv), 124, "", f"{argv[0]}: no answer in {timeout:.0f}s")


def _tail_lines(text: str, n: int) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return "\n".join(lines[-n:]) if lines else "no output"


def _remove(cleanup: Sequence[str], timeout: float, runner: Runner) -> None:
    """Remove the working container; a further Ctrl-C or SIGTERM meanwhile does not skip it."""
    for _ in range(3):
        try:
            with stop_signals_interrupt():
                _call(cleanup, timeout, runner)
            return
        except INTERRUPTS:
            continue


def run_steps(
    steps: InImage,
    *,
    engine: str,
    image: str,
    timeout: float,
    quick_timeout: float = QUICK_TIMEOUT,
    execute: Execute | None = None,
    runner: Runner = subprocess.run,
) -> subprocess.CompletedProcess:
    """Run STEPS: the setup must work, the run's result is returned (exit 124 past TIMEOUT), and the working
    container is always removed; setup and removal get QUICK_TIMEOUT each. EXECUTE runs the run step
    (default: output captured)."""
    if steps.setup:
        made = _call(steps.setup, quick_timeout, runner)
        if made.returncode != 0:
            raise EngineError(
                f"{engine} cannot open image {image}: {_tail_lines(made.stderr or made.stdout, 3)}",
                fix="build or pull it first, or check the image name and the --storage-driver",
            )
    try:
        return (execute or (lambda argv, limit: _call(argv, limit, runner)))(steps.run, timeout)
    finally:
        if steps.cleanup:
            _remove(steps.cleanup, quick_timeout, runner)


def run_in_image(
    engine: str,
    image: str,
    argv: Sequence[str],
    *,
    name: str,
    timeout: float,
    flags: Sequence[str] = (),
    mounts: Sequence[str] = (),
    init: bool = False,
    pull_never: bool = False,
    named: bool = False,
    quick_timeout: float = QUICK_TIMEOUT,
    execute: Execute | None = None,
    runner: Runner = subprocess.run,
) -> subprocess.CompletedProcess:
    """ARGV run in IMAGE through ENGINE (``run_in_image_argv``'s commands, run by ``run_steps``)."""
    steps = run_in_image_argv(
        engine,
        image,
        argv,
        name=name,
        flags=flags,
        mounts=mounts,
        init=init,
        pull_never=pull_never,
        named=named,
    )
    return run_steps(
        steps,
        engine=engine,
        image=image,
        timeout=timeout,
        quick_timeout=quick_timeout,
        execute=execute,
        runner=runner,
    )


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
# Docker's client when no daemon answers on its socket (moby client/errors.go, connectionFailed): "Cannot
# connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?", or, for a
# socket this user may not open, "permission denied while trying to connect to the Docker daemon socket".
_DAEMON_DOWN = re.compile(
    r"Cannot connect to the Docker daemon|permission denied while trying to connect to the Docker daemon",
    re.IGNORECASE,
)
DAEMON_FIX = (
    "start the Docker daemon (systemctl start docker), or give this user its socket (the docker group), "
    "or use --engine podman"
)


def check_daemon(engine: Engine, out: subprocess.CompletedProcess) -> None:
    """EngineError when a docker command failed because no daemon answered: then its failure says nothing
    about the image (not "not found", not a registry's fault)."""
    text = f"{out.stderr or ''}\n{out.stdout or ''}"
    if engine.name == "docker" and out.returncode != 0 and _DAEMON_DOWN.search(text):
        raise EngineError(f"docker: daemon not reachable ({_tail(last_line(text), 160)})", fix=DAEMON_FIX)


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
    detail = _tail(last_line(output), 160)  # the cause is at the end of the engine's error chain
    if _DAEMON_DOWN.search(output):  # the registry was never asked
        return f"the Docker daemon is not reachable ({detail}; {DAEMON_FIX})"
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
    out = _run(engine.cmd(*args), QUICK_TIMEOUT, runner)
    check_daemon(engine, out)  # a daemon that is down is not an absent image (which would start a pull)
    return out.returncode == 0


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
    timestamp: int | None = None,
    no_cache: bool = False,
) -> list[str]:
    """The exact build invocation. No -t: tags are applied only after the build succeeded.

    ``timestamp`` (podman, buildah): the image's created time and every file time in its layers, so two
    builds of one render give one image id. The layer cache still holds across timestamps. docker's
    BuildKit needs its exporter's rewrite-timestamp for that: not passed.
    """
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
        # OCI format: its config records no build container id or hostname (the docker format does, at
        # random, before buildah 1.41), so one render under one --timestamp is one image id. It has no SHELL:
        # each RUN names bash -o pipefail itself (render.run_form).
        # chroot isolation: no cgroups or namespaces needed, so it builds inside unprivileged containers.
        argv = engine.cmd(
            "build", "--format", "oci", "--isolation", "chroot", "--layers", "--platform", target_platform
        )
        if timestamp is not None:
            argv += ["--timestamp", str(timestamp)]
    if no_cache:
        argv.append("--no-cache")
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
    check_daemon(engine, out)
    if out.returncode != 0:
        raise EngineError(
            f"image {ref} not found in the {engine.name} image store ({last_line(out.stderr)})",
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
# What a tar stream carries besides one file's bytes: its header (512 bytes, a PAX record or two more for
# long names or xattrs), the padding to 512 and the end-of-archive blocks.
TAR_SLACK = 64 << 10


class _Capped:
    """A pipe read through, at most CAP bytes in all: the image decides how much it sends, not the host."""

    def __init__(self, pipe: IO[bytes], cap: int, what: str) -> None:
        self.pipe, self.left, self.what = pipe, cap, what

    def read(self, n: int = -1) -> bytes:
        want = self.left + 1 if n < 0 else min(n, self.left + 1)
        data = self.pipe.read(want) if want > 0 else b""
        self.left -= len(data)
        if self.left < 0:
            raise EngineError(self.what)
        return data


# What `podman cp`/`docker cp` say when the path is not in the container: only then is a file absent.
_CP_ABSENT = re.compile(r"no such file or directory|could not find the file", re.IGNORECASE)


def _stream_file(
    argv: list[str], path: str, ref: str, limit: int, timeout: float, env: Mapping[str, str] | None = None
) -> bytes | None:
    """The one file of the tar stream ARGV writes to stdout (``cp CID:PATH -``), read from the pipe with
    the limit applied as it arrives: nothing lands on disk, and no more than LIMIT + TAR_SLACK bytes are
    read before the engine is stopped. None only when the engine says the path is not there."""
    import tempfile

    with tempfile.TemporaryFile() as errors:  # a file, not a pipe: a chatty engine cannot stall the stream
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errors,
                env=dict(env) if env is not None else None,
            )
        except FileNotFoundError:
            raise EngineError(f"cannot read {path} from image {ref}: {argv[0]} is not installed") from None
        return _read_stream(proc, errors, path, ref, limit, timeout)


def _read_stream(
    proc: subprocess.Popen[bytes], errors: IO[bytes], path: str, ref: str, limit: int, timeout: float
) -> bytes | None:
    import tarfile
    import threading

    too_big = f"{path} in image {ref} is larger than {limit:,} bytes"
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None
        capped = cast(IO[bytes], _Capped(proc.stdout, limit + TAR_SLACK, too_big))
        try:
            with tarfile.open(fileobj=capped, mode="r|") as tar:
                member = tar.next()
                if member is None:
                    return None
                if not member.isreg():
                    raise EngineError(f"{path} in image {ref} is not a regular file")
                if member.size > limit:  # the header says so: stop before a byte of it is read
                    raise EngineError(too_big)
                fh = tar.extractfile(member)
                data = fh.read(limit + 1) if fh is not None else b""
        except tarfile.TarError:
            proc.stdout.close()  # a writer still going stops on the closed pipe; its exit code says why
            if proc.wait() != 0:
                errors.seek(0)
                said = errors.read(4096).decode("utf-8", "replace")
                if _CP_ABSENT.search(said):
                    return None  # the path is not in the image
                # any other failure (no such container, a store it cannot open) is no answer about the file
                raise EngineError(f"cannot read {path} from image {ref}: {last_line(said)}") from None
            raise EngineError(f"cannot read {path} from image {ref}: not a tar stream") from None
        if len(data) > limit:
            raise EngineError(too_big)
        return data
    finally:
        timer.cancel()
        proc.kill()  # an image that sends more than asked for is not read to its end
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def read_file(
    engine: Engine,
    ref: str,
    path: str,
    limit: int = READ_LIMIT,
    runner: Runner = subprocess.run,
    env: Mapping[str, str] | None = None,
) -> bytes | None:
    """Copy one file out of an image without running it (create, cp, rm); None when it is absent.

    The image is untrusted: what comes out is read only as a regular file (a link, a folder or a device
    is refused, never followed) of at most LIMIT bytes, and the limit bounds the copy itself: ``cp`` streams
    a tar archive that is read from the pipe and cut off past the limit, so a 300 MiB file costs the host
    LIMIT bytes, never 300 MiB of disk. Anything else is an EngineError naming it."""
    created = _run(engine.cmd("create", ref, "true"), QUICK_TIMEOUT, runner)
    if created.returncode != 0:
        raise EngineError(f"cannot open image {ref} to read {path} ({last_line(created.stderr)})")
    cid = created.stdout.strip().splitlines()[-1]
    try:
        return _stream_file(engine.cmd("cp", f"{cid}:{path}", "-"), path, ref, limit, QUICK_TIMEOUT, env)
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
    tls = [] if engine.tls_verify else ["--tls-verify=false"]
    if engine.name == "docker":
        describe = engine.cmd("buildx", "imagetools", "inspect", ref, "--format", "{{json .Manifest}}")
        raw = engine.cmd("buildx", "imagetools", "inspect", ref, "--raw")
    else:
        if not which("skopeo"):
            raise EngineError(
                f"cannot read the digest of {ref}: skopeo is not installed", fix="apt-get install skopeo"
            )
        describe = ["skopeo", "inspect", *tls, "--no-tags", f"docker://{qualify(ref)}"]
        raw = ["skopeo", "inspect", *tls, "--raw", f"docker://{qualify(ref)}"]
    outs = [_run(argv, QUICK_TIMEOUT, runner) for argv in (describe, raw)]
    for out in outs:
        if out.returncode != 0:
            text = out.stderr + out.stdout
            if _NOT_FOUND.search(text) and not _UNREACHABLE.search(text):
                return None
            raise EngineError(f"cannot read the digest of {ref}: {classify_pull_error(ref, text)}")
    digest = _get(_json(outs[0].stdout, ref), "Digest" if engine.name != "docker" else "digest")
    manifest = _json(outs[1].stdout, ref)
    config = _get(_get(manifest, "config"), "digest")
    children = _get(manifest, "manifests")
    if not isinstance(children, list):
        return {"digest": digest, "config": config}
    # A multi-platform index (an OCI image index, a Docker manifest list): its digest names no image.
    # What it holds is the config digests of its image manifests (attestations are not images).
    name = parse_reference(ref).name
    images = []
    for child in children[:MAX_INDEX_CHILDREN]:
        kind = _get(_get(child, "annotations"), "vnd.docker.reference.type")
        if kind == "attestation-manifest" or not isinstance(_get(child, "digest"), str):
            continue
        child_ref = f"{name}@{child['digest']}"
        if engine.name == "docker":
            argv = engine.cmd("buildx", "imagetools", "inspect", child_ref, "--raw")
        else:
            argv = ["skopeo", "inspect", *tls, "--raw", f"docker://{qualify(child_ref)}"]
        out = _run(argv, QUICK_TIMEOUT, runner)
        if out.returncode != 0:
            raise EngineError(
                f"cannot read {child_ref} of the index {ref}: {classify_pull_error(ref, out.stderr)}"
            )
        images.append(_get(_get(_json(out.stdout, child_ref), "config"), "digest"))
    more = len(children) > MAX_INDEX_CHILDREN
    return {"digest": digest, "config": None, "index": True, "images": images, "more": more}


MAX_INDEX_CHILDREN = 16  # an index of ours holds one image (and its attestation); a registry's may hold more


def _json(text: str, ref: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        raise EngineError(f"cannot read the manifest of {ref}: the registry tool printed no JSON") from None


def _get(obj: object, key: str) -> object:
    """``obj[key]`` of a registry's JSON when obj is an object, else None: its shape is not ours to trust."""
    return obj.get(key) if isinstance(obj, dict) else None


def by_digest(ref: str, digest: str) -> str:
    """``repo@sha256:…``: the one manifest a tag pointed at when it was read, whatever the tag does later."""
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
