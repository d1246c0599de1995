"""CLI: ``rocmstack render`` (the pipeline itself is rocmstack.prepare)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from rocmstack.options import (
    ALL_RECIPES_OPT,
    ARCH_OPT,
    IGNORE_OPT,
    JSON_OPT,
    OUTPUT,
    PATCHES_DIR_OPT,
    RECIPE_ARG_OPTIONAL,
    RELOCK_OPT,
    SET_OPT,
)

if TYPE_CHECKING:
    from rocmstack.render.context import Rendered


def write_into(rendered: Rendered, folder: Path) -> None:
    """write_context, an OS error named by the folder the user gave: the context is written into a hidden
    temporary folder beside it first, a path the user never typed and never sees again."""
    from rocmstack.errors import InputError, printable
    from rocmstack.render.context import write_context

    try:
        write_context(rendered, folder)
    except OSError as exc:
        raise InputError(
            f"-o {printable(folder)}: cannot write the build context there: {exc.strerror or exc}",
            fix="pick a writable folder on a file system with room, its name under 245 characters",
        ) from None


def register(app: typer.Typer) -> None:
    @app.command("render")
    def render_cmd(
        recipe: str | None = RECIPE_ARG_OPTIONAL,
        gpu_arch: str | None = ARCH_OPT,
        overrides: list[str] = SET_OPT,
        output: Path = OUTPUT(
            ..., detail="Here: the folder for the build context (--all: OUTPUT/<recipe>-<archs> for each)."
        ),
        ignore_rules: list[str] = IGNORE_OPT,
        relock: bool = RELOCK_OPT,
        every: bool = ALL_RECIPES_OPT,
        patches_dir: Path | None = PATCHES_DIR_OPT,
        json_out: bool = JSON_OPT,
    ) -> None:
        """Write a complete build context (Dockerfile + every file it COPYs) and print the render hash."""
        from rocmstack.errors import InputError
        from rocmstack.output import print_json, stdout
        from rocmstack.prepare import prepare

        if every == bool(recipe):
            raise InputError(
                "give a RECIPE or --all (not both, not neither)",
                fix="e.g. rocmstack render verl-0.9.0-rocm10 -o DIR",
            )
        if every:
            if gpu_arch or overrides or relock:
                raise InputError(
                    "--all renders every listed recipe as written and locked",
                    fix="drop --gpu-arch/--set/--relock, or name one recipe",
                )
            _render_all(output, ignore_rules, json_out, patches_dir)
            return
        assert recipe is not None
        # Lock drift (exit 2) and compatibility rules (exit 1) are checked before anything is written.
        checked, rendered, _, warnings = prepare(
            recipe, gpu_arch, overrides, ignore=ignore_rules, relock=relock, patches_dir=patches_dir
        )
        resolved = checked.resolved
        write_into(rendered, output)
        if json_out:
            print_json(
                {
                    "output": str(output),
                    "render_hash": rendered.render_hash,
                    "files": sorted(rendered.files),
                    "warnings": warnings,
                    "ignored_rules": list(checked.ignored),
                    "lock": {
                        "status": checked.lock.status,
                        "path": str(checked.lock.path),
                        "key": checked.lock.key,
                    },
                    "rules": [r.to_json() for r in checked.results],
                }
            )
        else:
            stdout().print(f"rendered {resolved.recipe.name} for {resolved.arch_list} -> {output}")
            if checked.lock.status == "unlocked":
                # Said on stdout too, beside the result: an unlocked build is not hash-checked, and the
                # warning alone is easily lost among the others.
                stdout().print(
                    f"UNLOCKED: no lock entry in {checked.lock.path.name} [{checked.lock.key}]: the build "
                    "installs by pip's resolver, not hash-checked; `rocmstack lock` first",
                    markup=False,
                )
            if checked.ignored:
                stdout().print(
                    f"ignored rules: {', '.join(checked.ignored)} (label dev.rocmstack.ignored-rules)"
                )
            stdout().print(rendered.render_hash)


def _render_all(output: Path, ignore: list[str], json_out: bool, patches_dir: Path | None = None) -> None:
    """``render --all``: what ``recipes`` lists x each default arch set, every one gated before any is
    written, each into ``output/<recipe>-<arch>-<arch>``."""
    from rocmstack.lock.file import arch_key, default_arch_sets
    from rocmstack.output import print_json, stdout
    from rocmstack.prepare import prepare
    from rocmstack.recipe.load import load_every, recipes_for_all

    done = []
    # Every broken recipe is named at once, before any is gated.
    for model, file in load_every(str(f) for f in recipes_for_all().values()):
        for archs in default_arch_sets(model):
            checked, rendered, _, _ = prepare(
                str(file), arch_key(archs), [], ignore=ignore, relock=False, patches_dir=patches_dir
            )
            done.append((checked, rendered, output / f"{model.name}-{'-'.join(archs)}"))
    for _, rendered, folder in done:
        write_into(rendered, folder)
    if json_out:
        print_json(
            [
                {
                    "recipe": c.resolved.recipe.name,
                    "gpu_archs": list(c.resolved.gpu_archs),
                    "output": str(folder),
                    "render_hash": r.render_hash,
                    "lock": c.lock.status,
                }
                for c, r, folder in done
            ]
        )
        return
    for c, r, folder in done:
        stdout().print(
            f"rendered {c.resolved.recipe.name} for {c.resolved.arch_list} -> {folder}  {r.render_hash}"
        )
