"""Render a resolved recipe into a build context: Dockerfile + every file it COPYs.

Deterministic: the same inputs give byte-identical files, with the same modes, on any machine and under
any umask. The render hash is the hash of the rendered context itself (``context_hash``: every file's
path, mode and content, sorted), rendered with the hash and the source revision left out; so the
Dockerfile, rocmstack's own source copied into the image, its version and requirements are all covered.
The source revision (in lock.json) and the creation time (a build arg) are not: they change with every
commit, what is built does not.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import jinja2

from rocmstack import __version__, contract
from rocmstack.errors import InputError, printable, quoted
from rocmstack.lock.drift import self_layer_drift
from rocmstack.lock.schema import checked
from rocmstack.patches import Patch, load_patches, select
from rocmstack.recipe.model import FRAMEWORK_SMOKE_FILE, LAYER_ORDER, SELF_LAYER
from rocmstack.recipe.resolve import Resolved, recipe_arg
from rocmstack.render.run_form import exec_form
from rocmstack.render.sbom import sbom_bytes
from rocmstack.resources import data_dir, self_requirements, templates_dir

PACKAGE = Path(__file__).resolve().parent.parent
INCONTEXT = PACKAGE / "incontext"
DATA_DIRS = ("recipes", "dockerfiles", "patches")
IN_IMAGE_SCRIPTS = ("aiter_prebuild.py", "apply_patches.py", "guard.py")
LOCK_FILE = "rocmstack/lock.json"  # COPYed to contract.LOCK_PATH
SBOM_FILE = "rocmstack/sbom.cdx.json"  # COPYed to /opt/rocmstack/sbom.cdx.json (fragments/rocmstack.j2)
# Stand-ins while the context is hashed: the hash cannot cover itself, the revision must not count.
PENDING_HASH = "@rocmstack-render-hash@"
PENDING_REVISION = "@rocmstack-revision@"
FILE_MODE, EXEC_MODE, DIR_MODE = 0o644, 0o755, 0o755


@dataclass(frozen=True, kw_only=True)
class Rendered:
    files: dict[str, bytes]
    render_hash: str
    meta: dict = field(default_factory=dict)

    @property
    def dockerfile(self) -> str:
        return self.files["Dockerfile"].decode()


@dataclass(frozen=True, kw_only=True)
class Draft:
    """The context with stand-ins for its render hash and revision: exactly what the hash covers. Built once
    per render; ``finish`` puts the hash and the revision in (they appear only in these two files)."""

    resolved: Resolved
    patches: tuple[Patch, ...]
    ignored_rules: tuple[str, ...]
    files: dict[str, bytes]
    render_hash: str


def _canonical(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def source_revision(repo: Path | None = None) -> tuple[str, str]:
    """(git sha or 'unknown', ISO-8601 commit time or the epoch): fixed per source, reproducible."""
    root = repo or Path(__file__).resolve().parents[2]
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "log", "-1", "--format=%H %ct"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.split()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        sha, ct = out[0] + ("-dirty" if dirty else ""), out[1]
    except (OSError, subprocess.SubprocessError, IndexError):
        sha, ct = "unknown", "0"
    stamp = datetime.fromtimestamp(int(epoch or ct), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return sha, stamp


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        extensions=["jinja2.ext.do"],
    )
    # The image contract's folder, for every template and the macros they import (never spelt in them).
    env.globals["root"] = contract.ROOT
    env.filters["dq"] = _double_quoted
    env.filters["locked"] = lambda value, kind: checked(kind, value)  # a lock value: the loader's filter
    return env


def _double_quoted(value: object) -> str:
    text = str(value)
    # Model validation already forbids these; refuse again here so no template can smuggle one through.
    if any(ch in text for ch in '"\\$`\n\r'):
        raise InputError(
            f"refusing to render {text!r} into the Dockerfile: it contains a quote, \\, $, ` or newline"
        )
    return f'"{text}"'


def file_mode(rel: str) -> int:
    """The mode every context file is written with (and hashed with): never the umask's."""
    return EXEC_MODE if rel.startswith("rocmstack/bin/") else FILE_MODE


def context_hash(files: dict[str, bytes]) -> str:
    """sha256 over every file of the context, sorted by path: path, mode and content hash."""
    h = hashlib.sha256()
    for rel in sorted(files):
        entry = [rel, f"{file_mode(rel):o}", hashlib.sha256(files[rel]).hexdigest()]
        h.update(_canonical(entry) + b"\n")
    return h.hexdigest()


def _sbom(resolved: Resolved, patches: list[Patch]) -> bytes:
    """The image's SBOM (independent of the render hash and the revision, so the hash can cover it)."""
    return sbom_bytes(resolved.lock(render_hash="", revision=""), [p.spec() for p in patches])


def draft(resolved: Resolved, patches: list[Patch], ignored_rules: tuple[str, ...] = ()) -> Draft:
    """The context for these inputs with stand-ins for the hash and the revision, and its hash."""
    files = _context_files(resolved, patches, ignored_rules, PENDING_HASH, PENDING_REVISION, self_source())
    return Draft(
        resolved=resolved,
        patches=tuple(patches),
        ignored_rules=ignored_rules,
        files=files,
        render_hash=context_hash(files),
    )


def render_hash(resolved: Resolved, patches: list[Patch], ignored_rules: tuple[str, ...] = ()) -> str:
    """The hash of the context ``render`` writes for these inputs (see ``context_hash``)."""
    return draft(resolved, patches, ignored_rules).render_hash


def finish(drafted: Draft, revision: tuple[str, str] | None = None) -> Rendered:
    """The context ``render`` writes: the draft with its hash and the source revision in place. The hash is
    in the Dockerfile (labels, header) and lock.json; the revision only in lock.json, as a JSON string."""
    sha, created = revision or source_revision()
    digest = drafted.render_hash
    files = dict(drafted.files)
    files["Dockerfile"] = files["Dockerfile"].replace(PENDING_HASH.encode(), digest.encode())
    files[LOCK_FILE] = (
        files[LOCK_FILE]
        .replace(json.dumps(PENDING_HASH).encode(), json.dumps(digest).encode())
        .replace(json.dumps(PENDING_REVISION).encode(), json.dumps(sha).encode())
    )
    resolved, ignored_rules = drafted.resolved, drafted.ignored_rules
    meta = {
        "recipe": resolved.recipe.name,
        "render_hash": digest,
        "gpu_archs": list(resolved.gpu_archs),
        "revision": sha,
        "created": created,
        "labels": _labels(resolved, digest, ignored_rules),
    }
    return Rendered(files=files, render_hash=digest, meta=meta)


def _layers(resolved: Resolved, patches: list[Patch]) -> list[dict]:
    by_component: dict[str, list[Patch]] = {}
    for p in patches:
        by_component.setdefault(p.component, []).append(p)
    layers = []
    checkouts: dict[tuple[str | None, str | None], str] = {}
    locked = resolved.locked or {}
    pinned: dict[str, list[dict]] = {}
    for pkg in locked.get("packages", ()):
        pinned.setdefault(pkg["layer"], []).append(pkg)
    for layer in LAYER_ORDER:
        comps = []
        for name, comp in resolved.components_in(layer.value):
            mine = by_component.get(name, [])
            key = (comp.url, comp.ref)
            comps.append(
                {
                    "name": name,
                    "c": comp,
                    # Components built from one repo at one ref (sglang + sgl-kernel) share a checkout.
                    "reuse_checkout": comp.source == "git" and key in checkouts,
                    "src": checkouts.setdefault(key, f"/opt/src/{name}") if comp.source == "git" else None,
                    "install_name": comp.package or name,
                    "source_patches": [p.id for p in mine if p.target.source],
                    "patches": [p.id for p in mine if not p.target.source],
                    "commit": (locked.get("git", {}).get(name) or {}).get("commit"),
                    "requirements_locked": bool(locked)
                    and name not in locked.get("requirements_unlocked", ()),
                }
            )
        if comps or pinned.get(layer.value):
            layers.append(
                {
                    "name": layer.value,
                    "components": comps,
                    "locked": bool(locked),
                    "requirements": f"rocmstack/requirements/{layer.value}.txt"
                    if pinned.get(layer.value)
                    else None,
                }
            )
    return layers


def _self_layer(resolved: Resolved, requirements: list[str]) -> dict:
    """rocmstack's own pip layer: from the lock (hashes required) when the build installs one, else ranges."""
    locked = resolved.locked
    if not locked:
        return {"name": SELF_LAYER, "locked": False, "requirements": None, "ranges": requirements}
    drift = self_layer_drift(locked, requirements)
    if drift:
        # never left to pip's resolver: the gate reports this as lock drift first (prepare.verify)
        raise InputError(
            f"{resolved.recipe.name}: the lock does not cover rocmstack's own layer: {drift}",
            fix=f"run `rocmstack lock {recipe_arg(resolved)}`",
        )
    pinned = any(p["layer"] == SELF_LAYER for p in locked.get("packages", ()))
    return {
        "name": SELF_LAYER,
        "locked": True,
        "requirements": f"rocmstack/requirements/{SELF_LAYER}.txt" if pinned else None,
        "ranges": requirements,
    }


def locked_requirements(resolved: Resolved) -> dict[str, str]:
    """layer -> a pip requirements file of exact pins with hashes (installed with --require-hashes)."""
    out: dict[str, list[str]] = {}
    for pkg in (resolved.locked or {}).get("packages", ()):
        # Each value again through the lock loader's filter: nothing but a pin and its hashes is a line here.
        hashes = "".join(f" \\\n    --hash={checked('hash', h)}" for h in pkg["hashes"])
        name, version = checked("name", pkg["name"]), checked("version", pkg["version"])
        out.setdefault(checked("layer", pkg["layer"]), []).append(f"{name}=={version}{hashes}\n")
    return {layer: "".join(lines) for layer, lines in out.items()}


def _labels(resolved: Resolved, digest: str, ignored_rules: tuple[str, ...]) -> dict[str, str]:
    r = resolved.recipe
    pins = ",".join(f"{k}:{v}" for k, v in resolved.pins().items())
    labels = {
        "org.opencontainers.image.title": f"rocmstack {r.name}",
        "org.opencontainers.image.description": r.description,
        "org.opencontainers.image.base.name": f"{r.base.image}:{r.base.tag}",
        "org.opencontainers.image.vendor": "rocmstack",
        contract.RECIPE_LABEL: r.name,
        contract.RENDER_HASH_LABEL: digest,
        contract.ARCHS_LABEL: resolved.arch_list,
        contract.PINS_LABEL: pins,
        contract.PATCHES_LABEL: ",".join(r.patches),
        contract.VERSION_LABEL: __version__,
    }
    if r.base.digest:
        labels["org.opencontainers.image.base.digest"] = r.base.digest
    if ignored_rules:
        labels[contract.IGNORED_RULES_LABEL] = ",".join(sorted(ignored_rules))
    return labels


def self_source() -> dict[str, bytes]:
    """rocmstack's source and data, laid out as a checkout, so the image runs the same revision."""

    files: dict[str, bytes] = {}
    roots = [("rocmstack", PACKAGE)] + [(name, data_dir(name)) for name in DATA_DIRS]
    for prefix, root in roots:
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if (
                path.is_file()
                and "__pycache__" not in rel.parts
                and rel.parts[0] != "_data"
                and path.suffix != ".pyc"
                # The shipped locks record render hashes: a context holding them could never be locked.
                and not path.name.endswith(".lock.json")
            ):
                files[f"rocmstack/src/{prefix}/{rel.as_posix()}"] = path.read_bytes()
    return files


def _context_files(
    resolved: Resolved,
    patches: list[Patch],
    ignored_rules: tuple[str, ...],
    digest: str,
    revision: str,
    src: dict[str, bytes],
) -> dict[str, bytes]:
    recipe = resolved.recipe
    context = {
        "r": recipe,
        "archs": resolved.gpu_archs,
        "arch_list": resolved.arch_list,
        "layers": _layers(resolved, patches),
        "patches": {p.id: p for p in patches},
        "locked": bool(resolved.locked),
        "accepted_conflicts": [f"{c.package}:{c.requires}" for c in recipe.accepted_conflicts],
        "no_deps_packages": sorted({c.package or n for n, c in recipe.components.items() if c.no_deps}),
        "has_vllm": any(c.layer.value == "vllm" for c in recipe.components.values()),
        "labels": _labels(resolved, digest, ignored_rules),
        "render_hash": digest,
        "version": __version__,
        "self_layer": _self_layer(resolved, self_requirements()),
    }
    dockerfile = exec_form(
        re.sub(r"\n{3,}", "\n\n", _environment().get_template("Dockerfile.j2").render(context))
    )
    files: dict[str, bytes] = {"Dockerfile": dockerfile.encode()}
    for name in IN_IMAGE_SCRIPTS:
        files[f"rocmstack/bin/{name}"] = (INCONTEXT / name).read_bytes()
    files.update(src)
    if not resolved.locked:  # a git component's `requires:`, installed before it (a lock pins them instead)
        for name, comp in sorted(recipe.components.items()):
            if comp.source == "git" and comp.requires:
                files[f"rocmstack/requires/{name}.txt"] = "".join(f"{r}\n" for r in comp.requires).encode()
    for layer, text in locked_requirements(resolved).items():
        files[f"rocmstack/requirements/{layer}.txt"] = text.encode()
    for p in patches:
        files[f"rocmstack/patches/{p.id}.json"] = _canonical(p.spec()) + b"\n"
        if p.diff_bytes is not None:  # a lab's own diff: in the context beside its spec, so in the hash
            files[f"rocmstack/patches/{p.context_diff()}"] = p.diff_bytes
    lock = resolved.lock(render_hash=digest, revision=revision)
    files[LOCK_FILE] = json.dumps(lock, indent=2, sort_keys=True).encode() + b"\n"
    files[SBOM_FILE] = _sbom(resolved, patches)
    if recipe.framework_smoke is not None:
        files[f"rocmstack/{FRAMEWORK_SMOKE_FILE}"] = (
            _canonical(recipe.framework_smoke.model_dump(mode="json")) + b"\n"
        )
    return files


def render(
    resolved: Resolved,
    *,
    ignored_rules: tuple[str, ...] = (),
    patches_dir: Path | None = None,
    revision: tuple[str, str] | None = None,
) -> Rendered:
    recipe = resolved.recipe
    patches = select(recipe.patches, load_patches(patches_dir), dict(recipe.components), str(resolved.source))
    return finish(draft(resolved, patches, ignored_rules), revision)


def _mkdirs(root: Path, folder: Path) -> None:
    """Create FOLDER and its missing parents below ROOT, each with DIR_MODE (mkdir's mode obeys the umask)."""
    missing = []
    while folder != root and not folder.is_dir():
        missing.append(folder)
        folder = folder.parent
    for d in reversed(missing):
        d.mkdir()
        d.chmod(DIR_MODE)


def _not_rendered(out: Path) -> list[str]:
    """Paths under OUT that the render recorded in its render.json did not write (links are not followed).

    A render.json from before the file list was recorded vouches only for the top-level names a render
    writes."""
    try:
        recorded = json.loads((out / "render.json").read_text(encoding="utf-8")).get("files")
    except (OSError, ValueError, AttributeError):
        recorded = None
    allowed = {"render.json", *recorded} if isinstance(recorded, list) else None
    foreign = []
    for root, dirs, files in os.walk(out):
        base = Path(root).relative_to(out)
        for name in sorted(files) + sorted(d for d in dirs if (Path(root) / d).is_symlink()):
            rel = (base / name).as_posix()
            top = rel.split("/", 1)[0]
            if (allowed is not None and rel not in allowed) or top not in (
                "Dockerfile",
                "rocmstack",
                "render.json",
            ):
                foreign.append(rel)
        dirs[:] = sorted(d for d in dirs if not (Path(root) / d).is_symlink())
    return foreign


def _inside(files: dict[str, bytes]) -> None:
    """Refuse a context path that would land outside the render folder (absolute, ``..``, empty parts)."""
    for rel in files:
        parts = rel.split("/")
        if rel.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in rel:
            raise InputError(
                f"refusing to write {quoted(rel)}: the path leaves the render folder",
                fix="check the lock file the context was rendered from",
            )


def write_context(rendered: Rendered, out: Path) -> None:
    """Write the context atomically: a complete new folder replaces the old one, or nothing changes."""
    out = out.resolve()
    if out.exists() and not out.is_dir():
        raise InputError(f"-o {out}: exists and is not a directory")
    # Only an earlier render (or an empty folder) is replaced: never a folder holding anything else.
    if out.is_dir() and any(out.iterdir()):
        if not (out / "render.json").is_file():
            raise InputError(
                f"-o {out}: folder is not empty and holds no earlier render", fix="pick a new or empty folder"
            )
        foreign = _not_rendered(out)
        if foreign:
            shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
            raise InputError(
                f"-o {out}: holds files that rocmstack render did not write ({printable(shown)}); "
                "refusing to replace it",
                fix="render into a folder of its own (e.g. -o build/context), not where `build` keeps images",
            )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"-o {out}: cannot create its parent folder: {exc.strerror}") from None
    _inside(rendered.files)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for rel, data in sorted(rendered.files.items()):
            path = tmp / rel
            _mkdirs(tmp, path.parent)
            path.write_bytes(data)
            path.chmod(file_mode(rel))  # what was hashed, whatever the umask
        meta = {**rendered.meta, "files": sorted(rendered.files)}  # what a later render may replace
        (tmp / "render.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        (tmp / "render.json").chmod(FILE_MODE)
        tmp.chmod(DIR_MODE)  # mkdtemp makes it 0700
        if out.exists():
            old = out.with_name(f".{out.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
