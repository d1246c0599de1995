"""Run ``rocmstack validate --in-place`` inside an image: engine commands with least-privilege flags.

Pure command building (``plan``) is separate from running it (``run_plan``), so ``--dry-run`` prints
exactly what a real run executes. Nothing from the host environment is passed in (tokens stay out):
the only things crossing the boundary are the report directory and, read-only, the baseline file.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import errno
import hashlib
import json
import os
import resource
import secrets
import shlex
import shutil
import stat
import subprocess
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocmstack import __version__
from rocmstack.build.runner import stream_lines
from rocmstack.container.engine import (
    NEEDS,
    InImage,
    Which,
    inspect_image,
    named,
    read_file,
    run_in_image_argv,
    run_steps,
    store_engine,
)
from rocmstack.contract import RENDER_HASH_LABEL, SBOM_PATH
from rocmstack.errors import EngineError, InputError, printable
from rocmstack.host import host_info
from rocmstack.options import HOST_ARGV_ENV
from rocmstack.platform.rocm import kfd_gpu_nodes
from rocmstack.validate import schema
from rocmstack.validate.report import load, write_all
from rocmstack.validate.schema import (
    BASELINE_FILE,
    BASELINE_MOUNT,
    COLLECT,
    HOST_CHECKED,
    IMAGE_CLAIMED,
    REPORT_JSON,
    REPORT_MOUNT,
    SBOM_FILE,
    STAGE,
    MiB,
    single_arch,
)

if TYPE_CHECKING:
    from rocmstack.validate.pipeline import ValidateOptions

HOSTS = ("amd", "nvidia", "cpu")
BASELINE_LIMIT = 4 * MiB  # a bench baseline is a few KiB of JSON
SBOM_LIMIT = 64 * MiB  # read from the image: bounded like everything that comes out of it
IN_IMAGE_ROCMSTACK = "/usr/local/bin/rocmstack"  # written by dockerfiles/fragments/rocmstack.j2
RUN_TIMEOUT_S = 3 * 3600
QUICK_TIMEOUT_S = 300
# The open-file limit Ray wants (field notes §3; vime's launch uses the same).
NOFILE_WANTED = 1048576
NOFILE = f"nofile={NOFILE_WANTED}:{NOFILE_WANTED}"
# /dev/shm of the container instead of the host's IPC namespace: Ray's object store and RCCL/NCCL's
# intra-node transport live there, and the engines' 64 MB default is far too small for them.
SHM_SIZE = "16g"

Runner = Callable[..., subprocess.CompletedProcess]


def detect_host(
    dev_root: Path = Path("/dev"), proc_root: Path = Path("/proc"), which: Which = shutil.which
) -> str:
    """amd | nvidia | cpu, from driver-level evidence only: what the container must be given."""
    if (dev_root / "kfd").exists():
        return "amd"
    if (dev_root / "nvidiactl").exists() or (proc_root / "driver" / "nvidia").exists() or which("nvidia-smi"):
        return "nvidia"
    return "cpu"


def nofile(engine: str) -> str:
    """``--ulimit`` value for open files. Daemonless engines (podman, buildah) start the container from this
    process, which cannot raise its hard limit without CAP_SYS_RESOURCE: ask for what this host allows."""
    if named(engine).daemon:
        return NOFILE
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    n = NOFILE_WANTED if hard == resource.RLIM_INFINITY else min(NOFILE_WANTED, hard)
    return f"nofile={n}:{n}"


def device_gids(dev_root: Path = Path("/dev")) -> list[int]:
    """The host's numeric groups owning the AMD device nodes (/dev/kfd, /dev/dri/renderD*, card*).

    Group names would resolve in the image's /etc/group, where a ``groupadd --system render`` got some
    other GID than the host's, and a non-root image user could then not open /dev/kfd (root:render
    0660). The root group (0) is never granted.
    """
    nodes = [
        dev_root / "kfd",
        *sorted((dev_root / "dri").glob("renderD*")),
        *sorted((dev_root / "dri").glob("card*")),
    ]
    gids = set()
    for node in nodes:
        try:
            gids.add(node.stat().st_gid)
        except OSError:
            continue
    return sorted(g for g in gids if g != 0)


def device_flags(
    engine: str, host: str, *, seccomp_unconfined: bool = False, dev_root: Path = Path("/dev")
) -> list[str]:
    """Least-privilege device access for the host's GPUs; never --privileged, never the host's IPC.

    buildah takes devices, ulimits and /dev/shm on ``buildah from`` and has no --group-add: the image's
    user runs with the image's own groups, so on an AMD host the buildah path reaches the GPUs only when
    the image's video/render GIDs equal the host's (docker and podman get the host's GIDs, below).
    """
    if engine not in NEEDS["run"].engines:
        raise InputError(
            f"--engine {engine!r}: unknown engine", fix=f"one of {', '.join(NEEDS['run'].engines)}"
        )
    if host not in HOSTS:
        raise InputError(f"host kind {host!r} unknown", fix=f"one of {', '.join(HOSTS)}")
    chosen = named(engine)
    flags: list[str] = []
    if host == "amd":
        flags += ["--device", f"{dev_root}/kfd", "--device", f"{dev_root}/dri"]
        if chosen.group_add:
            for gid in device_gids(dev_root):
                flags += ["--group-add", str(gid)]
        flags += ["--ulimit", nofile(engine), "--shm-size", SHM_SIZE]
    elif host == "nvidia":
        flags += chosen.gpu_flags()
        flags += ["--ulimit", nofile(engine), "--shm-size", SHM_SIZE]
    else:
        # No device on a CPU host, but Ray still needs open files (buildah's default, 1024, fails the doctor)
        # and /dev/shm: its object store and the CPU smoke's weight sync (shared memory) live there.
        flags += ["--ulimit", nofile(engine), "--shm-size", SHM_SIZE]
    if seccomp_unconfined:
        flags += ["--security-opt", "seccomp=unconfined"]
    return flags


@dataclass(frozen=True, kw_only=True)
class InImageArgs:
    """What the in-image run is asked to do (mirrors ``validate --in-place`` options)."""

    expect_gpus: int | None = None
    skip_smoke: bool = False
    skip_bench: bool = False
    baseline: bool = False  # a copy of the host's --baseline is mounted at BASELINE_MOUNT/BASELINE_FILE
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
        if self.baseline:
            out += ["--baseline", f"{BASELINE_MOUNT}/{BASELINE_FILE}"]
        # the previous release's spellings: images it built know only these, this release reads both
        if self.smoke_steps is not None:
            out += ["--smoke-steps", str(self.smoke_steps)]
        for check in self.doctor_skip:
            out += ["--doctor-skip", check]
        return out


@dataclass(frozen=True, kw_only=True)
class Plan:
    """The engine commands of one validation run: buildah's from, run, rm; docker's or podman's run, rm."""

    engine: str
    host: str
    image: str
    report_dir: Path
    container: str  # name given to the working container
    setup: tuple[str, ...] | None  # buildah from
    run: tuple[str, ...]
    cleanup: tuple[str, ...] | None  # buildah rm
    seccomp_unconfined: bool = False
    baseline: Path | None = None  # the host's --baseline; only a copy of it is mounted (``make_stage``)

    @property
    def stage(self) -> Path:
        """The folder mounted at REPORT_MOUNT: private to this run (see ``make_stage``)."""
        return stage_dir(self.report_dir, self.container)

    @property
    def baseline_copy(self) -> Path:
        """Where the copy of the baseline is mounted from: beside the stage, in the run's private folder."""
        return self.stage.parent / BASELINE_FILE

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
            "baseline": str(self.baseline) if self.baseline else None,
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
    """The exact commands: the run's stage is mounted read-write at REPORT_MOUNT; with a baseline, a copy of
    that one file (made by ``make_stage`` in the run's private folder) read-only, and nothing beside it:
    the folder the user keeps it in (a checkout, with its .git/config) never reaches the image."""
    report_dir = report_dir.resolve()
    name = container or f"rocmstack-validate-{secrets.token_hex(4)}"
    stage = stage_dir(report_dir, name)
    mounts = ["--volume", f"{stage}:{REPORT_MOUNT}", "--env", f"{HOST_ARGV_ENV}=1"]
    if baseline is not None:
        if not args.baseline:
            args = dataclasses.replace(args, baseline=True)
        mounts += ["--volume", f"{stage.parent / BASELINE_FILE}:{BASELINE_MOUNT}/{BASELINE_FILE}:ro"]
    baseline = baseline.resolve() if baseline is not None else None
    flags = device_flags(engine, host, seccomp_unconfined=seccomp_unconfined)
    # --init: the in-image Python is not PID 1 (which ignores SIGTERM), so a stop reaches it; named, so a
    # killed engine client does not leave the container running and holding the GPUs.
    steps = run_in_image_argv(
        engine,
        image,
        (IN_IMAGE_ROCMSTACK, *args.argv()),
        name=name,
        flags=flags,
        mounts=mounts,
        init=True,
        named=True,
    )
    return Plan(
        engine=engine,
        host=host,
        image=image,
        report_dir=report_dir,
        container=name,
        setup=steps.setup,
        run=steps.run,
        cleanup=steps.cleanup,
        seccomp_unconfined=seccomp_unconfined,
        baseline=baseline,
    )


def stage_dir(report_dir: Path, container: str) -> Path:
    return report_dir / f".{container}" / STAGE


def make_stage(stage: Path) -> None:
    """A fresh folder for this run only: its parent is created here (never reused: an existing one is an
    error, not a folder someone else prepared) with mode 0700, so no other host user reaches it; the stage
    itself is 1777, so whatever user the image runs as can write its report and nobody else's files."""
    stage.parent.parent.mkdir(parents=True, exist_ok=True)
    try:
        stage.parent.mkdir(mode=0o700)
    except FileExistsError:
        raise EngineError(
            f"staging folder {stage.parent} already exists", fix="remove it, or pick another --report folder"
        ) from None
    stage.parent.chmod(0o700)  # whatever the umask
    stage.mkdir(mode=0o700)
    stage.chmod(0o1777)


def copy_baseline(source: Path, dest: Path) -> None:
    """Copy the one baseline file (within BASELINE_LIMIT) as a new file in the run's private folder, 0644 so
    the image's user can read it through its read-only mount; the image sees only this copy."""
    try:
        with open(source, "rb") as f:
            data = f.read(BASELINE_LIMIT + 1)
    except OSError as exc:
        raise InputError(f"--baseline {printable(source)}: {exc.strerror or exc}") from None
    if len(data) > BASELINE_LIMIT:
        raise InputError(
            f"--baseline {printable(source)}: larger than {BASELINE_LIMIT:,} bytes",
            fix="pass a file written by `rocmstack bench rollout --save-baseline`",
        )
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    dest.chmod(0o644)  # whatever the umask


class _Refused(Exception):
    pass


def _open_below(root_fd: int, rel: str) -> int:
    """Open ROOT/REL for reading without following a link anywhere on the way (O_NOFOLLOW on each part);
    O_NONBLOCK so a FIFO the image left cannot stall the host. _Refused names the part that is not
    what it must be; FileNotFoundError when a part is missing."""
    parts = rel.split("/")
    fd = os.dup(root_fd)
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = os.O_RDONLY | os.O_NOFOLLOW | (os.O_NONBLOCK | os.O_NOCTTY if last else os.O_DIRECTORY)
            try:
                nxt = os.open(part, flags, dir_fd=fd)
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    raise
                # ELOOP: a link; ENOTDIR: a link or a file where a folder belongs.
                why = (
                    "a link" if exc.errno in (errno.ELOOP, errno.ENOTDIR) else (exc.strerror or "unreadable")
                )
                raise _Refused(f"{'/'.join(parts[: i + 1])} ({why})") from None
            os.close(fd)
            fd = nxt
        return os.dup(fd)
    finally:
        os.close(fd)


def collect(stage: Path, dest: Path) -> list[str]:
    """Copy the files the host expects (COLLECT) from the image's stage into DEST; return what was refused.

    Only regular files, reached without following any link, within their size limit: a link to a host
    file, a device, a FIFO or an oversized file is refused and named, never read. Anything else the image
    left in the stage is ignored (and removed with the stage).
    """
    refused: list[str] = []
    root_fd = os.open(stage, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for rel, limit in COLLECT.items():
            target = dest / rel
            target.unlink(missing_ok=True)  # never a stale copy from an earlier run beside the new report
            try:
                fd = _open_below(root_fd, rel)
            except FileNotFoundError:
                continue
            except _Refused as exc:
                if str(exc) not in refused:
                    refused.append(str(exc))
                continue
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    refused.append(f"{rel} (not a regular file)")
                    continue
                data = f.read(limit + 1)
            if len(data) > limit:
                refused.append(f"{rel} (larger than {limit:,} bytes)")
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "xb") as out:  # a fresh file owned by this process
                out.write(data)
    finally:
        os.close(root_fd)
    return refused


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
    """Run the plan; return the in-image validate's exit code. The working container is always removed, and
    so is the private stage when the run fails (the caller collects from it and removes it otherwise)."""
    stage = p.stage
    make_stage(stage)
    try:
        if p.baseline is not None:
            copy_baseline(p.baseline, p.baseline_copy)
        done = run_steps(
            InImage(setup=p.setup, run=p.run, cleanup=p.cleanup),
            engine=p.engine,
            image=p.image,
            timeout=timeout_s,
            quick_timeout=QUICK_TIMEOUT_S,
            execute=None if on_line is None else (lambda argv, limit: _stream(argv, limit, on_line)),
            runner=runner,
        )
        code, output = done.returncode, done.stdout + done.stderr
        if code == 124:
            raise EngineError(f"validation in {p.image} ran past {timeout_s:.0f}s and was stopped")
        if code not in (0, 1) and not (stage / "report.json").is_file():
            raise EngineError(
                f"{p.engine} could not run rocmstack inside {p.image} (exit {code}): {_tail(output, 6)}",
                fix=f"the image must carry {IN_IMAGE_ROCMSTACK} (every rendered rocmstack image does)",
            )
    except BaseException:
        shutil.rmtree(stage.parent, ignore_errors=True)
        raise
    return code


def _stream(
    argv: Sequence[str], timeout_s: float, on_line: Callable[[str], None]
) -> subprocess.CompletedProcess:
    """Run with live output (the in-image progress); the child's whole process group is stopped on error."""
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
    return subprocess.CompletedProcess(list(argv), 124 if expired else code, "\n".join(tail), "")


def seccomp_advice(report: dict) -> str | None:
    """The doctor check inside the image that says the default seccomp profile is in the way, if any.

    Recorded, never acted on: the image's own doctor is the image speaking, and an image must not choose
    its sandbox. Only the host's ``--seccomp-unconfined`` lifts the profile.
    """
    doctor = (report.get("doctor") or {}).get("report") or {}
    checks = doctor.get("checks") if isinstance(doctor, dict) else None
    for check in checks if isinstance(checks, list) else []:
        if (
            isinstance(check, dict)
            and check.get("status") in ("fail", "error")
            and "seccomp=unconfined" in str(check.get("fix") or "")
        ):
            return printable(check.get("id"))
    return None


def in_image_args(opts: ValidateOptions) -> InImageArgs:
    return InImageArgs(
        expect_gpus=opts.expect_gpus,
        skip_smoke=opts.skip_smoke,
        skip_bench=opts.skip_bench,
        baseline=opts.baseline is not None,
        device=opts.device,
        smoke_steps=opts.smoke_steps,
        doctor_skip=opts.doctor_skip,
    )


def by_id(p: Plan, image_id: str) -> Plan:
    """The plan with its image argument replaced by the image's id (bare hex: every engine takes it)."""
    bare = image_id.removeprefix("sha256:")

    def swap(cmd: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return tuple(bare if a == p.image else a for a in cmd) if cmd else cmd

    run = swap(p.run)
    assert run is not None
    return dataclasses.replace(p, image=bare, setup=swap(p.setup), run=run)


def pinned(p: Plan) -> tuple[Plan, dict]:
    """The plan a run executes: IMAGE inspected once and run by its id, not the tag, which could move to
    another image meanwhile. ``--dry-run`` prints this same plan."""
    info = inspect(p.engine, p.image)
    return by_id(p, info["id"]), info


def inspect(engine: str, image: str) -> dict:
    """Labels, id and tags of IMAGE from the engine's store (buildah shares podman's)."""
    return inspect_image(store_engine(engine), image)


@dataclass(frozen=True)
class Collected:
    """What came back from one run: the in-image exit code, its report (checked against the schema; a
    host-made empty one when it was not usable), what was refused on the way out, and why the report was
    not usable (None when it was)."""

    code: int
    report: dict[str, Any]
    refused: list[str]
    problem: str | None = None


def _empty_report() -> dict[str, Any]:
    """What the host reports in place of an in-image report it cannot use: nothing from the image."""
    report = {
        "schema": schema.SCHEMA,
        "rocmstack_version": __version__,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "seconds": 0.0,
        "mode": "container",
        "passed": False,
        "verdict": "FAIL: collect fail",
        "render_hash": None,
        "host": {},
        "stages": [],
        "image": {},
    }
    return schema.ValidateReport.produce(report).wire()


def _run_and_collect(p: Plan, on_line: Callable[[str], None] | None) -> Collected:
    """Run once; copy the in-image report up into the report dir (the files the image wrote stay its own)
    and check it against the schema: a report that does not match is a finding, not a crash."""
    (p.report_dir / REPORT_JSON).unlink(missing_ok=True)
    try:
        code = run_plan(p, on_line=on_line)
        refused = collect(p.stage, p.report_dir)
    finally:
        shutil.rmtree(p.stage.parent, ignore_errors=True)  # rmtree removes links, never what they point at
    if not (p.report_dir / REPORT_JSON).is_file():
        why = f": refused {', '.join(refused)}" if refused else ""
        raise EngineError(
            printable(f"the validation inside {p.image} wrote no usable report (exit {code}){why}"),
            fix=f"run `{shlex.join(p.run)}` by hand to see why",
        )
    refused = [printable(r) for r in refused]
    try:
        return Collected(code, load(p.report_dir), refused)
    except InputError as exc:
        (p.report_dir / REPORT_JSON).unlink()
        why = exc.message.split(f"{REPORT_JSON}: ", 1)[-1]
        return Collected(code, _empty_report(), refused, printable(f"{REPORT_JSON} from the image: {why}"))


def host_gpu_archs(sysfs_root: Path = Path("/sys")) -> list[str]:
    """The host's own reading of its GPUs' gfx targets (KFD topology); empty without an AMD driver."""
    return sorted({n.arch for n in kfd_gpu_nodes(sysfs_root) or []})


def arch_problem(in_image: list[str], host: list[str]) -> str | None:
    """The doctor inside the image names the arch it ran on; the host checks it against its own driver's.
    Without KFD on the host there is nothing to compare (and the report then records no arch at all)."""
    if host and sorted(in_image) != host:
        return (
            f"the doctor in the image reports GPU arch {';'.join(in_image) or 'none'}, "
            f"the host's driver has {';'.join(host)}"
        )
    return None


def host_checked(report: dict[str, Any], *, host_archs: list[str], options: dict[str, Any]) -> dict[str, Any]:
    """REPORT with the host's own facts written over what the image said: the GPU arch the host's driver
    has (never the image's doctor's) and the options the host ran it with (never the image's echo of
    them). The gate reads only these; the image's claims are kept under IMAGE_CLAIMED for the record."""
    claimed = {key: report.get(key) for key in ("gpu_arch", "gpu_archs", "options")}
    checked = {"gpu_arch": single_arch(host_archs), "gpu_archs": list(host_archs), "options": dict(options)}
    return {**report, **checked, IMAGE_CLAIMED: claimed, HOST_CHECKED: checked}


def attach_sbom(engine: str, image_id: str, report_dir: Path) -> dict | None:
    """Copy the image's SBOM (read by the host from the image, not from the run) beside the report."""
    data = read_file(store_engine(engine), image_id, SBOM_PATH, SBOM_LIMIT)
    if data is None:
        return None
    (report_dir / SBOM_FILE).write_bytes(data)
    try:
        serial = json.loads(data).get("serialNumber")
    except (ValueError, AttributeError):
        serial = None
    return {
        "file": SBOM_FILE,
        "path": SBOM_PATH,
        "sha256": hashlib.sha256(data).hexdigest(),
        "serial": printable(serial) if serial is not None else None,
    }


def _image_stages(labels: dict[str, str], report: dict[str, Any], host_archs: list[str]) -> list[dict]:
    """The host's checks of the image itself: a rocmstack image, its lock's render hash, the arch it ran on."""
    label_hash = labels.get(RENDER_HASH_LABEL)
    lock_hash = report.get("render_hash")
    found = []
    if label_hash and lock_hash and label_hash != lock_hash:
        found.append(f"label render hash {label_hash[:12]} != lock.json render hash {lock_hash[:12]}")
    elif not label_hash:
        found.append("no dev.rocmstack.render-hash label: not an image built by rocmstack")
    problem = arch_problem(list(report.get("gpu_archs") or []), host_archs)
    if problem:
        found.append(problem)
    return [schema.stage("image", schema.FAIL, 0.0, printable(why)) for why in reversed(found)]


def validate_image(p: Plan, opts: ValidateOptions, *, on_line: Callable[[str], None] | None = None) -> dict:
    """Run the in-image validation, then add what only the host knows: image labels and id, engine, host,
    the GPU arch its driver has and the options it ran with (written over the image's claims).

    The sandbox is the host's choice: ``seccomp=unconfined`` only with ``--seccomp-unconfined`` (in the
    plan), never because the image's doctor asks for it (that advice is only recorded).
    """
    ref = p.image
    p, info = pinned(p)
    got = _run_and_collect(p, on_line)
    code, report, refused = got.code, got.report, got.refused
    advice = seccomp_advice(report)
    host_archs = host_gpu_archs()
    stages = [*_image_stages(info["labels"], report, host_archs), *report["stages"]]
    if got.problem or refused:
        # rocmstack writes none of these: an image that does is not to be trusted with a verdict.
        found = ([got.problem] if got.problem else []) + (
            [f"refused what the image left for the host: {', '.join(refused)}"] if refused else []
        )
        stages.insert(0, schema.stage("collect", schema.FAIL, 0.0, "; ".join(found)))
    passed, line = schema.verdict(stages)
    try:
        sbom = attach_sbom(p.engine, info["id"] or p.image, p.report_dir)
    except EngineError as exc:  # the verdict stands on the run; the report says why no SBOM is beside it
        sbom = {"error": exc.one_line()}
    label_hash = info["labels"].get(RENDER_HASH_LABEL)
    host = {
        "mode": "container",
        "sbom": sbom,
        "host_gpu_archs": host_archs,
        "passed": passed and code == 0,
        "verdict": line,
        "stages": stages,
        "render_hash": label_hash or report.get("render_hash"),
        "image": {
            **(report.get("image") or {}),
            "ref": ref,
            "id": info["id"],
            "digest": info.get("digest"),  # the local manifest digest (podman); None on docker
            "repo_digests": info.get("repo_digests", []),
            "labels": info["labels"],
            "repo_tags": info["repo_tags"],
        },
        "engine": {
            **p.as_dict(),
            "exit_code": code,
            "refused_files": refused,
            "seccomp_advice_from_image": advice,
            "outer_host": host_info(),
        },
    }
    if passed and code != 0:
        host["verdict"] = f"FAIL: the in-image run exited {code}"
    checked = host_checked(report, host_archs=host_archs, options=opts.to_dict())
    report = schema.ValidateReport.produce(host, over=checked).wire()
    write_all(report, p.report_dir)
    return report
