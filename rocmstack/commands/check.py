"""``rocmstack check``: every rule, known-bad version, the resolver (and, asked, every patch) against a
recipe's resolved pins."""

from __future__ import annotations

from pathlib import Path

import typer

from rocmstack.options import (
    ADVISORIES_DIR_OPT,
    ALL_RECIPES_OPT,
    ARCH_OPT,
    IGNORE_OPT,
    JSON_OPT,
    PATCHES_DIR_OPT,
    RECIPE_ARG_OPTIONAL,
    SET_OPT,
)


def register(app: typer.Typer) -> None:
    @app.command("check")
    def check_cmd(
        recipe: str | None = RECIPE_ARG_OPTIONAL,
        gpu_arch: str | None = ARCH_OPT,
        overrides: list[str] = SET_OPT,
        ignore: list[str] = IGNORE_OPT,
        every: bool = ALL_RECIPES_OPT,
        offline: bool = typer.Option(
            False, "--offline", help="Check against the lock only; do not run the resolver (no network)"
        ),
        patches_dir: Path | None = PATCHES_DIR_OPT,
        advisories_dir: list[Path] = ADVISORIES_DIR_OPT,
        try_patches: bool = typer.Option(
            False,
            "--patches",
            help="Also try every patch on its component's pinned source, as `rocmstack patch test` does "
            "(downloads wheels, fetches git trees): a patch that no longer applies fails the check",
        ),
        json_out: bool = JSON_OPT,
    ) -> None:
        """Evaluate every compatibility rule, the known-bad versions and the resolver against the resolved pins;
        exit 1 if any fails.

        The resolver (uv, cached) resolves every pip layer for the image's platform: an unsatisfiable set
        fails with the conflict in one line and uv's explanation below; a lock that no longer matches what it
        resolves is drift. --offline compares with the lock only."""
        from rocmstack.output import print_json, quiet
        from rocmstack.rules.checking import CheckRequest, first_failure, print_checks, run_check

        runs = run_check(
            CheckRequest(
                recipe=recipe,
                gpu_arch=gpu_arch,
                overrides=tuple(overrides),
                ignore=tuple(ignore),
                every=every,
                offline=offline,
                patches_dir=patches_dir,
                advisories_dirs=tuple(advisories_dir),
                try_patches=try_patches,
            )
        )
        failure = first_failure(runs)
        if json_out:
            print_json([run.to_json() for run in runs])
            if failure is not None:
                raise typer.Exit(1)
            return
        print_checks(runs, overview=every, hush=quiet())
        if failure is not None:
            raise failure
