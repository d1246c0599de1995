"""Recipes x GPU arch sets -> a GitHub Actions ``strategy.matrix`` include list.

Each entry carries what every job of the workflow needs without recomputing it: the recipe and archs,
the runner labels (a CPU builder, a GPU runner labelled with the arch for validation), the render hash
and the tags (the content tag is the staging reference that validation pulls).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from rocmstack.errors import InputError

DEFAULT_BUILD_RUNNER = ("self-hosted", "linux", "x64", "rocmstack-build")
DEFAULT_GPU_RUNNER = ("self-hosted", "linux", "rocm")


@dataclass(frozen=True, kw_only=True)
class Entry:
    recipe: str
    gpu_arch: str
    render_hash: str
    tags: dict
    build_runner: tuple[str, ...]
    validate_runner: tuple[str, ...]

    def as_dict(self) -> dict:
        return {
            "recipe": self.recipe,
            "gpu_arch": self.gpu_arch,
            "name": f"{self.recipe} {self.gpu_arch}",
            "render_hash": self.render_hash,
            "build_runner": list(self.build_runner),
            "validate_runner": list(self.validate_runner),
            "staging_ref": self.tags["repository"] + ":" + self.tags["content"],
            "tags": " ".join(self.tags["refs"]),
            "immutable_tags": " ".join(self.tags["immutable_refs"]),
        }


def gpu_runner_labels(archs: Sequence[str], prefix: Sequence[str] = DEFAULT_GPU_RUNNER) -> tuple[str, ...]:
    """A GPU runner labelled with the arch. A multi-arch image is validated on its first arch's runner."""
    return (*prefix, archs[0])


def parse_labels(text: str | None, default: tuple[str, ...], what: str) -> tuple[str, ...]:
    if not text:
        return default
    labels = tuple(p.strip() for p in text.split(",") if p.strip())
    if not labels:
        raise InputError(
            f"{what} {text!r}: no runner label given",
            fix="comma-separated labels, e.g. self-hosted,linux,x64",
        )
    return labels


def check_unique(entries: Sequence[Entry]) -> None:
    """Two entries must never publish the same tag: a floating alias would race, an immutable tag would clash."""
    owner: dict[str, Entry] = {}
    for e in entries:
        name = e.as_dict()["name"]
        for ref in e.tags["refs"]:
            first = owner.setdefault(ref, e)
            if first.as_dict()["name"] == name:
                continue
            # The hint names what actually collides: {arch} helps only one recipe's arch sets.
            if ref.rpartition(":")[2] in e.tags.get("aliases", ()):
                fix = "give each recipe its own publish.aliases"
            elif first.recipe == e.recipe:
                fix = "put {arch} in publish.tag so that each arch set gets its own descriptive tag"
            else:
                fix = "give each recipe its own publish.tag or publish.repository"
            raise InputError(
                f"matrix: {first.as_dict()['name']} and {name} would both publish {ref}", fix=fix
            )


def github_output(entries: Sequence[Entry]) -> str:
    """One ``matrix=<json>`` line for ``$GITHUB_OUTPUT``, consumed with ``fromJSON`` in ``strategy.matrix``."""
    return "matrix=" + json.dumps(
        {"include": [e.as_dict() for e in entries]}, sort_keys=True, separators=(",", ":")
    )


def expand(
    recipes: Sequence[str],
    gpu_archs: Sequence[str],
    *,
    registry: str | None = None,
    build_runner: tuple[str, ...] = DEFAULT_BUILD_RUNNER,
    gpu_runner_prefix: tuple[str, ...] = DEFAULT_GPU_RUNNER,
) -> list[Entry]:
    """Every recipe (default: all shipped) x every arch set (default: the recipe's default set).

    Each entry goes through the same gate as ``rocmstack build`` (lock drift, rules), so the matrix never
    lists a build that would be refused.
    """
    from rocmstack.build.tags import tag_set
    from rocmstack.recipe.load import load_recipe, recipe_files
    from rocmstack.render.context import render
    from rocmstack.rules.lock import gate

    names = list(recipes) or list(recipe_files())
    if not names:
        raise InputError("matrix: no recipes given and none shipped")
    entries = []
    for name in names:
        model, _ = load_recipe(name)
        sets = list(gpu_archs) or [";".join(sorted(model.default_gpu_archs))]
        for arch in sets:
            checked = gate(name, arch)
            resolved = checked.resolved
            rendered = render(resolved, ignored_rules=checked.ignored)
            tags = tag_set(resolved, rendered.render_hash, registry=registry)
            entries.append(
                Entry(
                    recipe=name,
                    gpu_arch=resolved.arch_list,
                    render_hash=rendered.render_hash,
                    tags=tags.as_dict(),
                    build_runner=build_runner,
                    validate_runner=gpu_runner_labels(resolved.gpu_archs, gpu_runner_prefix),
                )
            )
    check_unique(entries)
    return entries
