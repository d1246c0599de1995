"""``rocmstack lock`` and ``rocmstack outdated``: a recipe's pins resolved and written, and what upstream has
since."""

from __future__ import annotations

from pathlib import Path

import typer

from rocmstack.options import (
    ALL_RECIPES_OPT,
    ARCH_OPT,
    IGNORE_OPT,
    JSON_OPT,
    OUT_DIR_OLD,
    OUTPUT,
    PATCHES_DIR_OPT,
    RECIPE_ARG,
    RECIPE_ARG_OPTIONAL,
    renamed,
)


def register(app: typer.Typer) -> None:
    @app.command("lock")
    def lock_cmd(
        recipe: str | None = RECIPE_ARG_OPTIONAL,
        names: list[str] = typer.Argument(
            None, help="With --refresh: only these components / packages move (default: all)"
        ),
        gpu_arch: str | None = ARCH_OPT,
        ignore: list[str] = IGNORE_OPT,
        every: bool = ALL_RECIPES_OPT,
        refresh: bool = typer.Option(
            False, "--refresh", help="Move floating git refs and version ranges to what upstream has now"
        ),
        output: Path | None = OUTPUT(
            None, detail="Here: the folder for <name>.lock.json (default: next to the recipe file)."
        ),
        pins_only: bool = typer.Option(
            False, "--pins-only", help="Record the recipe's pins and rules only; no resolver, no network"
        ),
        hash_only: bool = typer.Option(
            False,
            "--hash-only",
            help="Refresh only the render hash of each locked entry (templates, patches or rocmstack changed); "
            "nothing resolved, no network",
        ),
        allow_unreachable_git: bool = typer.Option(
            False,
            "--allow-unreachable-git",
            help="Leave components whose git remote is out of reach unlocked (listed in the lock) instead of failing "
            "(those the lock it starts from, its own or a child's parent's, left unlocked stay so without it)",
        ),
        patches_dir: Path | None = PATCHES_DIR_OPT,
        json_out: bool = JSON_OPT,
        out_dir_old: Path | None = OUT_DIR_OLD,
    ) -> None:
        """Resolve and write <recipe>.lock.json: every Python package (version, hashes, layer) of every pip
        layer, every git component's commit, plus pins, base digest, rule results and render hash.

        Versions and commits already locked stay unless --refresh names them (or --refresh alone: all).
        Without --gpu-arch every default arch set is locked and stale entries are dropped. Nothing is
        written unless every entry resolved."""
        from rich.markup import escape

        from rocmstack.locking import LockRequest, lock, print_locks
        from rocmstack.output import print_json, stderr

        rows = lock(
            LockRequest(
                recipe=recipe,
                every=every,
                gpu_arch=gpu_arch,
                names=tuple(names or ()),
                refresh=refresh,
                ignore=tuple(ignore),
                out_dir=renamed(output, out_dir_old, "--out-dir", "--output"),
                pins_only=pins_only,
                hash_only=hash_only,
                allow_unreachable_git=allow_unreachable_git,
                patches_dir=patches_dir,
            ),
            say=lambda line: stderr().print(escape(line), style="dim"),
        )
        if json_out:
            print_json(rows)
            return
        print_locks(rows)

    @app.command("outdated")
    def outdated_cmd(
        recipe: str = RECIPE_ARG,
        gpu_arch: str | None = ARCH_OPT,
        no_resolve: bool = typer.Option(
            False, "--no-resolve", help="Judge a bump by the rules only (skip the resolver)"
        ),
        json_out: bool = JSON_OPT,
    ) -> None:
        """Newest upstream release of every pin (index JSON API; git tags where reachable) and what check
        would say with the pin bumped to it (rules, then the resolver on the bumped set)."""
        from rich.markup import escape

        from rocmstack.lock.file import arch_key, entry_of, lock_path
        from rocmstack.output import print_json, stderr
        from rocmstack.recipe.load import load_recipe
        from rocmstack.recipe.resolve import resolve
        from rocmstack.rules.outdated import outdated, print_outdated

        model, path = load_recipe(recipe)
        resolved = resolve(model, path, gpu_arch)
        entry = entry_of(lock_path(path), arch_key(resolved.gpu_archs))
        if not json_out:
            stderr().print(
                escape(f"asking the index about {len(model.components)} pins of {model.name} ..."),
                style="dim",
            )
        rows = outdated(resolved, entry, resolve=not no_resolve)
        if json_out:
            print_json([r.to_json() for r in rows])
            return
        print_outdated(f"{model.name} [{resolved.arch_list}]", rows)
