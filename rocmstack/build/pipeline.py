"""One build, start to end: plan -> base image preflight -> engine build -> tags -> manifest (-> push).

The plan is a value computed before anything runs; ``--dry-run`` prints it, a real build executes it.
Tags are applied only after the engine succeeded, and rolled back if applying them fails or is
interrupted, so an image is never left half-tagged.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from rocmstack.build.progress import Event, cache_counts
from rocmstack.build.runner import RunResult, run_logged
from rocmstack.build.tags import TagSet
from rocmstack.container import engine as engines
from rocmstack.container.engine import Engine
from rocmstack.container.reference import parse_reference
from rocmstack.contract import RECIPE_REVISION_LABEL, RECIPE_SOURCE_LABEL, RENDER_HASH_LABEL, SOURCE_LABEL
from rocmstack.errors import BuildError, EngineError, InputError, quoted
from rocmstack.host import host_info
from rocmstack.output import dumps, log_lines
from rocmstack.render.context import source_revision

if TYPE_CHECKING:
    from rocmstack.recipe.resolve import Resolved
    from rocmstack.render.context import Rendered

MANIFEST_SCHEMA = 1
BUILD_TIMEOUT_S = 8 * 3600
_PATCH_FAILED = re.compile(r"rocmstack patch FAILED: \[([a-z0-9._-]+)\] (.*)")
_GUARD_FAILED = re.compile(r"rocmstack guard FAILED: (.*)")
# Failures of the engine itself at a step's start, not of the step: the build runs once more (its finished
# layers come from the cache). podman/buildah re-exec a sealed memfd copy of themselves for a RUN step; the
# seal fails with EBUSY while the kernel still holds a passing reference to the copy's pages
# (containers/storage pkg/unshare/unshare.c, copy_self_proc_exe).
ENGINE_RACES = ("sealing memfd copy: Device or resource busy",)


@dataclass(frozen=True, kw_only=True)
class Plan:
    recipe: str
    gpu_archs: tuple[str, ...]
    render_hash: str
    base: str  # fully qualified
    base_in_dockerfile: str
    out_dir: Path
    context: Path
    log: Path
    manifest: Path
    iidfile: Path
    tags: TagSet
    build_args: dict[str, str]
    labels: dict[str, str]
    command: tuple[str, ...]
    engine: Engine
    engine_note: str | None
    instructions: int
    pins: dict[str, str]
    push: str | None  # None | "all" | "content"
    warnings: tuple[str, ...] = ()
    base_from: str | None = (
        None  # what the engine pulls the base from (transport:source), when not its registry
    )
    base_digest: str | None = None  # the recipe's pin, which whatever comes from base_from must carry

    def as_dict(self) -> dict:
        return {
            "recipe": self.recipe,
            "gpu_archs": list(self.gpu_archs),
            "render_hash": self.render_hash,
            "base": self.base,
            "context": str(self.context),
            "log": str(self.log),
            "manifest": str(self.manifest),
            "tags": self.tags.as_dict(),
            "build_args": self.build_args,
            "labels": self.labels,
            "command": list(self.command),
            "engine": {
                "name": self.engine.name,
                "version": self.engine.version,
                "builder": self.engine.builder,
                "note": self.engine_note,
            },
            "instructions": self.instructions,
            "pins": self.pins,
            "push": self.push,
            "warnings": list(self.warnings),
            "base_from": self.base_from,
        }


@dataclass(frozen=True, kw_only=True)
class Options:
    out_dir: Path
    cache_from: tuple[str, ...] = ()
    cache_to: tuple[str, ...] = ()
    source_url: str | None = None
    push: str | None = None
    no_cache: bool = False
    base_from: str | None = None  # --base-from: a mirror repository or an archive/layout of the base


def source_url(explicit: str | None = None, repo: Path | None = None, *, ci_env: bool = True) -> str | None:
    """Where the source lives: --source-url, the GitHub Actions repository (unless ``ci_env`` is off), or
    git's origin remote (as https)."""
    if explicit:
        return explicit
    server, repository = os.environ.get("GITHUB_SERVER_URL"), os.environ.get("GITHUB_REPOSITORY")
    if ci_env and server and repository:
        return f"{server.rstrip('/')}/{repository}"
    root = repo or Path(__file__).resolve().parents[2]
    try:
        url = subprocess.run(
            ["git", "-C", str(root), "config", "--get", "remote.origin.url"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    if m := re.fullmatch(r"git@([^:]+):(.+?)(?:\.git)?", url):
        return f"https://{m[1]}/{m[2]}"
    if m := re.fullmatch(r"(https://[^\s@]+?)(?:\.git)?", url):
        return m[1]
    return None  # a local path or credentials-bearing URL: never put it in a label


def _git_toplevel(folder: Path) -> Path | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(out.stdout.strip()).resolve() if out.returncode == 0 and out.stdout.strip() else None


def recipe_provenance(recipe_file: Path) -> dict[str, str]:
    """The labels that trace an image to a lab's recipe change: the commit (``-dirty`` with uncommitted
    changes) and the https URL of the git repository that holds the recipe, when that is not rocmstack's
    own. Build-time labels, outside the render hash: a lab's commit that changes nothing in the image
    keeps its content tag."""
    repo = _git_toplevel(recipe_file.resolve().parent)
    if repo is None or repo == _git_toplevel(Path(__file__).resolve().parent):
        return {}
    sha, _ = source_revision(repo)
    labels = {RECIPE_REVISION_LABEL: sha} if sha != "unknown" else {}
    # the repository's own origin, not the CI's: GITHUB_REPOSITORY may name rocmstack's checkout
    url = source_url(None, repo, ci_env=False)
    if url:
        labels[RECIPE_SOURCE_LABEL] = url
    return labels


def epoch(created: str) -> int:
    """Seconds since the epoch of a revision's ISO-8601 time (``source_revision``'s form)."""
    return int(dt.datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp())


def count_instructions(dockerfile: str) -> int:
    """Top-level instructions, continuation lines and comments excluded."""
    count, continued = 0, False
    for raw in dockerfile.splitlines():
        line = raw.strip()
        if not continued and line and not line.startswith("#"):
            count += 1
        continued = line.endswith("\\") if line and not line.startswith("#") else continued and bool(line)
    return count


def make_plan(
    resolved: Resolved,
    rendered: Rendered,
    tags: TagSet,
    *,
    engine: Engine,
    engine_note: str | None,
    options: Options,
    revision: tuple[str, str],
) -> Plan:
    recipe = resolved.recipe
    name = f"{recipe.name}-{'-'.join(resolved.gpu_archs)}"
    out = options.out_dir / name
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    context = out / "context"
    iidfile = out / "image.iid"
    sha, created = revision
    build_args = {"ROCMSTACK_REVISION": sha, "ROCMSTACK_CREATED": created}
    warnings = []
    url = source_url(options.source_url)
    labels = {SOURCE_LABEL: url} if url else {}
    labels.update(recipe_provenance(resolved.source))
    if not url:
        warnings.append(
            f"no source URL known (no --source-url, no GitHub Actions env, no https origin remote): "
            f"{SOURCE_LABEL} is left out"
        )
    base_ref = f"{recipe.base.image}:{recipe.base.tag}" + (
        f"@{recipe.base.digest}" if recipe.base.digest else ""
    )
    command = engines.build_command(
        engine,
        context=context,
        iidfile=iidfile,
        build_args=build_args,
        labels=labels,
        cache_from=options.cache_from,
        cache_to=options.cache_to,
        timestamp=epoch(created),
        no_cache=options.no_cache,
    )
    return Plan(
        recipe=recipe.name,
        gpu_archs=resolved.gpu_archs,
        render_hash=rendered.render_hash,
        base=engines.qualify(base_ref),
        base_in_dockerfile=base_ref,
        out_dir=out,
        context=context,
        log=out / "logs" / f"build-{stamp}.log",
        manifest=out / "manifest.json",
        iidfile=iidfile,
        tags=tags,
        build_args=build_args,
        labels=labels,
        command=tuple(command),
        engine=engine,
        engine_note=engine_note,
        instructions=count_instructions(rendered.dockerfile),
        pins=resolved.pins(),
        push=options.push,
        warnings=tuple(warnings),
        base_from=base_source(
            options.base_from, engine, recipe.base.image, recipe.base.tag, recipe.base.digest
        )
        if options.base_from
        else None,
        base_digest=recipe.base.digest,
    )


def print_plan(plan: Plan, console: Console) -> None:
    import shlex

    console.print(f"[bold]plan[/bold]: build {plan.recipe} for {';'.join(plan.gpu_archs)}")
    rows = [
        ("render hash", plan.render_hash),
        (
            "engine",
            plan.engine.describe() + (f"  [yellow]({plan.engine_note})[/yellow]" if plan.engine_note else ""),
        ),
        ("base image", f"{plan.base} (pulled first if not present)"),
        ("context", str(plan.context)),
        ("dockerfile", f"{plan.instructions} instructions"),
        ("log", str(plan.log)),
        ("manifest", str(plan.manifest)),
    ]
    for key, value in rows:
        console.print(f"  {key:<12} {value}")
    for tag in plan.tags.immutable:
        console.print(f"  {'tag':<12} {plan.tags.ref(tag)}  (immutable)")
    for tag in plan.tags.aliases:
        console.print(f"  {'tag':<12} {plan.tags.ref(tag)}  (floating alias)")
    if plan.push:
        console.print(
            f"  {'push':<12} {'content tag only' if plan.push == 'content' else 'all tags'}, immutable tags guarded"
        )
    console.print("[bold]command[/bold]:")
    console.print(f"  {shlex.join(plan.command)}", markup=False, highlight=False)


# -- execution ---------------------------------------------------------------------------------------


def _log(plan: Plan, text: str) -> None:
    plan.log.parent.mkdir(parents=True, exist_ok=True)
    with open(plan.log, "a", encoding="utf-8") as fh:
        fh.write(text.rstrip("\n") + "\n")


# Where --base-from reads a base besides a registry: what `skopeo copy` or `podman save` write. dir: and oci:
# keep the registry's manifest (its digest); docker-archive: does not, so a pinned recipe refuses it.
ARCHIVE_TRANSPORTS = ("dir:", "oci:", "oci-archive:", "docker-archive:")


def base_source(source: str, engine: Engine, image: str, tag: str, digest: str | None) -> str:
    """What ``--base-from`` names, as the engine's pull reads it. A mirror repository (``HOST/PATH`` or
    ``docker://HOST/PATH``) gets the recipe's digest, else its tag; an archive or a layout folder is read
    as it is. The recipe is not touched: the Dockerfile, its render hash and the tags stay the same."""
    if not engine.pulls_transports:
        raise InputError(
            f"--base-from {quoted(source)}: for podman and buildah",
            fix="docker takes a mirror of docker.io from its daemon's registry-mirrors setting, or "
            "`docker pull MIRROR@DIGEST && docker tag` before the build",
        )
    for transport in ARCHIVE_TRANSPORTS:
        if source.startswith(transport):
            path = source.removeprefix(transport)
            if not (Path(path).exists() or Path(path.rsplit(":", 1)[0]).exists()):
                raise InputError(f"--base-from {quoted(source)}: no such file or folder")
            return source
    repo = source.removeprefix("docker://")
    try:
        ref = parse_reference(repo)
    except InputError:
        raise InputError(
            f"--base-from {quoted(source)}: neither a registry repository nor an archive",
            fix="give a mirror (HOST/PATH or docker://HOST/PATH) or dir:, oci:, oci-archive:, docker-archive:PATH",
        ) from None
    if ref.tag or ref.digest:
        return f"docker://{repo}"
    return f"docker://{repo}@{digest}" if digest else f"docker://{repo}:{tag}"


def place_base(plan: Plan, console: Console) -> None:
    """Put the base that ``--base-from`` names in the engine's store under the recipe's own name, checked
    against the recipe's digest; the build then finds it there and pulls nothing."""
    engine, source = plan.engine, plan.base_from
    assert source is not None
    if engines.image_present(engine, plan.base):
        console.print(f"base image {plan.base} is present; --base-from not read", soft_wrap=True)
        return
    console.print(f"base image {plan.base} from {source} ...", soft_wrap=True)  # refs whole, for grep
    tls = [] if engine.tls_verify else ["--tls-verify=false"]
    result = run_logged(
        engine.cmd("pull", *tls, source),
        log_path=plan.log,
        progress=engine.progress,
        timeout_s=engines.PULL_TIMEOUT,
        on_line=lambda line: console.print(f"  {escape(line)}", highlight=False) if line.strip() else None,
    )
    image_id = result.tail[-1].strip() if result.ok and result.tail else ""
    if not result.ok or not re.fullmatch(r"[0-9a-f]{64}", image_id):
        said = chr(10).join(result.tail)
        why = (
            engines.last_line(said)  # a file: the engine's own words; a registry: classified as a pull is
            if source.startswith(ARCHIVE_TRANSPORTS)
            else engines.classify_pull_error(source.removeprefix("docker://"), said)
        )
        raise EngineError(f"cannot read base image from {source}: {why}", fix=f"log: {plan.log}")
    held = _digests(engines.inspect_image(engine, image_id))
    if plan.base_digest and plan.base_digest not in held:
        shown = ", ".join(sorted(d[:19] for d in held)) or "none"
        raise InputError(
            f"--base-from {source}: holds an image with digest {shown}, the recipe pins {plan.base_digest}",
            fix="bring the pinned image: `skopeo copy docker://IMAGE@DIGEST dir:FOLDER` keeps its digest "
            "(docker save and podman save do not)",
        )
    name = plan.base_in_dockerfile.split("@", 1)[0]
    out = engine.tag(image_id, name)
    if out.returncode != 0:
        raise EngineError(
            f"tagging the base {image_id[:12]} as {name} failed: {engines.last_line(out.stderr)}"
        )


def ensure_base(plan: Plan, console: Console) -> dict:
    """Make sure the engine has the base image; pull it if not. EngineError names the image and the registry."""
    engine = plan.engine
    if engine.builder_pulls:
        # A docker-container builder pulls by itself; check the registry answers for this image.
        out = engine.inspect_remote(plan.base)
        if out.returncode != 0:
            raise EngineError(
                f"cannot pull base image {plan.base}: "
                f"{engines.classify_pull_error(plan.base, out.stderr + out.stdout)}"
            )
        return {"image": plan.base, "id": None, "digest": None}
    if plan.base_from:
        place_base(plan, console)
    if not engines.image_present(engine, plan.base):
        console.print(f"pulling base image {plan.base} ...")
        result = run_logged(
            engine.cmd("pull", plan.base),
            log_path=plan.log,
            progress=engine.progress,
            timeout_s=engines.PULL_TIMEOUT,
            on_line=lambda line: (
                console.print(f"  {escape(line)}", highlight=False) if line.strip() else None
            ),
        )
        if not result.ok:
            raise EngineError(
                f"cannot pull base image {plan.base}: "
                f"{engines.classify_pull_error(plan.base, chr(10).join(result.tail))}",
                fix=f"the plan above runs once the registry is reachable; log: {plan.log}",
            )
    info = engines.inspect_image(engine, plan.base)
    return {"image": plan.base, "id": info["id"], "digest": _digest(info, plan.base_digest)}


def _digests(info: dict) -> set[str]:
    """Every registry digest an inspected image is known by (one image, pushed or pulled more than once)."""
    return {d.split("@", 1)[1] for d in info["repo_digests"] if "@" in d} | (
        {info["digest"]} if info.get("digest") else set()
    )


def _digest(info: dict, pinned: str | None = None) -> str | None:
    """The registry digest of an inspected image: the recipe's pin when the image carries it, else its first
    repo digest, else the engine's own field."""
    if pinned and pinned in _digests(info):
        return pinned
    return next((d.split("@", 1)[1] for d in info["repo_digests"] if "@" in d), None) or info.get("digest")


def _progress_printer(console):
    def on_event(event: Event) -> None:
        s = event.step
        if event.kind == "start":
            return
        state = (
            "[red]FAILED[/red]" if s.failed else ("[dim]cached[/dim]" if s.cached else f"{s.seconds:7.1f}s")
        )
        text = s.instruction if len(s.instruction) <= 100 else s.instruction[:97] + "..."
        console.print(f"  {state:>8}  {s.index:>2}/{s.total} {escape(text)}", highlight=False)

    return on_event


def run_engine(plan: Plan, console: Console) -> RunResult:
    """Run the plan's build: a terminal sees the running step beside a spinner, a log or a pipe a line as each
    step starts and one at least every 30 s; both get a line as each step ends."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    printer = _progress_printer(console)

    def run(starts: Callable[[str], None]) -> RunResult:
        def on_event(event: Event) -> None:
            if event.kind == "start":
                starts(f"step {event.step.index}/{event.step.total}: {event.step.instruction[:100]}")
            else:
                printer(event)

        return run_logged(
            plan.command,
            log_path=plan.log,
            progress=plan.engine.progress,
            timeout_s=BUILD_TIMEOUT_S,
            on_event=on_event,
        )

    if not console.is_terminal:
        with log_lines("build") as say:
            return run(say)
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task(f"building {plan.recipe}", total=None)
        return run(lambda text: progress.update(task, description=escape(text)))


def engine_race(result: RunResult) -> str | None:
    """The engine's own line when a failed build died of one of ENGINE_RACES; None otherwise."""
    if result.ok or result.timed_out:
        return None
    return next((ln.strip() for ln in result.tail if any(race in ln for race in ENGINE_RACES)), None)


def after_retry(first: RunResult, second: RunResult, race: str) -> RunResult:
    """The second attempt, counted as one build: a layer the first attempt built is no cache hit."""
    built = {s.index: s for s in first.steps if not s.cached and not s.failed}
    steps = tuple(
        replace(s, cached=False, seconds=built[s.index].seconds) if s.cached and s.index in built else s
        for s in second.steps
    )
    return replace(
        second,
        steps=steps,
        cache=cache_counts(steps),
        seconds=first.seconds + second.seconds,
        retries=(*first.retries, race),
    )


def build_through_races(
    plan: Plan, console: Console, run: Callable[[Plan, Console], RunResult] = run_engine
) -> RunResult:
    """Run the build; once more if the engine itself lost one of ENGINE_RACES."""
    result = run(plan, console)
    if race := engine_race(result):
        step = next((s for s in result.steps if s.failed), None)
        where = f"step {step.index}/{step.total}" if step else "a step"
        console.print(
            f"[yellow]{where} did not start: {escape(race)} (a race of the engine, not of the step); "
            "building once more, finished layers from the cache[/yellow]"
        )
        _log(plan, f"rocmstack: {where} did not start ({race}); building once more")
        result = after_retry(result, run(plan, console), race)
    return result


def failure_message(plan: Plan, result: RunResult) -> str:
    step = next((s for s in result.steps if s.failed), None)
    where = (
        f"step {step.index}/{step.total} ({_short(step.instruction)})"
        if step
        else (
            f"step {_short(result.failed_instruction)}"
            if result.failed_instruction
            else "before the first step"
        )
    )
    cause = None
    for line in reversed(result.tail):
        if m := _PATCH_FAILED.search(line):
            cause = f"patch {m[1]} did not apply: {m[2]}"
            break
        if m := _GUARD_FAILED.search(line):
            cause = f"guard failed: {m[1]}"
            break
    if result.timed_out:
        cause = "the build ran past its time limit and was stopped"
    cause = cause or result.error or f"exit status {result.returncode}"
    return f"build of {plan.recipe} failed at {where}: {cause}; full log: {plan.log}"


def _short(text: str | None, n: int = 90) -> str:
    text = text or ""
    return text if len(text) <= n else text[: n - 3] + "..."


def apply_tags(plan: Plan, image_id: str) -> list[str]:
    """Tag the image with every ref, or with none: a failure (or Ctrl-C) rolls back the tags applied."""
    engine = plan.engine
    done: list[str] = []
    try:
        for ref in plan.tags.refs():
            out = engine.tag(image_id, ref)
            if out.returncode != 0:
                raise BuildError(f"tagging {image_id[:19]} as {ref} failed: {engines.last_line(out.stderr)}")
            done.append(ref)
    except BaseException:
        for ref in done:
            engine.untag(image_id, ref)
        raise
    return done


def write_manifest(
    plan: Plan,
    *,
    base: dict,
    image: dict,
    result: RunResult,
    tagged: list[str],
    pushed: list[dict],
    started: str,
) -> dict:
    manifest = {
        "schema": MANIFEST_SCHEMA,
        "recipe": plan.recipe,
        "gpu_archs": list(plan.gpu_archs),
        "render_hash": plan.render_hash,
        "pins": plan.pins,
        "image": image,
        "tags": {**plan.tags.as_dict(), "applied": tagged, "pushed": pushed},
        "base": base,
        "steps": [s.as_dict() for s in result.steps],
        "cache": result.cache,
        "retries": list(result.retries),
        "duration_s": round(result.seconds, 2),
        "engine": {"name": plan.engine.name, "version": plan.engine.version, "builder": plan.engine.builder},
        "command": list(plan.command),
        "build_args": plan.build_args,
        "labels": plan.labels,
        "host": host_info(),
        "started": started,
        "log": str(plan.log),
    }
    save_manifest(plan.manifest, manifest)
    return manifest


def save_manifest(path: Path, manifest: dict) -> None:
    """Whole or not at all: a reader never sees half a manifest."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(dumps(manifest), encoding="utf-8")
    tmp.replace(path)


# How a build's tags reach the registry: publish.push.push_tags, handed in by the CLI (publish sits above
# build, so build does not import it). (engine, tags, render hash, mode, console, image_id=) -> pushed rows.
Pusher = Callable[..., list[dict]]


def execute(plan: Plan, console: Console, push: Pusher) -> dict:
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    _log(
        plan,
        f"rocmstack build {plan.recipe} {';'.join(plan.gpu_archs)} render {plan.render_hash} at {started}",
    )
    # The manifest describes the last build that succeeded here: a failing one must not leave it standing.
    plan.manifest.unlink(missing_ok=True)
    base = ensure_base(plan, console)
    plan.iidfile.unlink(missing_ok=True)
    result = build_through_races(plan, console)
    if not result.ok:
        console.print(f"[red]last {len(result.tail)} log lines[/red] ({plan.log}):")
        for line in result.tail:
            console.print(f"  | {line}", markup=False, highlight=False)
        raise BuildError(failure_message(plan, result))
    image_id = plan.iidfile.read_text(encoding="utf-8").strip()
    info = engines.inspect_image(plan.engine, image_id)
    if info["labels"].get(RENDER_HASH_LABEL) != plan.render_hash:  # checked before any tag is applied
        raise BuildError(
            f"built image {image_id[:19]} carries render hash {info['labels'].get(RENDER_HASH_LABEL)!r}, "
            f"expected {plan.render_hash}: the context changed during the build"
        )
    tagged = apply_tags(plan, image_id)
    pushed = (
        push(plan.engine, plan.tags, plan.render_hash, plan.push, console, image_id=image_id)
        if plan.push
        else []
    )
    info = engines.inspect_image(plan.engine, image_id) if pushed else info
    image = {"id": image_id, "digest": _digest(info), "repo_digests": info["repo_digests"]}
    return write_manifest(
        plan, base=base, image=image, result=result, tagged=tagged, pushed=pushed, started=started
    )
