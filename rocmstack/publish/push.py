"""Pushing a build's tags and promoting them, registry side, under the immutability guard.

An immutable tag (the descriptive one, the content tag ``r-<hash>``) never moves: one that exists in the
registry with another render hash, or holds another build of the same render, is refused before anything
is pushed or copied; one that already holds this very image is left alone.
"""

from __future__ import annotations

import shutil

from rich.console import Console

from rocmstack.build.tags import TagSet, immutability_verdict
from rocmstack.container import engine as engines
from rocmstack.container.engine import Engine, Which
from rocmstack.contract import RENDER_HASH_LABEL
from rocmstack.errors import CheckFailed, EngineError, printable
from rocmstack.output import waiting


def guard_verdict(
    engine: Engine, ref: str, render_hash: str, *, image_id: str | None = None, which: Which = shutil.which
) -> str:
    """'push' or 'skip' for an immutable ref, from its registry labels; CheckFailed if it holds another render.

    With ``image_id``, 'skip' also needs the registry's image to be this very build (its config digest):
    two builds of one render are not the same image, and tags must not split between them. A tag that
    holds a multi-platform index is this build only when every image the index lists is: the index's own
    digest names no image, and its render-hash label is one platform's.
    """
    labels = engines.remote_labels(engine, ref, which=which)
    verdict = immutability_verdict(
        ref, (labels or {}).get(RENDER_HASH_LABEL), render_hash, exists=labels is not None
    )
    if verdict == "skip" and image_id:
        remote = engines.remote_manifest(engine, ref, which=which) or {}
        mine = "sha256:" + image_id.removeprefix("sha256:")
        fix = "push the image the registry already holds, or bump a pin so the tags change"
        if remote.get("index"):
            held = held_images(remote)
            if not holds_only(remote, mine):
                shown = ", ".join(printable(c[7:19]) for c in held) or "none"
                raise CheckFailed(
                    f"refusing to push {ref}: it already exists in the registry with render hash "
                    f"{render_hash[:12]} as a multi-platform index whose images ({shown}) are not all this "
                    f"build ({mine[7:19]}); immutable tags never move",
                    fix=fix,
                )
            return verdict
        config = remote.get("config")
        if not isinstance(config, str) or config != mine:
            held_id = printable(config[7:19]) if isinstance(config, str) else "unknown"
            raise CheckFailed(
                f"refusing to push {ref}: it already exists in the registry with render hash "
                f"{render_hash[:12]} but from another build (image {held_id}, this is {mine[7:19]}); "
                "immutable tags never move",
                fix=fix,
            )
    return verdict


def held_images(remote: dict) -> list[str]:
    """The image ids (config digests) a registry manifest holds: every image an index lists, or its config."""
    return (
        [str(c) for c in remote.get("images") or []] if remote.get("index") else [str(remote.get("config"))]
    )


def holds_only(remote: dict, image_id: str) -> bool:
    """Whether the manifest holds this image and nothing else (an index none of whose images is another)."""
    held = held_images(remote)
    return bool(held) and not remote.get("more") and all(c == image_id for c in held)


def push_tags(
    engine: Engine,
    tags: TagSet,
    render_hash: str,
    mode: str,
    console: Console,
    *,
    image_id: str | None = None,
) -> list[dict]:
    """Push the content tag (and, for mode "all", the descriptive tag and the aliases).

    Immutable tags are guarded: one that exists in the registry with another render hash (or, given
    ``image_id``, another build) is refused before anything is pushed; one that holds this very image is
    left alone. With ``image_id``, podman pushes that id, not whatever the local tag points at by then.
    """
    wanted = [tags.content] if mode == "content" else list(tags.all)
    decisions = [
        (
            tag,
            guard_verdict(engine, tags.ref(tag), render_hash, image_id=image_id)
            if tag in tags.immutable
            else "push",
        )
        for tag in wanted
    ]
    pushed = []
    for tag, verdict in decisions:
        ref = tags.ref(tag)
        if verdict == "skip":
            console.print(f"  {ref}: already in the registry with this render hash, not pushed again")
            pushed.append({"ref": ref, "pushed": False, "reason": "exists with the same render hash"})
            continue
        with waiting(console, "publish", f"pushing {ref} (layers of tens of GB take a while) ..."):
            out = engine.push(ref, image_id)
        if out.returncode != 0:
            raise EngineError(
                f"push of {ref} failed: {engines.classify_pull_error(ref, out.stderr + out.stdout)}"
            )
        console.print(f"  pushed {ref}")
        pushed.append({"ref": ref, "pushed": True})
    return pushed


def copy_by_digest(
    engine: Engine,
    tags: TagSet,
    render_hash: str,
    console: Console,
    *,
    checked: dict,
    which: Which = shutil.which,
) -> list[dict]:
    """Point the descriptive tag and the aliases at the content tag's manifest CHECKED, registry to registry.

    The publish step after validation (``rocmstack.publish.gate.promote`` runs the gate and passes the
    manifest it checked, ``{"digest", "config"}`` as ``engines.remote_manifest`` read it): the copy is by
    that digest, so whatever the content tag holds by now, only the validated image is promoted. Nothing
    is rebuilt or pulled; the descriptive tag is guarded like any immutable push.
    """
    content = tags.ref(tags.content)
    if not checked.get("digest"):
        raise EngineError(f"cannot promote: no checked manifest digest for {content}")
    source = engines.by_digest(content, checked["digest"])
    labels = engines.remote_labels(engine, source, which=which) or {}
    if labels.get(RENDER_HASH_LABEL) != render_hash:
        raise EngineError(
            f"cannot promote: {source} carries render hash {labels.get(RENDER_HASH_LABEL)!r}, "
            f"expected {render_hash}"
        )
    results = []
    for tag in (tags.descriptive, *tags.aliases):
        ref = tags.ref(tag)
        if (
            tag in tags.immutable
            and guard_verdict(engine, ref, render_hash, image_id=checked.get("config"), which=which) == "skip"
        ):
            results.append({"ref": ref, "pushed": False, "reason": "exists with the same render hash"})
            continue
        # remote_labels above needed skopeo too (podman), so the copy below has it.
        with waiting(console, "publish", f"copying {source} -> {ref} ..."):
            out = engine.copy(source, ref)
        if out.returncode != 0:
            raise EngineError(
                f"promote {source} -> {ref} failed: {engines.classify_pull_error(ref, out.stderr + out.stdout)}"
            )
        console.print(f"  {ref} -> {source}")
        results.append({"ref": ref, "pushed": True})
    return results
