"""The tags a build of a recipe gets, from the recipe checked and rendered (not built), and how they print."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rocmstack.build.tags import TagSet, tag_set
from rocmstack.output import print_json
from rocmstack.prepare import prepare


@dataclass(frozen=True)
class TagRequest:
    """A recipe and what its tags depend on: the arch set, overrides, registry and aliases, and the rules and
    patches its render takes (``tags``, ``publish --promote``)."""

    recipe: str
    gpu_arch: str | None = None
    overrides: tuple[str, ...] = ()
    registry: str | None = None
    aliases: tuple[str, ...] = ()
    ignore_rules: tuple[str, ...] = ()
    patches_dir: Path | None = None


def recipe_tags(request: TagRequest) -> tuple[TagSet, str]:
    """The recipe's tag set and render hash (the recipe is checked and rendered, not built)."""
    checked, rendered, _, _ = prepare(
        request.recipe,
        request.gpu_arch,
        request.overrides,
        ignore=request.ignore_rules,
        relock=False,
        patches_dir=request.patches_dir,
    )
    tags = tag_set(
        checked.resolved, rendered.render_hash, registry=request.registry, extra_aliases=request.aliases
    )
    return tags, rendered.render_hash


def print_tags(tags: TagSet, render_hash: str, *, json_out: bool, promoted: list[dict] | None = None) -> None:
    """One ``REF<TAB>immutable|alias`` line per tag, or the set as JSON (with what a promotion moved)."""
    if json_out:
        print_json(
            {
                **tags.as_dict(),
                "render_hash": render_hash,
                **({"promoted": promoted} if promoted is not None else {}),
            }
        )
        return
    for tag in tags.immutable:
        print(f"{tags.ref(tag)}\timmutable")
    for tag in tags.aliases:
        print(f"{tags.ref(tag)}\talias")
