"""``rocmstack check`` as a domain call: every rule, known-bad version, the resolver (and, asked, every patch)
judged against each target recipe's resolved pins; its table, its JSON rows and its one-line failure."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocmstack.advisories.load import load_all
from rocmstack.errors import InputError, RuleFailure
from rocmstack.output import console, print_table
from rocmstack.patches import chosen_patches_dir, load_patches
from rocmstack.recipe.resolve import Resolved
from rocmstack.rules.advisory_rows import advisory_results
from rocmstack.rules.engine import Result, evaluate_rules, load_rules
from rocmstack.rules.patch_rows import patch_rows
from rocmstack.rules.resolver_row import resolver_result
from rocmstack.rules.targets import targets
from rocmstack.status import Status

if TYPE_CHECKING:
    from rocmstack.patch_trial import Trial

_STYLE = {"pass": "green", "fail": "bold red", "warn": "yellow", "skip": "magenta"}
ADVISORY = "advisory:"  # --ignore-rule advisory:<id> leaves out a known-bad version the lab accepts


@dataclass(frozen=True)
class CheckRequest:
    recipe: str | None = None
    gpu_arch: str | None = None
    overrides: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    every: bool = False
    offline: bool = False
    patches_dir: Path | None = None
    advisories_dirs: tuple[Path, ...] = ()
    try_patches: bool = False


@dataclass(frozen=True)
class RecipeCheck:
    """One recipe at one arch set, judged: its rows, the resolver's row last."""

    resolved: Resolved
    results: tuple[Result, ...]
    resolver_detail: str | None = None  # uv's explanation of an unsatisfiable set

    @property
    def title(self) -> str:
        return f"{self.resolved.recipe.name} [{self.resolved.arch_list}]"

    @property
    def passed(self) -> bool:
        return not any(x.status == Status.FAIL for x in self.results)

    def to_json(self) -> dict[str, Any]:
        return {
            "recipe": self.resolved.recipe.name,
            "gpu_archs": list(self.resolved.gpu_archs),
            "overrides": list(self.resolved.overrides),
            "passed": self.passed,
            "results": [x.to_json() for x in self.results],
        }


def run_check(request: CheckRequest) -> tuple[RecipeCheck, ...]:
    """Every target judged; InputError for an unknown advisory id, before any recipe is resolved."""
    rules = load_rules()
    advisories = load_all(request.advisories_dirs)
    ignored_advisories = {i for i in request.ignore if i.startswith(ADVISORY)}
    unknown = sorted(ignored_advisories - {f"{ADVISORY}{a.id}" for a in advisories})
    if unknown:
        raise InputError(f"--ignore-rule {unknown[0]}: no such advisory", fix="see `rocmstack advisories`")
    ignore = [i for i in request.ignore if i not in ignored_advisories]
    runs = []
    tried: dict[str, list[Trial]] = {}
    for r in targets(request.recipe, request.gpu_arch, request.every, list(request.overrides)):
        # Each recipe's own folder (--all may mix them); --patches-dir wins for all.
        patches = load_patches(chosen_patches_dir(r.recipe, r.source, request.patches_dir))
        results = evaluate_rules(r, ignore=ignore, rules=rules, patches=patches)
        results += [x for x in advisory_results(r, advisories) if x.id not in ignored_advisories]
        if request.try_patches:
            results += patch_rows(r, patches, tried)
        row, detail = resolver_result(r, offline=request.offline)
        runs.append(RecipeCheck(r, (*results, row), detail or None))
    return tuple(runs)


def first_failure(runs: Sequence[RecipeCheck]) -> RuleFailure | None:
    """The run's one-line failure (the first failing row, and how many more), or None when all passed."""
    failed = [(run, x) for run in runs for x in run.results if x.status == Status.FAIL]
    if not failed:
        return None
    run, first = failed[0]
    more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
    return RuleFailure(
        f"{run.title}: rule {first.id} failed: {first.reason}{more}",
        fix=first.fix,
        detail=run.resolver_detail if first.id == "resolver" else None,
    )


def print_checks(runs: Sequence[RecipeCheck], *, overview: bool, hush: bool) -> None:
    """A table per run. ``overview`` (--all, a CI overview): only the rows that need attention, one summary
    line for a run without any. ``hush`` (-q): only the failures, and the counts in the summary line."""
    from rich.markup import escape
    from rich.table import Table

    # Piped output (CI logs) gets a wide table instead of rich's 80-column default.
    out = console(highlight=False, width=None if sys.stdout.isatty() else 200)
    for run in runs:
        title = escape(run.title)
        counts = {s: sum(1 for x in run.results if x.status == s) for s in _STYLE}
        summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        if hush:
            shown = [x for x in run.results if x.status == Status.FAIL]
        else:
            shown = [x for x in run.results if x.status != Status.PASS] if overview else list(run.results)
        if (overview or hush) and not shown:
            out.print(f"{title}: {summary}")
            continue
        table = Table(
            title=f"{title}: {summary}" if overview or hush else title, title_justify="left", expand=True
        )
        table.add_column("rule", no_wrap=True)
        table.add_column("status", no_wrap=True)
        for name, ratio in (("reason", 4), ("fix", 3)):
            table.add_column(name, overflow="fold", ratio=ratio)
        table.add_column("source", no_wrap=True)  # a URL: never cut
        for x in shown:
            # Passing rows get a shortened reason; --json always has the full text.
            passing = x.status == Status.PASS
            reason = textwrap.shorten(x.reason, 72, placeholder=" ...") if passing else x.reason
            table.add_row(
                x.id,
                f"[{_STYLE[x.status]}]{x.status}[/]",
                escape(reason),
                "" if passing else escape(x.fix),
                x.source,
            )
        print_table(table, out)
        if not (overview or hush):
            out.print(summary)
