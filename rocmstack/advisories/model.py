"""An advisory: what the field knows to break, for which versions, how it shows, why, and the fix.

One YAML file per advisory, named ``<id>.yaml``. Every field is checked (unknown keys are refused), so a
typo in a lab's own advisory is one line at load time, not a silent miss."""

from __future__ import annotations

import datetime as dt
import re
from typing import Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pydantic import BaseModel, ConfigDict, Field, field_validator

# What an advisory may name, and where its version comes from (a recipe's pins, a node's inventory).
COMPONENTS = (
    "rocm",  # the ROCm runtime / SDK version (base.rocm; the node's HIP version)
    "amdgpu-driver",  # the kernel driver (/sys/module/amdgpu/version)
    "torch",
    "triton",
    "vllm",
    "sglang",
    "sgl-kernel",
    "aiter",
    "rccl",
    "hipblaslt",
    "flash-attn",
    "ray",
    "verl",
    "slime",
    "vime",
    "megatron-core",
    "transformers",
    "deepspeed",
    "torch-memory-saver",
    "python",
    "libstdcxx",  # the highest GLIBCXX_3.4.N the image's libstdc++ provides, as 3.4.N
    "glibc",
)
ID = re.compile(r"^[a-z0-9][a-z0-9.-]{2,79}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


class Affected(_Strict):
    component: str = Field(description="one of COMPONENTS")
    versions: str = Field(
        description="a PEP 440 specifier set the affected versions fall in, e.g. '>=7.2.0,<7.2.5'"
    )

    @field_validator("component")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in COMPONENTS:
            raise ValueError(f"{value!r} is not a component; one of {', '.join(COMPONENTS)}")
        return value

    @field_validator("versions")
    @classmethod
    def _spec(cls, value: str) -> str:
        try:
            SpecifierSet(value)
        except InvalidSpecifier:
            raise ValueError(f"{value!r} is not a version specifier (e.g. '>=7.2.0,<7.2.5')") from None
        return value


class Advisory(_Strict):
    id: str = Field(description="stable, lowercase, the file's name")
    title: str = Field(min_length=10, max_length=160)
    severity: Literal["fail", "warn"]  # of the failure itself, when its words are seen (a signature matched)
    # What the versions (arch, env) matching alone mean, before anything failed: most bugs need a usage too (a
    # model, a feature, a colocated job), so a match warns; "fail" where every such install breaks; "none"
    # where the versions only scope the failure's words (a mismatch the numbers cannot show)
    versions_alone: Literal["fail", "warn", "none"] = "warn"
    affects: tuple[Affected, ...] = Field(min_length=1, description="every one must hold (and)")
    arch: tuple[str, ...] = Field(default=(), description="gfx targets it bites on (any of); empty: all")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="a variable's value it needs (a regex the whole value must match); '<unset>' for unset",
    )
    symptom: str = Field(min_length=10, description="the failure's own words, verbatim from the source")
    signatures: tuple[str, ...] = Field(default=(), description="regexes over failure text that name it")
    cause: str = Field(min_length=10)
    fix: str = Field(min_length=5)
    fixed_in: dict[str, str] = Field(default_factory=dict, description="component -> first good version")
    source: str = Field(pattern=r"^https://", description="the public report or release note")
    date: dt.date = Field(description="when the source reported it")

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not ID.match(value):
            raise ValueError(f"{value!r}: lowercase letters, digits, '.' and '-', 3 to 80 characters")
        return value

    @field_validator("arch")
    @classmethod
    def _arch(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [a for a in value if not re.fullmatch(r"gfx[0-9a-f]{3,4}", a)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a gfx target (e.g. gfx942)")
        return value

    @field_validator("signatures")
    @classmethod
    def _regexes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"signature {pattern!r} is not a regex: {exc}") from None
        return value

    @field_validator("fixed_in")
    @classmethod
    def _fixed(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if name not in COMPONENTS:
                raise ValueError(f"fixed_in names {name!r}, not a component")
        return value
