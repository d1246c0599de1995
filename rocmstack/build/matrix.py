"""Recipes x GPU arch sets -> GitHub Actions ``strategy.matrix`` include lists.

Two lists: one entry per image (build and publish) and one validation leg per (image, arch it claims),
because a tag that names an arch must mean the image was proven on a GPU of that arch (vLLM, sgl-kernel
and AITER compile code objects per arch; one arch's can be missing or broken while another's work). Each
entry carries what its job needs without recomputing it: recipe and archs, runner labels (a CPU builder;
per leg a GPU runner labelled with that arch), the render hash, the tags (the content tag is the staging
reference that validation pulls) and the artifact name of each leg's report.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rocmstack.build.tags import tag_set
from rocmstack.errors import InputError
from rocmstack.prepare import gate
from rocmstack.recipe.load import load_recipe, recipes_for_all

DEFAULT_BUILD_RUNNER = ("self-hosted", "linux", "x64", "rocmstack-build")
DEFAULT_GPU_RUNNER = ("self-hosted", "linux", "rocm")
DEFAULT_EXPECT_GPUS = 8  # an AMD Instinct node (MI300X, MI325X, MI355X) has 8 GPUs
REPORT_ARTIFACT = "validation-{render_hash}-{arch}"


@dataclass(frozen=True, kw_only=True)
class Entry:
    recipe: str
    gpu_arch: str
    render_hash: str
    tags: dict
    build_runner: tuple[str, ...]
    gpu_runner_prefix: tuple[str, ...] = DEFAULT_GPU_RUNNER
    expect_gpus: int = DEFAULT_EXPECT_GPUS

    @property
    def archs(self) -> list[str]:
        return self.gpu_arch.split(";")

    def as_dict(self) -> dict:
        return {
            "recipe": self.recipe,
            "gpu_arch": self.gpu_arch,
            "archs": self.archs,
            "name": f"{self.recipe} {self.gpu_arch}",
            "render_hash": self.render_hash,
            "build_runner": list(self.build_runner),
            "staging_ref": self.tags["repository"] + ":" + self.tags["content"],
            "tags": " ".join(self.tags["refs"]),
            "immutable_tags": " ".join(self.tags["immutable_refs"]),
            "reports": REPORT_ARTIFACT.format(render_hash=self.render_hash, arch="*"),
        }

    def legs(self) -> list[dict]:
        """One validation leg per arch the image claims, each on a GPU runner of that arch."""
        image = self.as_dict()
        return [
            {
                "recipe": self.recipe,
                "gpu_arch": self.gpu_arch,
                "arch": arch,
                "name": f"{image['name']} on {arch}",
                "render_hash": self.render_hash,
                "staging_ref": image["staging_ref"],
                "validate_runner": list(gpu_runner_labels(arch, self.gpu_runner_prefix)),
                "expect_gpus": self.expect_gpus,
                "report": REPORT_ARTIFACT.format(render_hash=self.render_hash, arch=arch),
            }
            for arch in self.archs
        ]


def gpu_runner_labels(arch: str, prefix: Sequence[str] = DEFAULT_GPU_RUNNER) -> tuple[str, ...]:
    """A GPU runner labelled with the one arch a leg validates."""
    return (*prefix, arch)


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


def as_json(entries: Sequence[Entry]) -> dict:
    """The image entries (``include``) and the validation legs (``legs``, itself an include list)."""
    return {
        "include": [e.as_dict() for e in entries],
        "legs": {"include": [leg for e in entries for leg in e.legs()]},
    }


def github_output(entries: Sequence[Entry]) -> str:
    """``matrix=<json>`` (images) and ``legs=<json>`` (validation legs) lines for ``$GITHUB_OUTPUT``,
    each consumed with ``fromJSON`` in a ``strategy.matrix``."""
    data = as_json(entries)

    def line(name: str, value: dict) -> str:
        return f"{name}=" + json.dumps(value, sort_keys=True, separators=(",", ":"))

    return line("matrix", {"include": data["include"]}) + "\n" + line("legs", data["legs"])


def expand(
    recipes: Sequence[str],
    gpu_archs: Sequence[str],
    *,
    registry: str | None = None,
    build_runner: tuple[str, ...] = DEFAULT_BUILD_RUNNER,
    gpu_runner_prefix: tuple[str, ...] = DEFAULT_GPU_RUNNER,
    expect_gpus: int = DEFAULT_EXPECT_GPUS,
    patches_dir: Path | None = None,
) -> list[Entry]:
    """Every recipe (default: all that ``rocmstack recipes`` lists) x every arch set (default: the recipe's
    default set).

    Each entry goes through the same gate as ``rocmstack build`` (lock drift, rules), so the matrix never
    lists a build that would be refused.
    """
    if expect_gpus < 1:
        raise InputError(
            f"--expect-gpus {expect_gpus}: a validation leg needs at least one GPU",
            fix="the GPUs each GPU runner has, e.g. 8",
        )
    # By path: the very file `recipes` lists under each name (--recipes-dir, $ROCMSTACK_RECIPES_PATH, shipped).
    names = list(recipes) or [str(p) for p in recipes_for_all().values()]
    if not names:
        raise InputError("matrix: no recipes given and none on the search path")
    entries = []
    for name in names:
        model, _ = load_recipe(name)
        sets = list(gpu_archs) or [";".join(sorted(model.default_gpu_archs))]
        for arch in sets:
            checked = gate(name, arch, patches_dir=patches_dir)
            resolved = checked.resolved
            tags = tag_set(resolved, checked.draft.render_hash, registry=registry)
            entries.append(
                Entry(
                    recipe=name if recipes else model.name,
                    gpu_arch=resolved.arch_list,
                    render_hash=checked.draft.render_hash,
                    tags=tags.as_dict(),
                    build_runner=build_runner,
                    gpu_runner_prefix=gpu_runner_prefix,
                    expect_gpus=expect_gpus,
                )
            )
    check_unique(entries)
    return entries
