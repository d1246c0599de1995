"""``patch test``: every patch of a recipe tried, as the build applies it, on the pinned source of its
component, fetched into a temporary folder: the wheel from the index (pip), or the git tree at the lock's
commit (else the recipe's ref) as the build fetches it. Each edit and each hunk is reported. Nothing is
written outside the folder, which is removed on the way out.

The build's own applier (``rocmstack/incontext/apply_patches.py``) does the work: the same matching, the
same all-or-nothing, the same messages. Patches of components the base image provides (``base``/``sdk``)
act on the image's files and are left to the build.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from packaging.utils import canonicalize_name

from rocmstack.errors import ExitCode, InputError
from rocmstack.incontext import apply_patches as applier
from rocmstack.patches import Patch
from rocmstack.recipe.model import Component
from rocmstack.recipe.resolve import Resolved

# The image's platform, as the resolver assumes it (rocmstack.resolver.uv's x86_64-manylinux_2_28).
WHEEL_PLATFORM = "manylinux_2_28_x86_64"
FETCH_TIMEOUT_S = 900

# unfetched: the pinned source could not be fetched (no verdict on the patch)
Status = Literal["applies", "fails", "unfetched", "skipped"]


@dataclass(frozen=True)
class Step:
    what: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class Trial:
    patch: str
    component: str
    status: Status
    source: str  # what it was tried on
    reason: str  # skipped: why; fails: the first failure
    steps: tuple[Step, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class FetchFailed(Exception):
    """The component's pinned source could not be fetched (its patches are reported as not tried)."""


def _run(argv: list[str], cwd: Path | None = None) -> str:
    try:
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise FetchFailed(f"`{' '.join(argv[:4])} ...` took over {FETCH_TIMEOUT_S} s") from None
    except FileNotFoundError:
        raise FetchFailed(f"{argv[0]} is not installed") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
        raise FetchFailed(f"`{' '.join(argv[:4])} ...` exited {proc.returncode}: {' / '.join(tail)[-400:]}")
    return proc.stdout


def _exact_version(name: str, comp: Component, locked: Mapping[str, Any] | None) -> str | None:
    version = comp.version or ""
    if version[:1].isdigit():
        return version
    package = canonicalize_name(comp.package or name)
    for pkg in (locked or {}).get("packages", ()):
        if canonicalize_name(pkg["name"]) == package:
            return str(pkg["version"])
    return None


def fetch_wheel(name: str, comp: Component, version: str, python: str, dest: Path) -> tuple[Path, str]:
    """The component's wheel for the image's Python and platform, unpacked: (site folder, what it is)."""
    download = dest / "download"
    _run(
        [
            sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
            "--python-version", python, "--implementation", "cp", "--platform", WHEEL_PLATFORM,
            "--dest", str(download), f"{comp.package or name}=={version}",
        ]
    )  # fmt: skip
    wheels = sorted(download.glob("*.whl"))
    if len(wheels) != 1:
        raise FetchFailed(f"pip download left {len(wheels)} wheels for {name}=={version}")
    site = dest / "site"
    with zipfile.ZipFile(wheels[0]) as zf:
        zf.extractall(site)  # zipfile drops absolute paths and '..' from member names
    return site, wheels[0].name


def fetch_git(comp: Component, commit: str | None, dest: Path) -> tuple[Path, str]:
    """The component's tree at the lock's commit, else its ref: fetched at depth 1 as the build does."""
    want = commit or str(comp.ref)
    if commit is None and comp.is_short_commit:  # no fetch by an abbreviated hash: the whole history
        _run(["git", "clone", "-q", str(comp.url), str(dest)])
        _run(["git", "-C", str(dest), "checkout", "-q", "--detach", want])
    else:
        _run(["git", "init", "-q", str(dest)])
        _run(["git", "-C", str(dest), "fetch", "-q", "--depth", "1", str(comp.url), want])
        _run(["git", "-C", str(dest), "checkout", "-q", "--detach", "FETCH_HEAD"])
    head = _run(["git", "-C", str(dest), "rev-parse", "HEAD"]).strip()
    pinned = commit or (comp.ref if comp.is_commit else None)
    if pinned is not None and pinned != head:
        raise FetchFailed(f"{comp.url} at {want} is {head}, not the commit pinned")
    return dest, f"{comp.url} @ {head}"


def _module_root(tree: Path, module: str) -> Path:
    """Where ``module`` lies in a wheel's site folder or a checkout (its subdir, or a src/ layout)."""
    rel = Path(*module.split("."))
    for root in (tree, tree / "src"):
        if (root / rel).is_dir():
            return root / rel
        if (root / rel).with_suffix(".py").is_file():
            return root / rel.parent
    raise FetchFailed(f"python module {module!r} is not in {tree}")


def _write_spec(patch: Patch, folder: Path) -> Path:
    """The spec as the build context holds it (and a local diff beside it): the applier reads the same."""
    folder.mkdir(parents=True, exist_ok=True)
    if patch.diff_bytes is not None:
        diff = folder / patch.context_diff()
        diff.parent.mkdir(parents=True, exist_ok=True)
        diff.write_bytes(patch.diff_bytes)
    (folder / f"{patch.id}.json").write_text(json.dumps(patch.spec(), sort_keys=True), encoding="utf-8")
    return folder


def try_patch(patch: Patch, base: Path, specs: Path, source: str, tree: Path) -> Trial:
    """Check each edit or hunk, then apply the patch (the next patch of the component sees its result, as in
    the build). Paths are shown below ``tree``, the fetched source: the temporary folder does not outlive
    the run."""
    spec = patch.spec()
    check = applier.CHECKS[patch.action]

    def shown(text: str) -> str:
        return text.replace(f"{tree}/", "")

    try:
        steps = tuple(Step(o.what, o.ok, shown(o.detail)) for o in check(spec, base, specs))
        bad = [s for s in steps if not s.ok]
        if not steps or bad:
            return Trial(
                patch.id,
                patch.component,
                "fails",
                source,
                bad[0].detail if bad else "nothing to apply",
                steps,
            )
        applier.ACTIONS[patch.action](spec, base, specs)
    except (applier.PatchFailed, OSError) as exc:
        return Trial(patch.id, patch.component, "fails", source, shown(str(exc)), ())
    return Trial(patch.id, patch.component, "applies", source, "", steps)


def _skipped(patch: Patch, why: str, source: str = "") -> Trial:
    return Trial(patch.id, patch.component, "skipped", source, why)


def trial(
    resolved: Resolved,
    patches: list[Patch],
    locked: Mapping[str, Any] | None,
    progress: Callable[[str], None],
) -> list[Trial]:
    """Each patch's trial, in the recipe's order; one fetch per component."""
    components = resolved.recipe.components
    by_component: dict[str, list[Patch]] = {}
    for p in patches:
        by_component.setdefault(p.component, []).append(p)
    out: dict[str, Trial] = {}
    with tempfile.TemporaryDirectory(prefix="rocmstack-patch-test-") as tmp:
        root = Path(tmp)
        specs = root / "patches"
        for p in patches:
            _write_spec(p, specs)
        for name, mine in by_component.items():
            comp = components[name]
            out.update(
                {
                    p.id: t
                    for p, t in zip(
                        mine,
                        _component_trials(name, comp, mine, resolved, locked, root, specs, progress),
                        strict=True,
                    )
                }
            )
    return [out[p.id] for p in patches]


def _component_trials(
    name: str,
    comp: Component,
    mine: list[Patch],
    resolved: Resolved,
    locked: Mapping[str, Any] | None,
    root: Path,
    specs: Path,
    progress: Callable[[str], None],
) -> list[Trial]:
    if comp.source in ("base", "sdk"):
        why = f"{name} comes with the base image: the build applies it to the image's files"
        return [_skipped(p, why) for p in mine]
    if not any(p.action in applier.CHECKS for p in mine):  # nothing to fetch the source for
        return [
            _skipped(p, f"a {p.action} patch acts on the installed image: the build applies it") for p in mine
        ]
    try:
        if comp.source == "pypi":
            version = _exact_version(name, comp, locked)
            if version is None:
                why = f"{name} pins {comp.version or 'no version'} and the lock holds none: lock the recipe first"
                return [_skipped(p, why) for p in mine]
            progress(f"{name}=={version}: downloading its wheel")
            tree, what = fetch_wheel(name, comp, version, resolved.recipe.base.python, root / name)
        else:
            entry = (locked or {}).get("git", {}).get(name) or {}
            commit = (
                entry.get("commit") if (entry.get("ref"), entry.get("url")) == (comp.ref, comp.url) else None
            )
            progress(f"{name}: fetching {comp.url} at {commit or comp.ref}")
            tree, what = fetch_git(comp, commit, root / name)
    except FetchFailed as exc:
        why = f"the pinned source of {name} could not be fetched: {exc}"
        return [Trial(p.id, p.component, "unfetched", "", why) for p in mine]
    trials: dict[str, Trial] = {}
    # Source patches before the build, module patches on what it installed: the build's order.
    for p in sorted(mine, key=lambda q: not q.target.source):
        if p.action not in applier.CHECKS:
            why = f"a {p.action} patch acts on the installed image: the build applies it"
            trials[p.id] = _skipped(p, why, what)
            continue
        base = tree
        if not p.target.source:
            packages = tree / (comp.subdir or "") if comp.source == "git" else tree
            try:
                base = _module_root(packages, str(p.target.module))
            except FetchFailed as exc:
                trials[p.id] = Trial(p.id, p.component, "fails", what, str(exc))
                continue
        progress(f"{p.id}: trying on {what}")
        trials[p.id] = try_patch(p, base, specs, what, tree)
    return [trials[p.id] for p in mine]


def only_these(ids: list[str], patches: list[Patch]) -> list[Patch]:
    """The patches named with --only, in the recipe's order (an unknown id is one line, exit 2)."""
    if not ids:
        return patches
    known = {p.id for p in patches}
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise InputError(
            f"--only {unknown[0]}: the recipe lists no such patch",
            fix=f"its patches: {', '.join(sorted(known)) or 'none'}",
        )
    return [p for p in patches if p.id in ids]


def summarize(trials: list[Trial]) -> tuple[ExitCode, dict[str, int], str]:
    """(exit code, count per status, verdict): a failed patch is 1; a source that could not be fetched, 4
    (no verdict on its patches); nothing tried at all is 5, never a pass."""
    counts = {
        s: sum(1 for t in trials if t.status == s) for s in ("applies", "fails", "unfetched", "skipped")
    }
    if counts["fails"]:
        return ExitCode.FAILED, counts, "a patch does not apply"
    if counts["unfetched"]:
        return ExitCode.ENGINE, counts, "a component's pinned source could not be fetched"
    if counts["applies"]:
        return ExitCode.OK, counts, "every patch tried applies"
    return ExitCode.NOTHING_JUDGED, counts, "no patch could be tried before the build"
