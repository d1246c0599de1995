"""``rocmstack publish IMAGE --report DIR``: push an image's tags only after it passed validation.

The gate: the report passed, the report was made from this very image (its render hash equals the
image's ``dev.rocmstack.render-hash`` label, and the image id matches when the report recorded one), and
no immutable tag moves (the build's immutability guard, ``rocmstack.build.pipeline.push_tags``).
"""

from __future__ import annotations

import re
from typing import Any

from rocmstack.build.pipeline import RENDER_HASH_LABEL
from rocmstack.build.tags import CONTENT_HEX, CONTENT_PREFIX, TagSet, arch_field, parse_reference
from rocmstack.errors import CheckFailed, InputError

RECIPE_LABEL = "dev.rocmstack.recipe"
ARCHS_LABEL = "dev.rocmstack.gpu-archs"


def check_report(report: dict[str, Any], labels: dict[str, str], image_id: str, image: str) -> str:
    """The render hash to publish under; CheckFailed names the first reason the gate stays shut."""
    if not report.get("passed"):
        raise CheckFailed(
            f"refusing to publish {image}: its validation report did not pass ({report.get('verdict')})",
            fix="fix what the report names and run `rocmstack validate` again",
        )
    label = labels.get(RENDER_HASH_LABEL)
    if not label:
        raise CheckFailed(
            f"refusing to publish {image}: it has no {RENDER_HASH_LABEL} label",
            fix="publish only images built by `rocmstack build`",
        )
    reported = report.get("render_hash")
    if reported != label:
        shown = reported[:12] if reported else "none"
        raise CheckFailed(
            f"refusing to publish {image}: the report is for render hash {shown}, the image is {label[:12]}",
            fix="validate this image, then publish it with that report",
        )
    recorded = (report.get("image") or {}).get("id")
    if recorded and image_id and _bare(recorded) != _bare(image_id):
        raise CheckFailed(
            f"refusing to publish {image}: the report was made from image {_bare(recorded)[:12]}, "
            f"this is {_bare(image_id)[:12]} (same render, another build)",
            fix="validate the image you publish",
        )
    if report.get("mode") != "container":
        raise CheckFailed(
            f"refusing to publish {image}: the report comes from `validate --in-place`, which "
            "checks a node, not this image",
            fix=f"run `rocmstack validate {image} --report DIR`",
        )
    return label


def _bare(image_id: str) -> str:
    return image_id.removeprefix("sha256:")


def _aliases_of_recipe(labels: dict[str, str]) -> set[str]:
    """The floating aliases the recipe declares (plain and with the ``_<arch>`` suffix); empty if unknown."""
    name = labels.get(RECIPE_LABEL)
    if not name:
        return set()
    from rocmstack.recipe.load import load_recipe

    try:
        recipe, _ = load_recipe(name)
    except Exception:
        return set()
    archs = arch_field(tuple(a for a in labels.get(ARCHS_LABEL, "").replace(";", ",").split(",") if a))
    aliases = {str(a) for a in recipe.publish.aliases}
    return aliases | {f"{a}_{archs}" for a in aliases if archs}


def tag_set(
    image: str, repo_tags: list[str], labels: dict[str, str], render_hash: str
) -> tuple[TagSet, set[str]]:
    """The tags to push: every local tag of this image in IMAGE's repository, and the immutable ones
    TagSet cannot hold (it has one descriptive tag).

    The content tag (``r-<hash>``) and every tag the recipe does not declare as a floating alias are
    immutable, so the guard covers them; when the recipe is unknown, every tag is treated as immutable.
    """
    from rocmstack.build.engines import qualify

    ref = parse_reference(image)
    repo = ref.name
    names = {repo, qualify(repo)}
    tags = sorted({t.rsplit(":", 1)[1] for t in repo_tags if t.rsplit(":", 1)[0] in names})
    if ref.tag and ref.tag not in tags:
        tags.append(ref.tag)
    content = CONTENT_PREFIX + render_hash[:CONTENT_HEX]
    if content not in tags:
        raise CheckFailed(
            f"refusing to publish {image}: it is not tagged {repo}:{content} (the content tag of its "
            f"render hash)",
            fix="publish images tagged by `rocmstack build`",
        )
    floating = _aliases_of_recipe(labels)
    immutable = [t for t in tags if t != content and t not in floating]
    descriptive = immutable[0] if immutable else content
    extra = immutable[1:]
    aliases = tuple(t for t in tags if t in floating)
    return TagSet(repository=repo, descriptive=descriptive, content=content, aliases=(*extra, *aliases)), set(
        extra
    )


_HEX64 = re.compile(r"[0-9a-f]{64}")


def publish(
    *, image: str, report: dict[str, Any], engine_choice: str, dry_run: bool, console
) -> dict[str, Any]:
    """Check the gate, then push (through the build's guarded push). Returns what was (or would be) pushed."""
    from rocmstack.build import engines
    from rocmstack.build.pipeline import guard_verdict, push_tags

    choice = "podman" if engine_choice == "buildah" else engine_choice
    engine = engines.detect(choice)
    info = engines.inspect_image(engine, image)
    render_hash = check_report(report, info["labels"], info["id"], image)
    if not _HEX64.fullmatch(render_hash):
        raise CheckFailed(
            f"refusing to publish {image}: label {RENDER_HASH_LABEL}={render_hash!r} is not a render hash"
        )
    tags, extra_immutable = tag_set(image, info["repo_tags"], info["labels"], render_hash)
    guarded = (*tags.immutable, *sorted(extra_immutable))
    result: dict[str, Any] = {
        "image": image,
        "image_id": info["id"],
        "render_hash": render_hash,
        "engine": engine.name,
        "refs": list(tags.refs()),
        "immutable": [tags.ref(t) for t in guarded],
        "dry_run": dry_run,
    }
    # Guard every immutable tag before anything is pushed, so --dry-run answers exactly what a push would.
    for tag in guarded:
        guard_verdict(engine, tags.ref(tag), render_hash, image_id=info["id"])
    if dry_run:
        result["pushed"] = []
        return result
    # The image that passed the gate is pushed by its id (podman), not by a name that could move meanwhile.
    result["pushed"] = push_tags(engine, tags, render_hash, "all", console, image_id=info["id"])
    return result


def check_engine_choice(engine: str) -> str:
    if engine not in ("auto", "docker", "podman", "buildah"):
        raise InputError(f"--engine {engine!r}: unknown engine", fix="one of auto, docker, podman, buildah")
    return engine
