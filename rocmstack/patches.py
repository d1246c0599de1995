"""Patch metadata: ``patches/<id>.yaml`` files, validated, plus applicability against a component pin.

The in-image application lives in ``rocmstack/incontext/apply_patches.py`` (stdlib only); this module
turns each YAML into the JSON spec that script reads, and answers "does this patch target that pin?".
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Annotated, Literal

import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from rocmstack.errors import InputError, RecipeError, did_you_mean, printable, quoted
from rocmstack.recipe.load import YAML_LOADER, _read_yaml, parent_file
from rocmstack.recipe.model import Component, Name, Recipe, RelPath, Url
from rocmstack.resources import patches_dir


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Target(_Strict):
    module: str | None = Field(
        default=None, description="python package holding the file (found with importlib)"
    )
    source: bool = Field(
        default=False,
        description="path is relative to the component's git checkout, patched before its build",
    )
    path: RelPath

    @model_validator(mode="after")
    def _one(self) -> Target:
        if bool(self.module) == self.source:
            raise ValueError("target needs exactly one of module or source: true")
        return self


class Edit(_Strict):
    find: str = Field(min_length=1)
    replace: str
    count: int = Field(default=1, ge=1)


class Symlink(_Strict):
    glob: str = Field(pattern=r"^[A-Za-z0-9_.*?-]+$", description="file name pattern inside target.path")
    link: str = Field(pattern=r"^/[A-Za-z0-9_./+-]+$")
    ldconfig: bool = True


class PipInstallDir(_Strict):
    verify_module: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$")


# The two places a diff can come from, named by every error about either
DIFF_CHOICES = (
    "give `url: https://...` (the build downloads it; pin it to a commit) or `file: PATH` (a diff kept in "
    "your repository, relative to this spec's folder, copied into the build context)"
)
MAX_DIFF_BYTES = 16 << 20  # the in-image applier's cap too: a source patch's diff is kilobytes


def _https_diff_url(value: str) -> str:
    try:
        return TypeAdapter(Url).validate_python(value)
    except ValidationError as exc:
        raise ValueError(f"{exc.errors()[0]['msg'].removeprefix('Value error, ')}: {DIFF_CHOICES}") from None


class UnifiedDiff(_Strict):
    url: Annotated[str, AfterValidator(_https_diff_url)] | None = Field(
        default=None, description="where the build downloads the diff: a URL pinned to a commit"
    )
    file: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_.-][A-Za-z0-9_./-]{0,199}$",
        description="a diff in the lab's repository, relative to the spec's folder: its bytes go into the "
        "build context (and so into the render hash)",
    )
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="sha256 of the diff's bytes")
    strip: int = Field(default=1, ge=0, le=8, description="leading folders dropped from its paths (patch -p)")

    @model_validator(mode="after")
    def _one_source(self) -> UnifiedDiff:
        if (self.url is None) == (self.file is None):
            raise ValueError(f"a diff needs exactly one of url and file: {DIFF_CHOICES}")
        return self


class Applies(_Strict):
    versions: str | None = Field(default=None, description="PEP 440 specifier over the component version")
    refs: tuple[str, ...] = Field(default=(), description="git refs/commits the patch was made against")


class Patch(_Strict):
    id: Name
    component: Name
    summary: str
    why: str
    upstream: tuple[Url, ...] = Field(min_length=1)
    drop_when: str
    fixed_in: str | None = Field(
        default=None, description="first upstream version with the fix: pinned >= this means drop the patch"
    )
    applies_to: Applies
    target: Target
    action: Literal["edit", "symlink", "pip-install-dir", "unified-diff"]
    edits: tuple[Edit, ...] = ()
    diff: UnifiedDiff | None = Field(
        default=None,
        description="unified-diff: every hunk must apply exactly (no fuzz), or nothing is written",
    )
    symlink: Symlink | None = None
    install: PipInstallDir | None = None
    tested_with: str | None = Field(default=None, description="PyPI requirement the test suite applies it to")
    _diff_bytes: bytes | None = PrivateAttr(default=None)  # a `diff.file`'s bytes, read (and checked) on load

    @model_validator(mode="after")
    def _action_fields(self) -> Patch:
        given = {
            "edit": bool(self.edits),
            "symlink": self.symlink is not None,
            "pip-install-dir": self.install is not None,
            "unified-diff": self.diff is not None,
        }
        if not given[self.action] or sum(given.values()) != 1:
            block = {"edit": "edits", "unified-diff": "diff"}
            raise ValueError(
                f"action {self.action!r} needs exactly its own block ({block.get(self.action, self.action)})"
            )
        return self

    @property
    def diff_bytes(self) -> bytes | None:
        """A local diff's bytes (``diff.file``), for the build context; None for a downloaded one."""
        return self._diff_bytes

    def context_diff(self) -> str:
        """Where a local diff lies beside this spec's JSON in the build context (and so in the image)."""
        return f"diffs/{self.id}.diff"

    def spec(self) -> dict:
        """The JSON the in-image applier reads. A local diff is named where the context holds it, not where
        the lab keeps it: only its bytes (sha256) count."""
        out = self.model_dump(mode="json", exclude_none=True)
        if self.diff is not None and self.diff.file is not None:
            out["diff"]["file"] = self.context_diff()
        return out


def _not_regular(mode: int) -> str | None:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a file"


def _read_regular(path: Path) -> bytes:
    """The bytes of ``path`` (through a link too), only when it is a regular file: a FIFO named <id>.yaml
    would block the read forever, so anything else is refused before it is opened."""

    def refuse(kind: str) -> InputError:
        return InputError(
            f"patches folder {quoted(str(path.parent))}: {printable(path.name)} is not a regular file ({kind})",
            fix="remove it",
        )

    if (kind := _not_regular(path.stat().st_mode)) is not None:
        raise refuse(kind)
    # O_NONBLOCK: a FIFO swapped in since the look opens without waiting, and fstat refuses it.
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY), "rb") as fh:
        if (kind := _not_regular(os.fstat(fh.fileno()).st_mode)) is not None:
            raise refuse(kind)
        return fh.read()


def load_patch(path: Path) -> Patch:
    try:
        raw = yaml.load(_read_regular(path).decode("utf-8"), Loader=YAML_LOADER)
        patch = Patch.model_validate_json(json.dumps(raw))
    except (yaml.YAMLError, OSError) as exc:
        raise RecipeError(f"{path}: cannot read patch: {exc}") from None
    except UnicodeDecodeError as exc:
        raise RecipeError(
            f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x})", fix="save the patch as UTF-8"
        ) from None
    except ValidationError as exc:
        # Every problem at once, as for recipes: one fix-and-rerun round, not one per field.
        errors = exc.errors(include_url=False)
        listed = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors)
        count = f"{len(errors)} problems: " if len(errors) > 1 else ""
        raise RecipeError(f"{path}: {count}{listed}") from None
    if patch.id != path.stem:
        raise RecipeError(f"{path}: id {patch.id!r} must match the file name")
    if patch.diff is not None and patch.diff.file is not None:
        patch._diff_bytes = _local_diff(path, patch.diff)
    return patch


def _local_diff(spec: Path, diff: UnifiedDiff) -> bytes:
    """A ``diff.file``'s bytes, found beside the spec and matching its sha256: a wrong or moved diff fails
    here, before anything is rendered or built."""
    assert diff.file is not None
    where = spec.parent / diff.file
    try:
        data = _read_regular(where)
    except FileNotFoundError:
        raise RecipeError(
            f"{spec}: diff.file {quoted(diff.file)}: no such file ({where})",
            fix="give the diff's path relative to this spec's folder",
        ) from None
    except OSError as exc:
        raise RecipeError(f"{spec}: diff.file {quoted(diff.file)}: {exc.strerror}") from None
    if len(data) > MAX_DIFF_BYTES:
        raise RecipeError(f"{spec}: diff.file {quoted(diff.file)} is larger than {MAX_DIFF_BYTES >> 20} MiB")
    digest = hashlib.sha256(data).hexdigest()
    if digest != diff.sha256:
        raise RecipeError(
            f"{spec}: diff.file {quoted(diff.file)} has sha256 {digest}, the spec pins {diff.sha256}",
            fix="check the diff, then write its sha256 into the spec (sha256sum)",
        )
    return data


def load_patches(directory: Path | None = None) -> dict[str, Patch]:
    """The shipped patch specs, and over them those of ``directory`` (a lab's own folder): a recipe that
    adds its own patch keeps the shipped ones, and an own spec of a shipped id replaces it."""
    shipped = {p.stem: load_patch(p) for p in sorted(patches_dir().glob("*.yaml"))}
    if directory is None:
        return shipped
    if not directory.is_dir():
        raise InputError(
            f"patches folder {quoted(str(directory))} does not exist",
            fix="give --patches-dir or the recipe's patches_dir field a folder of <id>.yaml patch specs",
        )
    return shipped | {p.stem: load_patch(p) for p in sorted(directory.glob("*.yaml"))}


def recipe_patches_dir(recipe: Recipe, source: Path) -> Path | None:
    """The folder the recipe's ``patches_dir`` field names (None: the shipped one), relative to the file
    that names it: a child inherits its parent's folder, found beside the parent, unless it names its own.
    A value given by ``--set patches_dir=...`` is relative to the current folder, as any path argument."""

    if recipe.patches_dir is None:
        return None
    current: Path | None = source
    while current is not None:
        data = _read_yaml(current)
        if "patches_dir" in data:
            if data["patches_dir"] == recipe.patches_dir:
                return current.parent / recipe.patches_dir
            break
        current = parent_file(current)
    return Path(recipe.patches_dir)  # not what the files say: a --set override


def chosen_patches_dir(recipe: Recipe, source: Path, option: Path | None) -> Path | None:
    """The one patch folder every command uses: ``--patches-dir``, else the recipe's field, else shipped."""
    return option if option is not None else recipe_patches_dir(recipe, source)


def select(
    ids: tuple[str, ...], available: dict[str, Patch], components: dict[str, Component], origin: str
) -> list[Patch]:
    chosen = []
    for pid in ids:
        if pid not in available:
            raise RecipeError(
                f"{origin}: patches: unknown patch {pid!r}",
                fix=f"{did_you_mean(pid, available)}known: {', '.join(available) or 'none'}; for a patch of your "
                "own, name the folder "
                f"holding {pid}.yaml with the recipe's patches_dir field or --patches-dir",
            )
        patch = available[pid]
        if patch.component not in components:
            raise RecipeError(
                f"{origin}: patches: {pid} targets component {patch.component!r}, which the recipe does not have"
            )
        chosen.append(patch)
    return chosen


def _version_of(component: Component) -> Version | None:
    text = component.version or ""
    try:
        return Version(text) if text and text[0].isdigit() else None
    except InvalidVersion:
        return None


def applicability(patch: Patch, component: Component) -> tuple[str, str]:
    """("ok"|"drop"|"mismatch"|"unknown", reason) for a patch against its component's pin."""
    version = _version_of(component)
    if patch.fixed_in and version is not None and version >= Version(patch.fixed_in):
        return (
            "drop",
            f"{patch.component} {version} already contains the fix (fixed in {patch.fixed_in}): drop patch {patch.id}",
        )
    refs = patch.applies_to.refs
    if refs:
        if component.ref in refs:
            return "ok", f"made against {patch.component} {component.ref}"
        # Declared for other refs: applicable only when a version range says so, never by default.
        if version is None or not patch.applies_to.versions:
            if component.ref:
                return "mismatch", f"made against {', '.join(refs)}, pinned {component.ref}"
            return "unknown", f"made against {', '.join(refs)}; {patch.component} pins no ref to compare"
    if patch.applies_to.versions:
        if version is None:
            return (
                "unknown",
                f"{patch.component} has no exact version to compare with {patch.applies_to.versions}",
            )
        if version in SpecifierSet(patch.applies_to.versions, prereleases=True):
            return "ok", f"{patch.component} {version} is in {patch.applies_to.versions}"
        return "mismatch", f"{patch.component} {version} is outside {patch.applies_to.versions}"
    return "ok", "applies to any version"


def new_spec(
    *,
    patch_id: str,
    component: str,
    diff: bytes,
    summary: str,
    upstream: tuple[str, ...],
    why: str | None,
    drop_when: str | None,
    refs: tuple[str, ...],
    versions: str | None,
    module: str | None,
    path: str,
    strip: int,
) -> tuple[Patch, str]:
    """A unified-diff spec for ``diff`` (``git diff`` output), kept beside it as ``diffs/<id>.diff``: the
    validated model and its YAML. Refused in one line: a diff the build's applier would refuse, or a field
    the spec format refuses."""
    from rocmstack.incontext.apply_patches import PatchFailed, parse_unified_diff

    if len(diff) > MAX_DIFF_BYTES:
        raise InputError(
            f"the diff is larger than {MAX_DIFF_BYTES >> 20} MiB", fix="a patch's diff is kilobytes"
        )
    try:
        parse_unified_diff(patch_id, diff.decode("utf-8"), strip)
    except UnicodeDecodeError as exc:
        raise InputError(
            f"the diff is not UTF-8 text (byte {exc.start})", fix="pass `git diff` output"
        ) from None
    except PatchFailed as exc:
        raise InputError(str(exc), fix="pass the output of `git diff` (edits and new files only)") from None
    data: dict = {
        "id": patch_id,
        "component": component,
        "summary": summary,
        "why": why or summary,
        "upstream": list(upstream),
        "drop_when": drop_when or f"the {component} the recipe pins contains this change",
        "applies_to": {
            **({"refs": list(refs)} if refs else {}),
            **({"versions": versions} if versions else {}),
        },
        "target": {"module": module, "path": path} if module else {"source": True, "path": path},
        "action": "unified-diff",
        "diff": {
            "file": f"diffs/{patch_id}.diff",
            "sha256": hashlib.sha256(diff).hexdigest(),
            "strip": strip,
        },
    }
    try:
        patch = Patch.model_validate_json(json.dumps(data))
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(
            f"patch {quoted(patch_id)}: {where}: {first['msg']}", fix="see docs/recipes.md#patches"
        ) from None
    patch._diff_bytes = diff
    return patch, yaml.safe_dump(data, sort_keys=False, width=110, allow_unicode=True)
