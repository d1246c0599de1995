"""CLI: build, tags, inspect, matrix."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import typer

from rocmstack.options import (
    ALIAS_OPT,
    ALLOW_SKIP_OLD,
    ARCH_OPT,
    CONTAINER_ENGINE,
    DRY_RUN,
    EXPECT_GPUS,
    GPU_ARCH,
    IGNORE_OPT,
    INSECURE,
    INSECURE_OPT,
    JSON_OPT,
    OUT_DIR_OLD,
    OUTPUT,
    PATCHES_DIR_OPT,
    PROMOTE,
    PUBLISH_REPORT_OLD,
    RECIPE_ARG,
    RECIPE_NAME,
    REGISTRY_OPT,
    RELOCK_OPT,
    SET_OPT,
    SIGN_OPT,
    SIGN_PASSPHRASE_OPT,
    renamed,
)

ENGINE_OPT = CONTAINER_ENGINE("auto")
LOCK_LIMIT = 16 << 20  # the most `inspect` reads of an image's lock.json


def register(app: typer.Typer) -> None:
    @app.command("build")
    def build_cmd(
        recipe: str = RECIPE_ARG,
        gpu_arch: str | None = ARCH_OPT,
        overrides: list[str] = SET_OPT,
        engine: str = ENGINE_OPT,
        push: bool = typer.Option(
            False, "--push", help="Push after a successful build (immutable tags are guarded)"
        ),
        push_tags: str = typer.Option(
            "all", "--push-tags", help="With --push: all, or content (the r-<hash> staging tag only)"
        ),
        insecure: bool = INSECURE_OPT,
        dry_run: bool = DRY_RUN(False),
        registry: str | None = REGISTRY_OPT,
        aliases: list[str] = ALIAS_OPT,
        builder: str | None = typer.Option(None, "--builder", help="docker buildx builder instance"),
        cache_from: list[str] = typer.Option(
            [], "--cache-from", help="Engine cache source (repeatable), e.g. type=registry,ref=..."
        ),
        cache_to: list[str] = typer.Option([], "--cache-to", help="Engine cache export (repeatable)"),
        base_from: str | None = typer.Option(
            None,
            "--base-from",
            metavar="SOURCE",
            help="Read the base image from a mirror (HOST/PATH: the recipe's digest is pulled from it) or an "
            "archive (dir:, oci:, oci-archive:, docker-archive:PATH); the recipe, its render hash and tags "
            "stay the same",
        ),
        no_cache: bool = typer.Option(
            False,
            "--no-cache",
            help="Run every step again, past the layer cache: a rebuild of one render gives the same image "
            "id (podman, buildah)",
        ),
        source: str | None = typer.Option(
            None, "--source-url", help="org.opencontainers.image.source (default: GitHub env or git origin)"
        ),
        output: Path = OUTPUT(
            Path("build/images"), detail="Here: the folder for contexts, logs and manifests."
        ),
        patches_dir: Path | None = PATCHES_DIR_OPT,
        ignore_rules: list[str] = IGNORE_OPT,
        relock: bool = RELOCK_OPT,
        sign_key: Path | None = SIGN_OPT,
        sign_passphrase: Path | None = SIGN_PASSPHRASE_OPT,
        json_out: bool = JSON_OPT,
        out_dir: Path | None = OUT_DIR_OLD,
    ) -> None:
        """Render the recipe and build the image: progress per step, a log file, a manifest, tags."""
        from rocmstack.build.pipeline import Options, execute, make_plan, print_plan, save_manifest
        from rocmstack.build.tags import tag_set
        from rocmstack.container import engine as engines
        from rocmstack.errors import EngineError, InputError, Interrupted
        from rocmstack.output import print_json, stderr, warn
        from rocmstack.prepare import prepare
        from rocmstack.publish import push as publish_push
        from rocmstack.publish.sign import pushed_digest, sign, signer
        from rocmstack.render.context import write_context

        if push_tags not in ("all", "content"):
            raise InputError(f"--push-tags {push_tags!r}: expected all or content")
        if dry_run and push:
            raise InputError(
                "--dry-run and --push together: a dry run pushes nothing", fix="drop one of them"
            )
        if sign_key and not push:
            raise InputError("--sign signs what --push pushes", fix="add --push, or drop --sign")
        signing = signer(sign_key, sign_passphrase)
        checked, rendered, revision, _ = prepare(
            recipe, gpu_arch, overrides, ignore=ignore_rules, relock=relock, patches_dir=patches_dir
        )
        resolved = checked.resolved
        tags = tag_set(resolved, rendered.render_hash, registry=registry, extra_aliases=tuple(aliases))
        note = None
        try:
            found = replace(engines.detect(engine, builder=builder), tls_verify=not insecure)
        except EngineError as exc:
            if not dry_run:
                raise
            # A dry run still shows the exact command: the podman form, with the reason no engine works.
            found = replace(engines.store_engine(engine, "(not usable here)"), builder=builder)
            note = exc.one_line()
        options = Options(
            out_dir=renamed(output, out_dir, "--out-dir", "--output"),
            cache_from=tuple(cache_from),
            cache_to=tuple(cache_to),
            source_url=source,
            push=push_tags if push else None,
            no_cache=no_cache,
            base_from=base_from,
        )
        plan = make_plan(
            resolved, rendered, tags, engine=found, engine_note=note, options=options, revision=revision
        )
        write_context(rendered, plan.context)
        for warning in plan.warnings:
            warn(warning)
        if dry_run:
            if json_out:
                print_json({"dry_run": True, **plan.as_dict()})
            else:
                from rocmstack.output import stdout

                print_plan(plan, stdout())
            return
        err = stderr()
        print_plan(plan, err)
        from rocmstack.signals import INTERRUPTS

        try:
            manifest = execute(plan, err, publish_push.push_tags)
        except INTERRUPTS as exc:
            # Say what state things are in: Ctrl-C as the one line of an Interrupted (exit 130); SIGTERM/SIGHUP
            # exit 128 + signal after the same line.
            said = f"build interrupted: the engine was stopped and nothing was tagged (log: {plan.log})"
            if isinstance(exc, KeyboardInterrupt):
                raise Interrupted(said) from None
            err.print(f"rocmstack: {said}", markup=False, highlight=False)
            raise
        if signing:
            content = plan.tags.ref(plan.tags.content)
            digest = pushed_digest(plan.engine, content, manifest["image"]["id"])
            manifest["tags"]["signed"] = [sign(signing, plan.engine, content, digest)]
            save_manifest(plan.manifest, manifest)
            err.print(f"signed {manifest['tags']['signed'][0]['ref']} ({signing.describe()})")
        if json_out:
            print_json(manifest)
            return
        cache = manifest["cache"]
        err.print(
            f"[green]built[/green] {manifest['image']['id'][:19]} in {manifest['duration_s']:.0f}s "
            f"(cache: {cache['hits']} hits, {cache['misses']} misses)"
        )
        for ref in manifest["tags"]["applied"]:
            typer.echo(ref)
        err.print(f"manifest: {plan.manifest}  log: {plan.log}")

    @app.command("tags")
    def tags_cmd(
        recipe: str = RECIPE_ARG,
        gpu_arch: str | None = ARCH_OPT,
        overrides: list[str] = SET_OPT,
        registry: str | None = REGISTRY_OPT,
        aliases: list[str] = ALIAS_OPT,
        ignore_rules: list[str] = IGNORE_OPT,
        patches_dir: Path | None = PATCHES_DIR_OPT,
        # Deprecated spelling of `rocmstack publish --promote`, kept hidden for one release.
        promote: bool = PROMOTE(False, hidden=True),
        reports: list[Path] = PUBLISH_REPORT_OLD,
        allow_skip: list[str] = ALLOW_SKIP_OLD,
        insecure: bool = INSECURE(False, hidden=True),
        engine: str = CONTAINER_ENGINE("auto", hidden=True),
        json_out: bool = JSON_OPT,
    ) -> None:
        """Print the tags a build would get: descriptive (immutable), content r-<hash> (immutable), aliases."""
        from rocmstack.build.recipe_tags import TagRequest, print_tags, recipe_tags
        from rocmstack.errors import InputError

        request = TagRequest(
            recipe=recipe,
            gpu_arch=gpu_arch,
            overrides=tuple(overrides),
            registry=registry,
            aliases=tuple(aliases),
            ignore_rules=tuple(ignore_rules),
            patches_dir=patches_dir,
        )
        if promote:
            from rocmstack.publish.promote import promote_recipe

            typer.echo(
                "note: 'rocmstack tags --promote' is deprecated; use 'rocmstack publish --promote'", err=True
            )
            tags, render_hash, promoted = promote_recipe(
                request,
                reports=reports,
                allow_skip=allow_skip,
                insecure=insecure,
                engine=engine,
            )
            print_tags(tags, render_hash, json_out=json_out, promoted=promoted)
            return
        if reports or allow_skip:
            raise InputError("--report and --allow-skip are for --promote", fix="add --promote, or drop them")
        tags, render_hash = recipe_tags(request)
        print_tags(tags, render_hash, json_out=json_out)

    @app.command("inspect")
    def inspect_cmd(
        image: str = typer.Argument(..., help="Image reference or id in the engine's local store"),
        engine: str = ENGINE_OPT,
        json_out: bool = JSON_OPT,
        sbom: bool = typer.Option(
            False, "--sbom", help="Print the image's SBOM (/opt/rocmstack/sbom.cdx.json, CycloneDX JSON)"
        ),
    ) -> None:
        """Read an image's provenance back: OCI + dev.rocmstack.* labels and /opt/rocmstack/lock.json."""
        import json

        from rocmstack.container import engine as engines
        from rocmstack.contract import LOCK_PATH, PROVENANCE_PREFIXES, RENDER_HASH_LABEL, SBOM_PATH
        from rocmstack.errors import CheckFailed, printable
        from rocmstack.output import print_json, stdout, warn

        # Everything below comes out of the image: read within a limit, and no control character (a
        # terminal escape) of it reaches the terminal.
        found = engines.detect(engine)
        info = engines.inspect_image(found, image)
        if sbom:
            data = engines.read_file(found, info["id"] or image, SBOM_PATH)
            if data is None:
                raise CheckFailed(
                    f"{image}: {SBOM_PATH} is missing (built before rocmstack wrote SBOMs, or not a "
                    "rocmstack image)",
                    fix="rebuild it with `rocmstack build`",
                )
            sys.stdout.write(printable(data.decode("utf-8", errors="replace"), keep="\n\t"))
            return
        raw = engines.read_file(found, image, LOCK_PATH, LOCK_LIMIT)
        try:
            lock = json.loads(raw) if raw else None
        except ValueError:
            lock = None
        labels = {k: v for k, v in sorted(info["labels"].items()) if k.startswith(PROVENANCE_PREFIXES)}
        problems = []
        if raw and not isinstance(lock, dict):
            lock = None
            problems.append(f"{LOCK_PATH} is not a JSON object")
        elif lock is None:
            problems.append(f"{LOCK_PATH} is missing: not a rocmstack image")
        elif lock.get("render_hash") != labels.get(RENDER_HASH_LABEL):
            problems.append(
                f"lock render hash {lock.get('render_hash')} differs from label {labels.get(RENDER_HASH_LABEL)}"
            )
        if json_out:
            print_json(
                {
                    "image": image,
                    "id": info["id"],
                    "repo_tags": info["repo_tags"],
                    "labels": labels,
                    "lock": lock,
                    "problems": problems,
                }
            )
        else:
            out = stdout()
            out.print(f"{printable(image)}  {printable(info['id'][:19])}", markup=False, highlight=False)
            for key, value in labels.items():
                out.print(f"  {printable(key)} = {printable(value)}", markup=False, highlight=False)
            if lock:
                comps = lock.get("components")
                shown = ", ".join(
                    f"{n} {c.get('version') or c.get('ref') or c.get('source')}"
                    for n, c in sorted(comps.items() if isinstance(comps, dict) else [])
                    if isinstance(c, dict)
                )
                archs = lock.get("gpu_archs")
                own = lock.get("rocmstack")
                line = (
                    f"  lock: recipe {lock.get('recipe')}, "
                    f"archs {';'.join(map(str, archs)) if isinstance(archs, list) else archs}, "
                    f"revision {own.get('revision') if isinstance(own, dict) else None}"
                )
                out.print(printable(line), markup=False, highlight=False)
                out.print(printable(f"  components: {shown}"), markup=False, highlight=False)
            for p in problems:
                warn(printable(p))
        if problems:
            raise CheckFailed(f"{image}: {problems[0]}")

    @app.command("matrix")
    def matrix_cmd(
        recipes: list[str] = RECIPE_NAME([]),
        gpu_archs: list[str] = GPU_ARCH([]),
        registry: str | None = REGISTRY_OPT,
        build_runner: str | None = typer.Option(
            None, "--build-runner", help="Comma-separated runner labels for builds"
        ),
        gpu_runner: str | None = typer.Option(
            None, "--gpu-runner", help="Comma-separated label prefix of GPU runners; the arch is appended"
        ),
        expect_gpus: int = EXPECT_GPUS(8),
        fmt: str = typer.Option(
            "github",
            "--format",
            help="github (matrix=<json> and legs=<json> lines for $GITHUB_OUTPUT) or json",
        ),
        patches_dir: Path | None = PATCHES_DIR_OPT,
    ) -> None:
        """Expand recipes x GPU archs into GitHub Actions matrices: images, and one validation leg per arch."""
        from rocmstack.build import matrix
        from rocmstack.errors import InputError
        from rocmstack.output import print_json

        if fmt not in ("github", "json"):
            raise InputError(f"--format {fmt!r}: expected github or json")
        entries = matrix.expand(
            recipes,
            gpu_archs,
            registry=registry,
            build_runner=matrix.parse_labels(build_runner, matrix.DEFAULT_BUILD_RUNNER, "--build-runner"),
            gpu_runner_prefix=matrix.parse_labels(gpu_runner, matrix.DEFAULT_GPU_RUNNER, "--gpu-runner"),
            expect_gpus=expect_gpus,
            patches_dir=patches_dir,
        )
        if fmt == "json":
            print_json(matrix.as_json(entries))
        else:
            typer.echo(matrix.github_output(entries))
