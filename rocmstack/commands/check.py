"""``rocmstack check``: every rule, known-bad version, the resolver (and, asked, every patch) against a
recipe's resolved pins."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from rocmstack.patch_trial import Trial

_STYLE = {"pass": "green", "fail": "bold red", "warn": "yellow", "skip": "magenta"}


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
        from rich.markup import escape
        from rich.table import Table

        from rocmstack.advisories.load import load_all
        from rocmstack.errors import InputError, RuleFailure
        from rocmstack.output import console, print_json, print_table, quiet
        from rocmstack.patches import chosen_patches_dir, load_patches
        from rocmstack.rules.advisory_rows import advisory_results
        from rocmstack.rules.engine import evaluate_rules, load_rules
        from rocmstack.rules.patch_rows import patch_rows
        from rocmstack.rules.resolver_row import resolver_result
        from rocmstack.rules.targets import targets

        rules = load_rules()
        advisories = load_all(advisories_dir)
        # --ignore-rule advisory:<id> leaves out a known-bad version the lab accepts
        ignored_advisories = {i for i in ignore if i.startswith("advisory:")}
        unknown = sorted(ignored_advisories - {f"advisory:{a.id}" for a in advisories})
        if unknown:
            raise InputError(
                f"--ignore-rule {unknown[0]}: no such advisory", fix="see `rocmstack advisories`"
            )
        ignore = [i for i in ignore if i not in ignored_advisories]
        runs = []
        tried: dict[str, list[Trial]] = {}
        details: dict[str, str] = {}
        for r in targets(recipe, gpu_arch, every, overrides):
            # Each recipe's own folder (--all may mix them); --patches-dir wins for all.
            patches = load_patches(chosen_patches_dir(r.recipe, r.source, patches_dir))
            results = evaluate_rules(r, ignore=ignore, rules=rules, patches=patches)
            results += [x for x in advisory_results(r, advisories) if x.id not in ignored_advisories]
            if try_patches:
                results += patch_rows(r, patches, tried)
            row, detail = resolver_result(r, offline=offline)
            if detail:
                details[f"{r.recipe.name} [{r.arch_list}]"] = detail
            runs.append((r, [*results, row]))
        failed = [(r, x) for r, results in runs for x in results if x.status == "fail"]
        if json_out:
            print_json(
                [
                    {
                        "recipe": r.recipe.name,
                        "gpu_archs": list(r.gpu_archs),
                        "overrides": list(r.overrides),
                        "ok": not any(x.status == "fail" for x in results),
                        "results": [x.to_json() for x in results],
                    }
                    for r, results in runs
                ]
            )
            if failed:
                raise typer.Exit(1)
            return
        # Piped output (CI logs) gets a wide table instead of rich's 80-column default.
        out = console(highlight=False, width=None if sys.stdout.isatty() else 200)
        hush = quiet()
        for resolved, results in runs:
            title = escape(f"{resolved.recipe.name} [{resolved.arch_list}]")
            counts = {s: sum(1 for x in results if x.status == s) for s in _STYLE}
            summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
            # --all is a CI overview: only the rows that need attention, one summary line per recipe x archs.
            # -q hides warnings: only the failures, and the counts in the summary line.
            if hush:
                shown = [x for x in results if x.status == "fail"]
            else:
                shown = [x for x in results if x.status != "pass"] if every else results
            if (every or hush) and not shown:
                out.print(f"{title}: {summary}")
                continue
            table = Table(
                title=f"{title}: {summary}" if every or hush else title, title_justify="left", expand=True
            )
            table.add_column("rule", no_wrap=True)
            table.add_column("status", no_wrap=True)
            for name, ratio in (("reason", 4), ("fix", 3)):
                table.add_column(name, overflow="fold", ratio=ratio)
            table.add_column("source", no_wrap=True)  # a URL: never cut
            for x in shown:
                # Passing rows get a shortened reason; --json always has the full text.
                reason = (
                    x.reason if x.status != "pass" else textwrap.shorten(x.reason, 72, placeholder=" ...")
                )
                table.add_row(
                    x.id,
                    f"[{_STYLE[x.status]}]{x.status}[/]",
                    escape(reason),
                    escape(x.fix) if x.status != "pass" else "",
                    x.source,
                )
            print_table(table, out)
            if not (every or hush):
                out.print(summary)
        if failed:
            resolved, first = failed[0]
            more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
            raise RuleFailure(
                f"{resolved.recipe.name} [{resolved.arch_list}]: rule {first.id} failed: {first.reason}{more}",
                fix=first.fix,
                detail=details.get(f"{resolved.recipe.name} [{resolved.arch_list}]")
                if first.id == "resolver"
                else None,
            )
