"""The recipe model: what a recipe YAML may say, validated strictly.

pydantic (v2) rather than plain dataclasses because it gives three things we need for free and exactly:
precise error locations (``components.vllm.ref``) for one-line errors, strict typing (no silent
coercion of ``3.10`` into ``3.1``), and the JSON Schema that editors use (``rocmstack schema``).

Every string that ends up in a Dockerfile is checked against a narrow pattern here, so a value can never
inject an instruction (newline, quote, backslash, ``$(``, backtick).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from enum import StrEnum
from typing import Annotated, Any, Literal

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from rocmstack.gpu.shapes import moe_shapes
from rocmstack.redact import redact_url
from rocmstack.resources import recipes_dir
from rocmstack.secrets import is_secret_name

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")
# Env/build-arg values are rendered inside double quotes: no quote, backslash, $, backtick or newline.
_ENV_VALUE = re.compile(r"^[A-Za-z0-9_.,:;=/+@%* -]{0,512}$")
_GIT_URL = re.compile(r"^https://[A-Za-z0-9.-]+(/[A-Za-z0-9._~-]+)+?(\.git)?$")
_GIT_REF = re.compile(r"^(?!.*\.\.)(?!.*//)[A-Za-z0-9][A-Za-z0-9._/+-]{0,127}(?<![./])$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_IMAGE_REPO = re.compile(
    r"^(?:[a-z0-9]+(?:[.-][a-z0-9]+)*(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$"
)
_IMAGE_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")
_ARCH = re.compile(r"^gfx[0-9a-f]{3,4}$")
_PKG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_EXTRA = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
_PATH = re.compile(r"^(?!/)(?!.*\.\.)[A-Za-z0-9_./-]{1,200}$")
_SETUP = re.compile(r"^[A-Za-z0-9_.-]{1,64}\.py$")
_APT = re.compile(r"^[a-z0-9][a-z0-9+.-]{0,63}$")
_URL = re.compile(r"^https://[^\s\"'\\`$<>]{4,300}$")
_TEXT = re.compile(r"^[^\n\r\"\\`$]{0,400}$")
_SHORT_VERSION = re.compile(r"^[0-9]+(\.[0-9]+){0,3}$")
_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_AITER_MODULE = re.compile(r"^module_[a-z0-9_]{1,80}$")


# Joins the problems one validator found; a character no message holds (a parse error's own message may
# span lines, its caret under the fault), so only these are split apart again.
PROBLEM_SEPARATOR = "\x1e"

NO_TOKEN = "use a credential helper / netrc, never a token in a recipe"


def hide_userinfo(value: str, *, schemeless: bool = False) -> str:
    """``value`` with a URL's ``user:token@`` masked; with ``schemeless``, an image reference's too
    (``user:token@registry/repo``). Errors quote this, never the value itself."""
    if "://" in value or not schemeless:
        return redact_url(value)
    return redact_url("https://" + value).removeprefix("https://")


def _userinfo_problem(value: str, *, schemeless: bool = False) -> str | None:
    # a recipe's URLs are copied verbatim into the lock and the image's labels and layers: a token there
    # is published with them
    hidden = hide_userinfo(value, schemeless=schemeless)
    if hidden == value:
        return None
    return f"{hidden!r} carries user information (user:token@), which the lock and the image would keep: {NO_TOKEN}"


def _matching(pattern: re.Pattern[str], what: str, *, schemeless: bool = False) -> AfterValidator:
    def check(value: str) -> str:
        if (problem := _userinfo_problem(value, schemeless=schemeless)) is not None:
            raise ValueError(problem)
        if not pattern.fullmatch(value):
            raise ValueError(f"{value!r} is not a valid {what}")
        return value

    return AfterValidator(check)


def _version(value: str) -> str:
    try:
        Version(value)
    except InvalidVersion:
        raise ValueError(f"{value!r} is not a PEP 440 version") from None
    if not _PKG.fullmatch(value.replace("!", "")):
        raise ValueError(f"{value!r} is not a PEP 440 version")
    return value


def _version_or_spec(value: str) -> str:
    """An exact version (``2.58.0``) or a specifier set (``>=5.12``)."""
    if value and value[0].isdigit():
        return _version(value)
    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        raise ValueError(f"{value!r} is neither a PEP 440 version nor a version specifier") from None
    if not re.fullmatch(r"^[0-9A-Za-z.,<>=!~* +]+$", value):
        raise ValueError(f"{value!r} is neither a PEP 440 version nor a version specifier")
    return value


def plain_requirement(value: str) -> str:
    """A PEP 508 requirement without a URL (``numpy>=1.24; python_version >= '3.10'``): recipe requirements and
    the lines of a git component's requirements file (ValueError otherwise)."""
    try:
        req = Requirement(value)
    except InvalidRequirement as exc:
        raise ValueError(f"{value!r} is not a PEP 508 requirement: {exc}") from None
    if req.url or not re.fullmatch(r"[A-Za-z0-9_.,;:<>=!~*+\[\] ()'\"-]{1,400}", value):
        raise ValueError(f"{value!r} is not a PEP 508 requirement (name, extras, version, marker; no URL)")
    return value


Name = Annotated[str, _matching(_NAME, "name (lowercase letters, digits, '.', '_', '-')")]
EnvName = Annotated[str, _matching(_ENV_NAME, "environment variable name (A-Z, 0-9, _)")]
EnvValue = Annotated[
    str,
    _matching(
        _ENV_VALUE,
        "value: only letters, digits, spaces and _.,:;=/+@%*- are allowed (no quotes, \\, $ or newlines)",
    ),
]
GitUrl = Annotated[str, _matching(_GIT_URL, "git URL (https://host/owner/repo[.git])")]
GitRef = Annotated[str, _matching(_GIT_REF, "git ref (a tag, branch or full 40-hex commit)")]
ImageRepo = Annotated[
    str, _matching(_IMAGE_REPO, "image repository (OCI reference grammar)", schemeless=True)
]
ImageTag = Annotated[str, _matching(_IMAGE_TAG, "image tag (OCI reference grammar)")]
Digest = Annotated[str, _matching(_DIGEST, "digest (sha256:<64 hex>)")]
Arch = Annotated[str, _matching(_ARCH, "GPU arch (gfxNNN)")]


def known_gpu_archs() -> tuple[str, ...]:
    """The archs rocmstack knows (recipes/_archs.yaml), in the file's order."""
    return tuple(yaml.safe_load((recipes_dir() / "_archs.yaml").read_text(encoding="utf-8")))


def _known_arch(value: str) -> str:
    known = known_gpu_archs()
    if value not in known:
        raise ValueError(f"unknown GPU arch {value!r} (known: {', '.join(known)})")
    return value


# An arch an image is built for: well-formed and one rocmstack knows (torch_archs may name others).
TargetArch = Annotated[Arch, AfterValidator(_known_arch)]
Package = Annotated[str, _matching(_PKG, "package name")]
Extra = Annotated[str, _matching(_EXTRA, "package extra")]
RelPath = Annotated[str, _matching(_PATH, "relative path")]
# A folder beside the recipe may be a sibling (../patches): relative, but `..` allowed.
_PATCHES_DIR = re.compile(r"^(?!/)[A-Za-z0-9_./-]{1,200}$")
# A published release, exactly: name==version (no extras, marker or URL).
_RELEASE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}==[0-9][A-Za-z0-9.+!_-]{0,63}$")
Release = Annotated[str, _matching(_RELEASE, "published release, name==version (e.g. verl==0.9.0)")]
SetupScript = Annotated[str, _matching(_SETUP, "setup script file name")]
AptPackage = Annotated[str, _matching(_APT, "Debian package name")]
Url = Annotated[str, _matching(_URL, "https URL")]
Text = Annotated[str, _matching(_TEXT, "one line of text without quotes, backslashes, $ or backticks")]
ShortVersion = Annotated[str, _matching(_SHORT_VERSION, "version like 3.12 or 10.0")]
Version_ = Annotated[str, AfterValidator(_version)]
VersionOrSpec = Annotated[str, AfterValidator(_version_or_spec)]
RequirementStr = Annotated[str, AfterValidator(plain_requirement)]


class Layer(StrEnum):
    """Image layers, in build order: least often changed first, so a pin bump rebuilds only its layer and later."""

    system = "system"
    amdsmi = "amdsmi"
    ray = "ray"
    megatron = "megatron"
    vllm = "vllm"
    sglang = "sglang"
    verl = "verl"
    app = "app"  # the RL framework on top (vime, slime): after verl's stack


LAYER_ORDER: tuple[Layer, ...] = tuple(Layer)
# rocmstack's own runtime requirements: a pip layer of every image, after every recipe layer
# (fragments/rocmstack.j2); no component can name it.
SELF_LAYER = "rocmstack"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _installed_version(value: str) -> str:
    """A version as installed, local label included (``2.9.1+rocm7.0.2``)."""
    try:
        Version(value)
    except InvalidVersion:
        raise ValueError(f"{value!r} is not a PEP 440 version") from None
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+!-]{0,99}", value):
        raise ValueError(f"{value!r} is not a PEP 440 version")
    return value


class Provided(_Strict):
    """A Python distribution the base image already has: the resolver treats it as installed, never replaces it."""

    name: Package = Field(description="the distribution's name")
    version: Annotated[str, AfterValidator(_installed_version)] = Field(
        description="its version as installed, local label included (2.9.1+rocm7.0.2)"
    )
    requires: tuple[RequirementStr, ...] = Field(
        default=(), description="its Requires-Dist as installed in the base (markers allowed)"
    )


class Base(_Strict):
    """The base image; torch, triton and the ROCm runtime come from here and are never reinstalled."""

    image: ImageRepo = Field(description="the base image's repository (registry/name)")
    tag: ImageTag = Field(description="the base image's tag")
    digest: Digest | None = Field(
        default=None, description="sha256:<64 hex>: pins the base to this content (the tag alone can move)"
    )
    os: Text | None = Field(default=None, description="the base's distribution, as a note (ubuntu 24.04)")
    rocm: ShortVersion = Field(description="the ROCm version the base image carries")
    python: ShortVersion = Field(description="the base's Python (major.minor)")
    torch: Version_ = Field(description="the torch version the base image carries (never reinstalled)")
    torch_archs: tuple[Arch, ...] = Field(
        min_length=1, description="GPU archs the base image's torch was built for"
    )
    frozen: tuple[Package, ...] = Field(
        default=("torch", "torchvision", "torchaudio", "triton"),
        description="Packages the base provides that every later pip install must keep (constraints file)",
    )
    glibc: ShortVersion = Field(
        default="2.28", description="the base's glibc: the manylinux tag wheels are resolved for"
    )
    provides: tuple[Provided, ...] = Field(
        default=(),
        description="Python distributions of the base image (`rocmstack base-freeze IMAGE` fills it); "
        "the resolver keeps them and never locks them",
    )

    @model_validator(mode="after")
    def _provides(self) -> Base:
        names = [canonicalize_name(p.name) for p in self.provides]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"provides lists {', '.join(twice)} twice")
        return self


class AcceptedConflict(_Strict):
    """A requirement of an installed package the image breaks on purpose; `pip check` may report only these."""

    package: Package = Field(description="the package whose requirement is not met")
    requires: Package = Field(description="the distribution it requires in another version")
    reason: Text = Field(description="why the image keeps the conflict")
    source: Url = Field(description="a public page that shows the conflict is harmless or intended")


class Component(_Strict):
    """One piece of software of the image: from PyPI, a git repository, or provided by the base or an SDK."""

    source: Literal["pypi", "git", "base", "sdk"] = Field(
        description="pypi: installed from the index; git: cloned and built; base/sdk: already in the base "
        "image (declared, never installed)"
    )
    layer: Layer = Field(description="the image layer it is installed in (layers build in a fixed order)")
    package: Package | None = Field(
        default=None, description="distribution name (defaults to the component name)"
    )
    extras: tuple[Extra, ...] = Field(default=(), description="pip extras installed with it (pypi/git)")
    version: VersionOrSpec | None = Field(
        default=None, description="pypi: the pin; git/base/sdk: the version it provides"
    )
    url: GitUrl | None = Field(default=None, description="git: the repository to clone")
    ref: GitRef | None = Field(default=None, description="git: a tag or a full commit hash")
    subdir: RelPath | None = Field(default=None, description="git: directory to install from")
    requirements: RelPath | None = Field(
        default=None, description="git: requirements file installed before the build"
    )
    requirements_from: Release | None = Field(
        default=None,
        description="git/base: the published release (name==version on the index) whose requirements stand in "
        "for the component's own where they cannot be read at lock time; git: the lock resolves and installs "
        "them; base: the versions the recipe declares must satisfy them",
    )
    requires: tuple[RequirementStr, ...] = Field(
        default=(),
        description="git: the component's own requirements, listed in the recipe (PEP 508, no URL): the lock "
        "resolves them into its layer, an unlocked build installs them before it; with no_deps they are all "
        "of its dependencies the image gets",
    )
    setup_script: SetupScript | None = Field(
        default=None, description="git: run `python <script> install` instead of pip"
    )
    submodules: bool = Field(
        default=False,
        description="git: also check out the repository's submodules at the commits it records (TransformerEngine "
        "and aiter build from theirs)",
    )
    no_deps: bool = Field(
        default=False,
        description="pypi/git: install it without its dependencies (pip --no-deps); the image's final "
        "`pip check` then accepts its absent requirements (a version conflict still fails)",
    )
    build_isolation: bool = Field(
        default=False,
        description="git: build it in pip's isolated build environment; default false (--no-build-isolation), "
        "so the build sees the base's torch",
    )
    build_env: dict[EnvName, EnvValue] = Field(
        default_factory=dict, description="git: environment variables of its build step only"
    )
    cite: Url | None = Field(
        default=None,
        description="a public page behind this component's pin or options (a note: the build does not read it)",
    )

    @model_validator(mode="after")
    def _source_fields(self) -> Component:
        problems = []
        if self.source == "pypi" and not self.version:
            problems.append("a pypi component needs a version")
        if self.source == "git" and not (self.url and self.ref):
            problems.append("a git component needs url and ref")
        if self.source != "git" and (
            self.url
            or self.ref
            or self.subdir
            or self.setup_script
            or self.requirements
            or self.requires
            or self.submodules
        ):
            problems.append(f"url/ref/subdir/setup_script only apply to git components, not {self.source}")
        if self.requirements_from and self.source not in ("git", "base"):
            problems.append(
                "requirements_from stands in for the requirements of a git or base component, "
                f"not a {self.source} one's"
            )
        if self.requirements_from and self.requirements:
            problems.append(
                "give requirements (a file of the repository) or requirements_from (a published release), "
                "not both"
            )
        if self.source in ("base", "sdk") and (self.extras or self.no_deps or self.build_env):
            problems.append(
                f"a {self.source} component is not installed by rocmstack: no extras/no_deps/build_env"
            )
        if problems:
            # One line per problem: the loader reports each on its own (PROBLEM_SEPARATOR).
            raise ValueError(PROBLEM_SEPARATOR.join(problems))
        return self

    @property
    def is_commit(self) -> bool:
        return bool(self.ref and _COMMIT.fullmatch(self.ref))

    @property
    def is_short_commit(self) -> bool:
        """An abbreviated hash (7-39 hex): needs a full clone to resolve; flagged by the rules."""
        return bool(self.ref and re.fullmatch(r"[0-9a-f]{7,39}", self.ref))


class Guards(_Strict):
    """Checks the build runs inside the image; each fails the build when it does not hold."""

    require_hip: bool = Field(default=True, description="fail the build unless torch.version.hip is set")
    forbid_nvidia_wheels: bool = Field(
        default=True, description="fail the build if any nvidia-* CUDA wheel got installed"
    )
    vllm_python: ShortVersion | None = Field(
        default="3.12",
        description="Python required wherever vLLM ROCm wheels/builds are used (null: no check)",
    )


class User(_Strict):
    """The non-root user the image runs as, in the groups that own /dev/kfd and /dev/dri."""

    name: Name = Field(default="rocm", description="the user's name")
    uid: int = Field(default=1000, ge=1, le=65535, description="the user's uid")
    groups: tuple[Name, ...] = Field(
        default=("video", "render"), description="supplementary groups (those owning /dev/kfd and /dev/dri)"
    )


class Publish(_Strict):
    """Where the image is published and under which tags."""

    repository: ImageRepo = Field(
        description="the image repository; `--registry` prefixes it unless it names a registry itself"
    )
    tag: str = Field(
        description="descriptive immutable tag; {dotted.path} fields from the resolved pins, {arch}"
    )
    aliases: tuple[ImageTag, ...] = Field(
        default=(), description="floating tags moved to each validated build (latest, ...)"
    )


class ValidatedSet(_Strict):
    """Component values that were validated together upstream; moving any of them needs re-validation."""

    id: Name = Field(description="the set's name, as the rules report it")
    members: dict[str, Annotated[str, _matching(_TEXT, "value")]] = Field(
        description="field path (components.vllm.version, base.rocm) -> the value validated upstream"
    )
    revalidate: Name = Field(description="the component that must be re-validated when a member moves")
    source: Url = Field(description="the public page that says these values were validated together")
    note: Text | None = Field(default=None, description="free text shown with the set")


# ``smoke framework``: the values rocmstack fills into a framework's command, {name} in an argument.
FRAMEWORK_PLACEHOLDERS = (
    "python",
    "model_dir",
    "tokenizer_dir",
    "train_parquet",
    "val_parquet",
    "data_dir",
    "reward_py",
    "reward_module",
    "reward_fn",
    "steps",
    "work_dir",
    "vocab_size",
)
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
# One argument of a command run as an argument list (never through a shell): printable, no newline.
_ARG = re.compile(r"^[^\n\r\x00]{1,1000}$")
_METRIC = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./@:-]{0,199}$")


def _command_arg(value: str) -> str:
    if not _ARG.fullmatch(value):
        raise ValueError(f"{value!r} is not one command argument (1-1000 characters, no newline)")
    unknown = [n for n in _PLACEHOLDER.findall(value) if n not in FRAMEWORK_PLACEHOLDERS]
    if unknown:
        raise ValueError(
            f"{value!r} names unknown placeholder(s) {', '.join('{' + n + '}' for n in unknown)}; "
            f"known: {', '.join('{' + n + '}' for n in FRAMEWORK_PLACEHOLDERS)}"
        )
    return value


CommandArg = Annotated[str, AfterValidator(_command_arg)]


def _line_pattern(value: str) -> str:
    if not _ARG.fullmatch(value):
        raise ValueError(f"{value!r} is not one line of a pattern (1-1000 characters, no newline)")
    try:
        pattern = re.compile(value)
    except re.error as exc:
        raise ValueError(f"{value!r} is not a regular expression: {exc}") from None
    if pattern.groups > 1:
        raise ValueError(f"{value!r} has {pattern.groups} groups; at most one (the step)")
    return value


LinePattern = Annotated[str, AfterValidator(_line_pattern)]
MetricName = Annotated[str, _matching(_METRIC, "metric name (letters, digits, _./@:-)")]


class MetricsSource(_Strict):
    """Where a framework's per-step metrics land and how they are written."""

    format: Literal["kv-console", "dict-lines", "jsonl"] = Field(
        description="kv-console: verl's `step:N - key:value - ...` lines (anywhere in a line, after a Ray "
        "prefix too); dict-lines: one Python dict literal per logging step (transformers/TRL console); "
        "jsonl: one JSON object per line"
    )
    file: CommandArg | None = Field(
        default=None, description="a file (placeholders allowed); null: the command's own output"
    )
    step_key: MetricName | None = Field(
        default=None, description="dict-lines/jsonl: the key holding the step; null: rows are steps 1, 2, ..."
    )
    row_key: MetricName | None = Field(
        default=None, description="dict-lines/jsonl: only rows with this key are steps (skips summaries)"
    )
    prefix: LinePattern | None = Field(
        default=None,
        description="dict-lines/jsonl: the object follows a match of this regular expression anywhere in a "
        "line (after a logger's or Ray's prefix); its one group, when it has one, is the step",
    )

    @model_validator(mode="after")
    def _fits(self) -> MetricsSource:
        if self.format == "kv-console" and (self.step_key or self.row_key or self.prefix):
            raise ValueError("kv-console lines carry their own step: step_key/row_key/prefix do not apply")
        if self.prefix is not None and self.step_key and re.compile(self.prefix).groups:
            raise ValueError("the step comes from prefix's group or from step_key, not both")
        return self


class MetricCheck(_Strict):
    """One judgment of a logged metric: `<metric> <op> <value>` at every/any/the first/the last step;
    `finite` and `present` need no value."""

    metric: MetricName = Field(description="the logged metric's name")
    op: Literal["<=", "<", ">=", ">", "finite", "present"] = Field(
        description="a comparison with value, or finite / present (no value)"
    )
    value: float | None = Field(default=None, description="the bound of a comparison (a finite number)")
    at: Literal["every", "any", "first", "last"] = Field(
        default="every", description="the steps the judgment applies to"
    )

    @model_validator(mode="after")
    def _value(self) -> MetricCheck:
        needs = self.op not in ("finite", "present")
        if needs and (self.value is None or not math.isfinite(self.value)):
            raise ValueError(f"{self.metric} {self.op} needs a finite value")
        if not needs and self.value is not None:
            raise ValueError(f"{self.metric} {self.op} takes no value")
        return self


# Where an image keeps its recipe's framework smoke, beside lock.json under /opt/rocmstack (render writes
# it, validate's framework stage reads it).
FRAMEWORK_SMOKE_FILE = "framework-smoke.json"


class FrameworkSmoke(_Strict):
    """`rocmstack smoke framework`: the image's RL framework runs its own short loop; rocmstack makes the
    model, tokenizer, data and reward file, runs `command` under `timeout_s`, and judges what it logged."""

    framework: Name = Field(description="the framework's name, as reports show it (verl, trl, ...)")
    command: tuple[CommandArg, ...] = Field(
        min_length=1, description="argument list (no shell); {placeholders} are filled by rocmstack"
    )
    env: dict[EnvName, CommandArg] = Field(
        default_factory=dict, description="added to the environment ({placeholders} allowed)"
    )
    pass_env: tuple[EnvName, ...] = Field(
        default=(),
        description="caller's variables the command also gets, by name, beyond the minimal environment "
        "(docs/security.md); a secret's name is refused",
    )
    steps: int = Field(default=2, ge=1, le=100, description="training steps; fills {steps}")
    timeout_s: int = Field(ge=10, le=7200, description="the whole run is killed after this many seconds")
    metrics: MetricsSource = Field(description="where the per-step metrics land and how they are written")
    checks: tuple[MetricCheck, ...] = Field(min_length=1, description="judgments of the logged metrics")
    train_rows: int = Field(default=32, ge=1, le=100000, description="rows of the training parquet")
    val_rows: int = Field(default=8, ge=1, le=100000, description="rows of the validation parquet")

    @model_validator(mode="after")
    def _env(self) -> FrameworkSmoke:
        for name in self.env:
            if is_secret_name(name):
                raise ValueError(f"{name}: a smoke command's env is part of the recipe; no secrets in it")
        for name in self.pass_env:
            if is_secret_name(name):
                raise ValueError(f"pass_env: {name} names a secret; a recipe's command never gets one")
        return self


class Recipe(_Strict):
    """A version-pinned image recipe: base, components, patches, and where the image is published."""

    schema_: Literal[1] = Field(default=1, alias="schema", description="the recipe format's version")
    name: Name = Field(description="the recipe's name (its file name without .yaml)")
    description: Text = Field(description="one line on what the image is")
    extends: Name | None = Field(
        default=None, description="a parent recipe's name: this file gives only what differs from it"
    )
    sources: dict[Name, Url] = Field(
        min_length=1, description="public sources the pins were transcribed from"
    )
    base: Base = Field(description="the base image")
    gpu_archs: tuple[TargetArch, ...] = Field(min_length=1, description="the GPU archs the recipe supports")
    default_gpu_archs: tuple[TargetArch, ...] = Field(
        min_length=1, description="the arch set a build without --gpu-arch gets"
    )
    system_packages: tuple[AptPackage, ...] = Field(
        default=(),
        description="Debian/Ubuntu packages apt-get installs (--no-install-recommends) in the system layer, "
        "before any component",
    )
    components: dict[Name, Component] = Field(description="name -> what to install and where it comes from")
    patches: tuple[Name, ...] = Field(default=(), description="ids of the patch specs applied, in this order")
    patches_dir: Annotated[str, _matching(_PATCHES_DIR, "relative folder")] | None = Field(
        default=None,
        description="folder of this recipe's own patch specs (<id>.yaml), relative to the recipe file; "
        "--patches-dir wins over it; a child recipe inherits its parent's unless it names its own "
        "(null: the shipped patches/)",
    )
    env: dict[EnvName, EnvValue] = Field(
        default_factory=dict, description="ENV defaults of the image (no secret-looking names)"
    )
    build_args: dict[EnvName, EnvValue] = Field(
        default_factory=dict, description="ARG defaults of the build (MAX_JOBS: parallel compile jobs, 64)"
    )
    guards: Guards = Field(default_factory=Guards, description="checks the build runs inside the image")
    user: User = Field(default_factory=User, description="the non-root user the image runs as")
    publish: Publish = Field(description="the image repository, its descriptive tag and its aliases")
    validated_together: tuple[ValidatedSet, ...] = Field(
        default=(), description="component values validated as one set upstream"
    )
    accepted_conflicts: tuple[AcceptedConflict, ...] = Field(
        default=(),
        description="dependency conflicts the image keeps on purpose, each with a reason and source",
    )
    unverified: tuple[
        Annotated[str, _matching(re.compile(r"^[a-z_]+(\.[A-Za-z0-9_.-]+)*$"), "field path")], ...
    ] = Field(
        default=(),
        description="field paths whose values no public source gives exactly; show and render warn",
    )
    framework_smoke: FrameworkSmoke | None = Field(
        default=None, description="the image's RL framework's own short loop, run by `smoke framework`"
    )
    prebuild_aiter: tuple[Annotated[str, _matching(_AITER_MODULE, "AITER module name (module_...)")], ...] = (
        Field(
            default=(),
            description="AITER JIT modules built into the image for its archs (a build step; `validate` times "
            "their first call); names as in aiter's aiter/jit/optCompilerConfig.json",
        )
    )
    models: tuple[Annotated[str, _matching(_MODEL, "model name")], ...] = Field(
        default=(),
        description="MoE models the image serves; `doctor` reports their shapes without a tuned config "
        "(names: rocmstack/gpu/moe_shapes.yaml)",
    )

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=True)

    @model_validator(mode="after")
    def _consistent(self) -> Recipe:
        problems = consistency_problems(self.model_dump(by_alias=True))
        if problems:
            raise ValueError(PROBLEM_SEPARATOR.join(problems))
        return self


def _strings(value: Any) -> list[str]:
    """The strings of a list (or a mapping's keys) as the file gave them; anything else: none."""
    if isinstance(value, (list, tuple, Mapping)):
        return [v for v in value if isinstance(v, str)]
    return []


def consistency_problems(raw: Mapping[str, Any], invalid: Collection[str] = ()) -> list[str]:
    """Every problem across a recipe's fields, one message each. It runs on the validated recipe and, when
    some field is itself invalid, on the raw data too (pydantic skips a model's own checks then, which
    reported a file's problems in rounds); a check that reads a key in ``invalid`` is left out: that key's
    own error says what is wrong, and a check over a bad value would only blame the wrong field."""
    problems = []
    if not {"gpu_archs", "default_gpu_archs"} & set(invalid):
        archs, defaults = _strings(raw.get("gpu_archs")), _strings(raw.get("default_gpu_archs"))
        unknown = sorted(set(defaults) - set(archs))
        if unknown:
            problems.append(f"default_gpu_archs {unknown} are not in gpu_archs {archs}")
    patches = _strings(raw.get("patches"))
    if "patches" not in invalid and len(set(patches)) != len(patches):
        problems.append("patches lists an id twice")
    models = _strings(raw.get("models"))
    if models and "models" not in invalid:
        known = moe_shapes()
        unknown = [m for m in models if m not in known]
        if unknown:
            problems.append(f"models: {unknown} have no MoE shape (known: {', '.join(known)})")
    build_args = _strings(raw.get("build_args"))
    if "GPU_ARCH" in build_args:
        problems.append("GPU_ARCH is set by --gpu-arch, not by build_args")
    components = raw.get("components")
    build_env = [
        n
        for c in (components.values() if isinstance(components, Mapping) else ())
        if isinstance(c, Mapping)
        for n in _strings(c.get("build_env"))
    ]
    # A secret's name is wrong wherever it stands, whatever else its mapping holds: never left out.
    for name in (*_strings(raw.get("env")), *build_args, *build_env):
        if is_secret_name(name):
            problems.append(
                f"{name}: secrets never go into ENV, ARG or build env (they would be baked into the image); "
                "pass them at build time with RUN --mount=type=secret"
            )
    return problems


_OVERLAY = "Overlay"


def _overlay(node: Any) -> Any:
    """The schema of a recipe that ``extends:`` another: the same keys and values, none of them required
    (the parent gives them), each also ``null`` (which deletes the parent's value)."""
    if isinstance(node, list):
        return [_overlay(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _overlay(v) for k, v in node.items() if k != "required"}
    if isinstance(out.get("$ref"), str):
        out["$ref"] += _OVERLAY
    for key in ("properties",):
        if isinstance(out.get(key), dict):
            out[key] = {k: {"anyOf": [v, {"type": "null"}]} for k, v in out[key].items()}
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = {"anyOf": [out["additionalProperties"], {"type": "null"}]}
    return out


def json_schema() -> dict:
    """The recipe schema for editors. The top level lists every key as a recipe that ``extends:`` another
    may give it (partial, or null to delete); a recipe without ``extends`` must also be a whole Recipe."""
    full = Recipe.model_json_schema(by_alias=True)
    defs = full.pop("$defs")
    overlay = _overlay(full)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://rocmstack.dev/schema/recipe-v1.json",
        "title": full["title"],
        "description": "A rocmstack recipe; with `extends:` it gives only what differs from its parent.",
        "type": "object",
        "properties": overlay["properties"],
        "additionalProperties": False,
        "if": {"properties": {"extends": {"type": "string"}}, "required": ["extends"]},
        "then": {"required": ["name", "extends"]},
        "else": {"$ref": f"#/$defs/{full['title']}"},
        "$defs": {**defs, **{name + _OVERLAY: _overlay(d) for name, d in defs.items()}, full["title"]: full},
    }
