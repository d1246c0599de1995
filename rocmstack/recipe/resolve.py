"""Resolved pins: a validated recipe plus the GPU archs of one build. The single input to render."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rocmstack import __version__
from rocmstack.errors import InputError, RecipeError
from rocmstack.recipe.load import YAML_LOADER, recipe_arg_for
from rocmstack.recipe.model import Component, Recipe
from rocmstack.resources import recipes_dir

LOCK_SCHEMA = 1
_CLOSURE_KEYS = (
    "packages",
    "git",
    "unresolved",
    "requirements_unlocked",
    "rocmstack_requirements",
    "requirements_from",
)
_ARCH = re.compile(r"^gfx[0-9a-f]{3,4}$")


@dataclass(frozen=True, kw_only=True)
class Resolved:
    recipe: Recipe
    source: Path
    gpu_archs: tuple[str, ...]
    overrides: tuple[str, ...] = ()
    # The lock entry's closure ({"packages": [...], "git": {...}}) when the build installs from the lock.
    locked: dict[str, Any] | None = None

    @property
    def arch_list(self) -> str:
        return ";".join(self.gpu_archs)

    def components_in(self, layer: str) -> list[tuple[str, Component]]:
        return [(n, c) for n, c in sorted(self.recipe.components.items()) if c.layer.value == layer]

    def pins(self) -> dict[str, str]:
        """name -> the exact thing installed (version for pypi/base/sdk, ref for git), sorted."""
        pins = {
            "base": f"{self.recipe.base.image}:{self.recipe.base.tag}",
            "python": self.recipe.base.python,
            "rocm": self.recipe.base.rocm,
            "torch": self.recipe.base.torch,
        }
        for name, comp in sorted(self.recipe.components.items()):
            pins[name] = (comp.ref if comp.source == "git" else comp.version) or comp.source
        return pins

    def lock(self, *, render_hash: str, revision: str) -> dict[str, Any]:
        r = self.recipe
        return {
            "schema": LOCK_SCHEMA,
            "recipe": r.name,
            "render_hash": render_hash,
            "gpu_archs": list(self.gpu_archs),
            "base": {
                "image": f"{r.base.image}:{r.base.tag}",
                "digest": r.base.digest,
                "rocm": r.base.rocm,
                "python": r.base.python,
                "torch": r.base.torch,
            },
            "components": {
                name: {
                    "source": c.source,
                    "package": c.package or name if c.source == "pypi" else c.package,
                    "version": c.version,
                    "url": c.url,
                    "ref": c.ref,
                }
                for name, c in sorted(r.components.items())
            },
            "patches": list(r.patches),
            "env": dict(sorted(r.env.items())),
            "overrides": list(self.overrides),
            "unverified": list(r.unverified),
            "rocmstack": {"version": __version__, "revision": revision},
            **{k: v for k, v in (self.locked or {}).items() if k in _CLOSURE_KEYS},
        }


def known_archs() -> dict[str, dict[str, Any]]:
    data = yaml.load((recipes_dir() / "_archs.yaml").read_text(encoding="utf-8"), Loader=YAML_LOADER)
    return dict(data)


def parse_archs(text: str | None, recipe: Recipe) -> tuple[str, ...]:
    """``gfx950`` or ``gfx942;gfx950`` (commas accepted too) -> a sorted, de-duplicated tuple."""
    if text is None:
        return tuple(sorted(recipe.default_gpu_archs))
    parts = [p.strip() for p in re.split(r"[;,]", text) if p.strip()]
    if not parts:
        raise InputError(
            f"--gpu-arch {text!r}: no architecture given",
            fix=f"leave --gpu-arch out for the recipe's default, or give one of {';'.join(recipe.gpu_archs)}",
        )
    known = known_archs()
    for arch in parts:
        if not _ARCH.fullmatch(arch) or arch not in known:
            raise InputError(f"--gpu-arch: unknown GPU arch {arch!r}", fix=f"known: {', '.join(known)}")
        if arch not in recipe.gpu_archs:
            raise InputError(
                f"--gpu-arch: {arch} is not supported: recipe {recipe.name} does not support it",
                fix=f"supported: {';'.join(sorted(recipe.gpu_archs))}",
            )
    # Whether the base's torch was built for an arch is the rule gpu-arch-in-torch's to say (it names the
    # fix, and --ignore-rule can override it); refusing here first left the rule unable to ever fail.
    return tuple(sorted(set(parts)))


def plain_value(node: Any, *, sort_keys: bool = False) -> str:
    """A recipe value as the recipe would write it (YAML flow style, one line), never Python's repr;
    ``sort_keys`` gives one text per value whatever order its mappings were written in."""
    if isinstance(node, str):
        return repr(node)  # quoted, as YAML may quote it: 'release/0.9.0.amd0'
    text = yaml.safe_dump(node, default_flow_style=True, width=10**9, sort_keys=sort_keys)
    return text.removesuffix("\n").removesuffix("\n...")


def unverified_warnings(recipe: Recipe) -> list[str]:
    dumped = recipe.model_dump(mode="json", by_alias=True)
    out = []
    for path in recipe.unverified:
        node: Any = dumped
        for part in path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        out.append(
            f"{recipe.name}: {path} = {plain_value(node)} is UNVERIFIED (no public source gives the exact value)"
        )
    return out


def check_unverified_paths(recipe: Recipe, origin: str) -> None:
    dumped = recipe.model_dump(by_alias=True)
    for path in recipe.unverified:
        node: Any = dumped
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                raise RecipeError(f"{origin}: unverified: {path!r} names no field of the recipe")
            node = node[part]


def resolve(recipe: Recipe, source: Path, gpu_arch: str | None, overrides: tuple[str, ...] = ()) -> Resolved:
    check_unverified_paths(recipe, str(source))
    return Resolved(
        recipe=recipe, source=source, gpu_archs=parse_archs(gpu_arch, recipe), overrides=overrides
    )


__all__ = ["Resolved", "known_archs", "parse_archs", "resolve", "unverified_warnings"]


def recipe_arg(resolved: Resolved) -> str:
    """How a suggested command names this recipe so that it runs as printed, from the current folder: its
    name where the shipped search path finds this very file; its name and ``--recipes-dir DIR`` where only
    a folder of the search path (``--recipes-dir``, $ROCMSTACK_RECIPES_PATH) does; else its path (a recipe
    given as a path is often on no search path, and ``rocmstack lock NAME`` would fail). rocmstack takes
    ``--recipes-dir`` after the command too, so the result goes where a recipe argument goes."""
    return recipe_arg_for(resolved.recipe.name, resolved.source)
