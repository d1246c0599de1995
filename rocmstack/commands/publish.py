"""``rocmstack publish``: push an image's tags, or (``--promote``) point a recipe's tags at its validated
content tag, registry side; both only when the validation reports open the gate."""

from __future__ import annotations

from pathlib import Path

import typer

from rocmstack.errors import InputError
from rocmstack.options import (
    ALIAS_OPT,
    ALLOW_SKIP_OLD,
    ARCH_OPT,
    CONTAINER_ENGINE,
    DRY_RUN,
    IGNORE_OPT,
    INSECURE_OPT,
    JSON_OPT,
    PATCHES_DIR_OPT,
    PROMOTE,
    PUBLISH_REPORT_OLD,
    REGISTRY_OPT,
    SET_OPT,
    SIGN_OPT,
    SIGN_PASSPHRASE_OPT,
    renamed,
)
from rocmstack.publish.sign import Signer, signer


def register(app: typer.Typer) -> None:
    @app.command("publish")
    def publish(
        target: str = typer.Argument(
            ...,
            metavar="IMAGE|RECIPE",
            help="Image to push (its local tags in this repository are pushed); with --promote, the recipe "
            "whose pushed content tag is promoted.",
        ),
        reports: list[Path] = typer.Option(
            [],
            "--reports",
            metavar="DIR",
            help="Folder `rocmstack validate IMAGE` wrote, or a folder of such folders; repeat per arch leg.",
        ),
        engine: str = CONTAINER_ENGINE("auto"),
        accept_skipped: list[str] = typer.Option(
            [],
            "--accept-skipped",
            metavar="ID",
            help="Also accept a report where this doctor check was skipped (repeat).",
        ),
        dry_run: bool = DRY_RUN(False),
        promote: bool = PROMOTE(False),
        gpu_arch: str | None = ARCH_OPT,
        overrides: list[str] = SET_OPT,
        registry: str | None = REGISTRY_OPT,
        aliases: list[str] = ALIAS_OPT,
        ignore_rules: list[str] = IGNORE_OPT,
        patches_dir: Path | None = PATCHES_DIR_OPT,
        insecure: bool = INSECURE_OPT,
        sign_key: Path | None = SIGN_OPT,
        sign_passphrase: Path | None = SIGN_PASSPHRASE_OPT,
        json_out: bool = JSON_OPT,
        report_old: list[Path] = PUBLISH_REPORT_OLD,
        allow_skip_old: list[str] = ALLOW_SKIP_OLD,
    ) -> None:
        """Push IMAGE's tags only when every arch it claims has a passing GPU report made from this image."""
        report = renamed(reports, report_old, "--report", "--reports")
        allow_skip = renamed(accept_skipped, allow_skip_old, "--allow-skip", "--accept-skipped")
        signing = signer(sign_key, sign_passphrase)
        if promote:
            if dry_run:
                raise InputError("--dry-run is for publishing an IMAGE, not for --promote")
            from rocmstack.build.recipe_tags import TagRequest, print_tags
            from rocmstack.publish.promote import promote_recipe

            request = TagRequest(
                recipe=target,
                gpu_arch=gpu_arch,
                overrides=tuple(overrides),
                registry=registry,
                aliases=tuple(aliases),
                ignore_rules=tuple(ignore_rules),
                patches_dir=patches_dir,
            )
            tags, render_hash, promoted = promote_recipe(
                request,
                reports=report,
                allow_skip=allow_skip,
                insecure=insecure,
                engine=engine,
                signing=signing,
            )
            print_tags(tags, render_hash, json_out=json_out, promoted=promoted)
            return
        recipe_opts = {
            "--gpu-arch": gpu_arch,
            "--set": overrides,
            "--registry": registry,
            "--alias": aliases,
            "--ignore-rule": ignore_rules,
            "--patches-dir": patches_dir,
            "--insecure-registry": insecure,
        }
        given = [name for name, value in recipe_opts.items() if value]
        if given:
            raise InputError(f"{', '.join(given)}: for --promote RECIPE", fix="add --promote, or drop them")
        if not report:
            raise InputError(
                "publish needs --reports DIR: the validation reports of IMAGE",
                fix="pass the folder(s) `rocmstack validate IMAGE --report DIR` wrote, once per arch leg",
            )
        publish_image(
            image=target,
            report=report,
            engine=engine,
            allow_skip=allow_skip,
            dry_run=dry_run,
            json_out=json_out,
            signing=signing,
        )


def publish_image(
    *,
    image: str,
    report: list[Path],
    engine: str,
    allow_skip: list[str],
    dry_run: bool,
    json_out: bool,
    signing: Signer | None = None,
) -> None:
    from rocmstack.output import print_json, stderr, stdout
    from rocmstack.publish import gate
    from rocmstack.publish.promote import accepted_skips

    gate.check_engine_choice(engine)
    allowed = accepted_skips(allow_skip)
    loaded = gate.load_reports(report)
    console = stderr() if json_out else stdout()
    result = gate.publish(
        image=image,
        reports=loaded,
        engine_choice=engine,
        dry_run=dry_run,
        console=console,
        allow_skip=allowed,
        signing=signing,
    )
    if json_out:
        print_json(result)
        return
    if dry_run:
        console.print(
            f"gate open for {image} (render hash {result['render_hash'][:12]}, validated on "
            f"{', '.join(result['validated_archs'])}); would push:"
        )
        for ref in result["refs"]:
            console.print(f"  {ref}" + ("  (immutable, guarded)" if ref in result["immutable"] else ""))
        if signing:
            console.print(f"and would sign its digest ({signing.describe()})")
    else:
        console.print(
            f"published {image}: {sum(p['pushed'] for p in result['pushed'])} pushed, "
            f"{sum(not p['pushed'] for p in result['pushed'])} already there"
        )
        for signed in result.get("signed", []):
            console.print(f"signed {signed['ref']} ({signed['tool']}, key {signed['key']})")
