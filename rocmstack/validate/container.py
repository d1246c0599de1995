"""Run ``rocmstack validate --in-place`` inside an image: engine commands with least-privilege flags.

Pure command building (``plan``) is separate from running it (``run_plan``), so ``--dry-run`` prints
exactly what a real run executes. Nothing from the host environment is passed in (tokens stay out):
the only things crossing the boundary are the report directory and, read-only, the baseline file.
"""

from __future__ import annotations

import secrets
import shlex
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rocmstack.build.engines import podman_prefix
from rocmstack.errors import EngineError, InputError

ENGINES = ("docker", "podman", "buildah")
HOSTS = ("amd", "nvidia", "cpu")
REPORT_MOUNT = "/report"
BASELINE_MOUNT = "/baseline"
# The image may run as a non-root user (recipes set one): it writes into this world-writable subfolder of
# the report dir, and the host copies the results up. A fixed name keeps --dry-run's command exact.
STAGE = ".in-image"
SBOM_FILE = "sbom.cdx.json"  # the image's SBOM, beside report.json
IN_IMAGE_ROCMSTACK = "/usr/local/bin/rocmstack"  # written by dockerfiles/fragments/rocmstack.j2
RUN_TIMEOUT_S = 3 * 3600
QUICK_TIMEOUT_S = 300
# The open-file limit Ray wants (field notes §3; vime's launch uses the same).
NOFILE_WANTED = 1048576
NOFILE = f"nofile={NOFILE_WANTED}:{NOFILE_WANTED}"

Runner = Callable[..., subprocess.CompletedProcess]


def detect_host(dev_root: Path = Path("/dev"), proc_root: Path = Path("/proc"), which=shutil.which) -> str:
    """amd | nvidia | cpu, from driver-level evidence only: what the container must be given."""
    if (dev_root / "kfd").exists():
        return "amd"
    if (dev_root / "nvidiactl").exists() or (proc_root / "driver" / "nvidia").exists() or which("nvidia-smi"):
        return "nvidia"
    return "cpu"


def engine_prefix(engine: str) -> tuple[str, ...]:
    """podman and buildah get the build's own storage flags, so they see the image store it built into."""
    if engine == "docker":
        return ("docker",)
    return (engine, *podman_prefix()[1:])


def nofile(engine: str) -> str:
    """``--ulimit`` value for open files. Daemonless engines (podman, buildah) start the container from this
    process, which cannot raise its hard limit without CAP_SYS_RESOURCE: ask for what this host allows."""
    if engine == "docker":
        return NOFILE
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    n = NOFILE_WANTED if hard == resource.RLIM_INFINITY else min(NOFILE_WANTED, hard)
    return f"nofile={n}:{n}"


def device_flags(engine: str, host: str, *, seccomp_unconfined: bool = False) -> list[str]:
    """Least-privilege device access for the host's GPUs; never --privileged.

    buildah takes devices, ulimits and IPC on ``buildah from`` and has no --group-add (its chroot
    isolation runs as root in the host's user namespace, so the device nodes' groups already apply).
    """
    if engine not in ENGINES:
        raise InputError(f"--engine {engine!r}: unknown engine", fix=f"one of {', '.join(ENGINES)}")
    if host not in HOSTS:
        raise InputError(f"host kind {host!r} unknown", fix=f"one of {', '.join(HOSTS)}")
    flags: list[str] = []
    if host == "amd":
        flags += ["--device", "/dev/kfd", "--device", "/dev/dri"]
        if engine != "buildah":
            flags += ["--group-add", "video", "--group-add", "render"]
        flags += ["--ulimit", nofile(engine), "--ipc=host"]
    elif host == "nvidia":
        # docker's --gpus goes through the NVIDIA container toolkit; podman and buildah use CDI names.
        flags += ["--gpus", "all"] if engine == "docker" else ["--device", "nvidia.com/gpu=all"]
        flags += ["--ulimit", nofile(engine), "--ipc=host"]
    else:
        # No device on a CPU host, but Ray still needs open files: buildah's default (1024) fails the doctor.
        flags += ["--ulimit", nofile(engine)]
    if seccomp_unconfined:
        flags += ["--security-opt", "seccomp=unconfined"]
    return flags


@dataclass(frozen=True, kw_only=True)
class InImageArgs:
    """What the in-image run is asked to do (mirrors ``validate --in-place`` options)."""

    expect_gpus: int | None = None
    skip_smoke: bool = False
    skip_bench: bool = False
    baseline_name: str | None = None  # file name inside BASELINE_MOUNT
    device: str = "auto"
    smoke_steps: int | None = None
    doctor_skip: tuple[str, ...] = ()

    def argv(self) -> list[str]:
        out = ["validate", "--in-place", "--report", REPORT_MOUNT, "--device", self.device]
        if self.expect_gpus is not None:
            out += ["--expect-gpus", str(self.expect_gpus)]
        if self.skip_smoke:
            out.append("--skip-smoke")
        if self.skip_bench:
            out.append("--skip-bench")
        if self.baseline_name:
            out += ["--baseline", f"{BASELINE_MOUNT}/{self.baseline_name}"]
        if self.smoke_steps is not None:
            out += ["--smoke-steps", str(self.smoke_steps)]
        for check in self.doctor_skip:
            out += ["--doctor-skip", check]
        return out


@dataclass(frozen=True, kw_only=True)
class Plan:
    """The engine commands of one validation run. buildah needs three (from, run, rm); others one."""

    engine: str
    host: str
    image: str
    report_dir: Path
    container: str  # name given to the working container
    setup: tuple[str, ...] | None  # buildah from
    run: tuple[str, ...]
    cleanup: tuple[str, ...] | None  # buildah rm
    seccomp_unconfined: bool = False

    def commands(self) -> list[tuple[str, ...]]:
        return [c for c in (self.setup, self.run, self.cleanup) if c]

    def as_dict(self) -> dict:
        return {
            "engine": self.engine,
            "host": self.host,
            "image": self.image,
            "report_dir": str(self.report_dir),
            "container": self.container,
            "commands": [list(c) for c in self.commands()],
            "seccomp_unconfined": self.seccomp_unconfined,
        }

    def shell(self) -> str:
        return "\n".join(shlex.join(c) for c in self.commands())


def plan(
    *,
    engine: str,
    host: str,
    image: str,
    report_dir: Path,
    args: InImageArgs,
    baseline: Path | None = None,
    seccomp_unconfined: bool = False,
    container: str | None = None,
) -> Plan:
    """The exact commands; the report dir is mounted read-write, the baseline's folder read-only."""
    report_dir = report_dir.resolve()
    name = container or f"rocmstack-validate-{secrets.token_hex(4)}"
    mounts = ["--volume", f"{report_dir / STAGE}:{REPORT_MOUNT}"]
    if baseline is not None:
        mounts += ["--volume", f"{baseline.resolve().parent}:{BASELINE_MOUNT}:ro"]
    flags = device_flags(engine, host, seccomp_unconfined=seccomp_unconfined)
    prefix = engine_prefix(engine)
    inner = args.argv()
    if engine == "buildah":
        # chroot isolation needs no cgroups or namespaces: it works where `podman run` does not.
        setup = (*prefix, "from", "--pull=never", "--name", name, *flags, image)
        run = (*prefix, "run", "--isolation", "chroot", *mounts, name, "--", IN_IMAGE_ROCMSTACK, *inner)
        cleanup = (*prefix, "rm", name)
        return Plan(
            engine=engine,
            host=host,
            image=image,
            report_dir=report_dir,
            container=name,
            setup=setup,
            run=run,
            cleanup=cleanup,
            seccomp_unconfined=seccomp_unconfined,
        )
    run = (
        *prefix,
        "run",
        "--rm",
        "--name",
        name,
        *flags,
        *mounts,
        "--entrypoint",
        IN_IMAGE_ROCMSTACK,
        image,
        *inner,
    )
    return Plan(
        engine=engine,
        host=host,
        image=image,
        report_dir=report_dir,
        container=name,
        setup=None,
        run=run,
        cleanup=None,
        seccomp_unconfined=seccomp_unconfined,
    )


def _call(argv: Sequence[str], timeout: float, runner: Runner) -> subprocess.CompletedProcess:
    try:
        return runner(list(argv), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise EngineError(
            f"{argv[0]} is not installed",
            fix="install podman and buildah (apt-get install podman buildah) or Docker",
        ) from None
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(list(argv), 124, "", f"{argv[0]}: no answer in {timeout:.0f}s")


def _tail(text: str, n: int = 12) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return "\n".join(lines[-n:]) if lines else "no output"


def run_plan(
    p: Plan,
    *,
    on_line: Callable[[str], None] | None = None,
    timeout_s: float = RUN_TIMEOUT_S,
    runner: Runner = subprocess.run,
) -> int:
    """Run the plan; return the in-image validate's exit code. The working container is always removed."""
    stage = p.report_dir / STAGE
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True, exist_ok=True)
    stage.chmod(0o777)  # whatever user the image runs as can write its report
    if p.setup:
        made = _call(p.setup, QUICK_TIMEOUT_S, runner)
        if made.returncode != 0:
            raise EngineError(
                f"{p.engine} cannot open image {p.image}: {_tail(made.stderr or made.stdout, 3)}",
                fix="build it first, or check the image name and the --storage-driver",
            )
    try:
        if on_line is None:
            done = _call(p.run, timeout_s, runner)
            code, output = done.returncode, done.stdout + done.stderr
        else:
            code, output = _stream(p.run, timeout_s, on_line)
    finally:
        if p.cleanup:
            _call(p.cleanup, QUICK_TIMEOUT_S, runner)
    if code == 124:
        raise EngineError(f"validation in {p.image} ran past {timeout_s:.0f}s and was stopped")
    if code not in (0, 1) and not (stage / "report.json").is_file():
        raise EngineError(
            f"{p.engine} could not run rocmstack inside {p.image} (exit {code}): {_tail(output, 6)}",
            fix=f"the image must carry {IN_IMAGE_ROCMSTACK} (every rendered rocmstack image does)",
        )
    return code


def _stream(argv: Sequence[str], timeout_s: float, on_line: Callable[[str], None]) -> tuple[int, str]:
    """Run with live output (the in-image progress); the child's whole process group is stopped on error."""
    from collections import deque

    from rocmstack.build.runner import stream_lines

    tail: deque[str] = deque(maxlen=40)

    def _line(line: str) -> None:
        tail.append(line.rstrip("\n"))
        on_line(line.rstrip("\n"))

    try:
        code, expired = stream_lines(argv, timeout_s=timeout_s, on_line=_line)
    except FileNotFoundError:
        raise EngineError(
            f"{argv[0]} is not installed", fix="install podman and buildah, or Docker"
        ) from None
    return (124 if expired else code), "\n".join(tail)


def seccomp_evidence(report: dict) -> str | None:
    """The doctor check that proves the default seccomp profile is in the way, if one does.

    A failing check whose fix asks for ``seccomp=unconfined`` is that proof; nothing else is.
    """
    doctor = (report.get("doctor") or {}).get("report") or {}
    for check in doctor.get("checks", []):
        if check.get("status") in ("fail", "error") and "seccomp=unconfined" in (check.get("fix") or ""):
            return check["id"]
    return None


def resolve_engine(choice: str) -> str:
    """auto: docker when its daemon answers, else podman, else buildah (the one that runs without cgroups)."""
    if choice != "auto":
        if choice not in ENGINES:
            raise InputError(f"--engine {choice!r}: unknown engine", fix=f"one of auto, {', '.join(ENGINES)}")
        return choice
    from rocmstack.build.engines import probe_docker

    if not isinstance(probe_docker(), str):
        return "docker"
    for name in ("podman", "buildah"):
        if shutil.which(name):
            return name
    raise EngineError(
        "no container engine found (docker daemon, podman or buildah)",
        fix="install podman and buildah (apt-get install podman buildah), or use --in-place inside the image",
    )


def in_image_args(opts) -> InImageArgs:
    return InImageArgs(
        expect_gpus=opts.expect_gpus,
        skip_smoke=opts.skip_smoke,
        skip_bench=opts.skip_bench,
        baseline_name=opts.baseline.name if opts.baseline else None,
        device=opts.device,
        smoke_steps=opts.smoke_steps,
        doctor_skip=opts.doctor_skip,
    )


def inspect(engine: str, image: str) -> dict:
    """Labels, id and tags of IMAGE from the engine's store (buildah shares podman's)."""
    from rocmstack.build.engines import Engine, inspect_image

    name = "docker" if engine == "docker" else "podman"
    return inspect_image(Engine(name=name, argv=engine_prefix(name), version=""), image)


def _run_and_collect(p: Plan, on_line: Callable[[str], None] | None) -> tuple[int, dict]:
    """Run once; copy the in-image report up into the report dir (the files the image wrote stay its own)."""
    from rocmstack.validate.report import REPORT_JSON, load

    stage = p.report_dir / STAGE
    (p.report_dir / REPORT_JSON).unlink(missing_ok=True)
    code = run_plan(p, on_line=on_line)
    try:
        if not (stage / REPORT_JSON).is_file():
            raise EngineError(
                f"the validation inside {p.image} wrote no report (exit {code})",
                fix=f"run `{shlex.join(p.run)}` by hand to see why",
            )
        shutil.copytree(stage, p.report_dir, dirs_exist_ok=True, copy_function=shutil.copyfile)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return code, load(p.report_dir)


def host_gpu_archs(sysfs_root: Path = Path("/sys")) -> list[str]:
    """The host's own reading of its GPUs' gfx targets (KFD topology); empty without an AMD driver."""
    from rocmstack.platform.rocm import kfd_gpu_nodes

    return sorted({n.arch for n in kfd_gpu_nodes(sysfs_root) or []})


def arch_problem(in_image: list[str], host: list[str]) -> str | None:
    """The doctor inside the image names the arch a report stands for; the host checks it, so an image
    cannot claim an arch it never ran on. Without KFD on the host there is nothing to compare."""
    if host and sorted(in_image) != host:
        return (
            f"the doctor in the image reports GPU arch {';'.join(in_image) or 'none'}, "
            f"the host's driver has {';'.join(host)}"
        )
    return None


def attach_sbom(engine: str, image_id: str, report_dir: Path) -> dict | None:
    """Copy the image's SBOM (read by the host from the image, not from the run) beside the report."""
    import hashlib
    import json

    from rocmstack.build.engines import Engine, read_file
    from rocmstack.render.sbom import IMAGE_PATH

    name = "docker" if engine == "docker" else "podman"
    data = read_file(Engine(name=name, argv=engine_prefix(name), version=""), image_id, IMAGE_PATH)
    if data is None:
        return None
    (report_dir / SBOM_FILE).write_bytes(data)
    try:
        serial = json.loads(data).get("serialNumber")
    except (json.JSONDecodeError, AttributeError):
        serial = None
    return {
        "file": SBOM_FILE,
        "path": IMAGE_PATH,
        "sha256": hashlib.sha256(data).hexdigest(),
        "serial": serial,
    }


def validate_image(p: Plan, opts, *, on_line: Callable[[str], None] | None = None) -> dict:
    """Run the in-image validation, then add what only the host knows: image labels and id, engine, host.

    When a doctor check proves the default seccomp profile is in the way, the run is repeated once with
    ``seccomp=unconfined`` (and the report says which check asked for it); never otherwise.
    """
    from rocmstack.validate import pipeline
    from rocmstack.validate.report import write_all

    info = inspect(p.engine, p.image)
    code, report = _run_and_collect(p, on_line)
    evidence = seccomp_evidence(report)
    if evidence and not p.seccomp_unconfined and p.engine != "buildah":
        p = plan(
            engine=p.engine,
            host=p.host,
            image=p.image,
            report_dir=p.report_dir,
            args=in_image_args(opts),
            baseline=opts.baseline,
            seccomp_unconfined=True,
        )
        code, report = _run_and_collect(p, on_line)
    label_hash = info["labels"].get("dev.rocmstack.render-hash")
    lock_hash = report.get("render_hash")
    stages = list(report["stages"])
    if label_hash and lock_hash and label_hash != lock_hash:
        stages.insert(
            0,
            pipeline.stage(
                "image",
                pipeline.FAIL,
                0.0,
                f"label render hash {label_hash[:12]} != lock.json render hash {lock_hash[:12]}",
            ),
        )
    elif not label_hash:
        stages.insert(
            0,
            pipeline.stage(
                "image",
                pipeline.FAIL,
                0.0,
                "no dev.rocmstack.render-hash label: not an image built by rocmstack",
            ),
        )
    host_archs = host_gpu_archs()
    problem = arch_problem(list(report.get("gpu_archs") or []), host_archs)
    if problem:
        stages.insert(0, pipeline.stage("image", pipeline.FAIL, 0.0, problem))
    passed, line = pipeline.verdict(stages)
    sbom = attach_sbom(p.engine, info["id"] or p.image, p.report_dir)
    report.update(
        {
            "mode": "container",
            "sbom": sbom,
            "host_gpu_archs": host_archs,
            "passed": passed and code == 0,
            "verdict": line,
            "stages": stages,
            "render_hash": label_hash or lock_hash,
            "image": {
                **report.get("image", {}),
                "ref": p.image,
                "id": info["id"],
                "labels": info["labels"],
                "repo_tags": info["repo_tags"],
            },
            "engine": {
                **p.as_dict(),
                "exit_code": code,
                "seccomp_evidence": evidence if p.seccomp_unconfined else None,
                "outer_host": pipeline.host_info(),
            },
        }
    )
    if passed and code != 0:
        report["verdict"] = f"FAIL: the in-image run exited {code}"
    write_all(report, p.report_dir)
    return report
