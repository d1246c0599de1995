"""``publish --promote``: a recipe's descriptive tag and aliases pointed at its pushed content tag, registry
side, once the gate opens on the reports of the image that tag holds."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rocmstack.build.recipe_tags import TagRequest, recipe_tags
from rocmstack.build.tags import TagSet
from rocmstack.container import engine as engines
from rocmstack.doctor import select_checks
from rocmstack.errors import InputError
from rocmstack.options import split_ids
from rocmstack.output import stderr
from rocmstack.publish import gate
from rocmstack.publish.sign import Signer


def accepted_skips(ids: list[str]) -> frozenset[str]:
    """The doctor check ids whose skip a report may carry and still pass; an unknown id is an InputError."""
    allowed = split_ids(ids)
    if allowed:
        select_checks((), allowed)
    return frozenset(allowed)


def promote_recipe(
    request: TagRequest,
    *,
    reports: list[Path],
    allow_skip: list[str],
    insecure: bool,
    engine: str,
    signing: Signer | None = None,
) -> tuple[TagSet, str, list[dict]]:
    """Promote the recipe's content tag through the gate: its tags, render hash and what moved."""
    if not reports:
        raise InputError(
            "--promote needs --reports DIR: the validation reports of the image the content tag holds",
            fix="pass the folder(s) `rocmstack validate IMAGE --output DIR` wrote, once per arch leg",
        )
    tags, render_hash = recipe_tags(request)
    allowed = accepted_skips(allow_skip)
    loaded = gate.load_reports(reports)
    # buildah builds into podman's store: the promotion reads and pushes through podman
    found = replace(engines.detect(engines.store_choice(engine)), tls_verify=not insecure)
    promoted = gate.promote(
        tags=tags,
        render_hash=render_hash,
        reports=loaded,
        engine=found,
        console=stderr(),
        allow_skip=allowed,
        signing=signing,
    )
    return tags, render_hash, promoted
