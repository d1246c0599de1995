"""The tags a build of a recipe gets, from the recipe checked and rendered (not built), and how they print."""

from __future__ import annotations

from pathlib import Path

from rocmstack.build.tags import TagSet, tag_set
from rocmstack.output import print_json
from rocmstack.prepare import prepare


def recipe_tags(
    recipe: str,
    gpu_arch: str | None,
    overrides: list[str],
    *,
    registry: str | None,
    aliases: list[str],
    ignore_rules: list[str],
    patches_dir: Path | None,
) -> tuple[TagSet, str]:
    """RECIPE's tag set and render hash."""
    checked, rendered, _, _ = prepare(
        recipe, gpu_arch, overrides, ignore=ignore_rules, relock=False, patches_dir=patches_dir
    )
    tags = tag_set(checked.resolved, rendered.render_hash, registry=registry, extra_aliases=tuple(aliases))
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
