"""CLI: ``rocmstack check``, ``rocmstack lock`` and ``rocmstack outdated``."""

from __future__ import annotations

import shlex
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from rocmstack.options import (
    ADVISORIES_DIR_OPT,
    ARCH_OPT,
    IGNORE_OPT,
    JSON_OPT,
    PATCHES_DIR_OPT,
    RECIPE_ARG,
    RECIPE_ARG_OPTIONAL,
    SET_OPT,
)

if TYPE_CHECKING:
    from rocmstack.patch_trial import Trial
    from rocmstack.patches import Patch
    from rocmstack.recipe.resolve import Resolved
    from rocmstack.rules.engine import Result

ALL_OPT = typer.Option(
    False,
    "--all",
    help="Every recipe of --recipes-dir (and $ROCMSTACK_RECIPES_PATH) when given, else every shipped one, "
    "x its default arch sets",
)

_STYLE = {"pass": "green", "fail": "bold red", "warn": "yellow", "skip": "magenta"}


def _one_or_all(recipe: str | None, every: bool, command: str) -> None:
    from rocmstack.errors import InputError

    if every == bool(recipe):
        raise InputError(
            "give a RECIPE or --all (not both, not neither)",
            fix=f"e.g. rocmstack {command} verl-0.9.0-rocm10",
        )


def _targets(recipe: str | None, gpu_arch: str | None, every: bool, overrides: list[str]) -> list[Resolved]:
    """[(resolved)] for one recipe (one arch set) or every recipe on the search path (what ``recipes``
    lists: --recipes-dir, $ROCMSTACK_RECIPES_PATH and the shipped ones) x its default arch sets."""
    from rocmstack.errors import InputError
    from rocmstack.lock.file import arch_key, default_arch_sets
    from rocmstack.recipe.load import load_every, load_recipe, recipes_for_all
    from rocmstack.recipe.resolve import resolve

    _one_or_all(recipe, every, "check")
    if every and (gpu_arch or overrides):
        raise InputError(
            "--all checks every listed recipe as written", fix="drop --gpu-arch/--set, or name one recipe"
        )
    out = []
    # By path: the very file `recipes` lists under that name, never another one a name would find; every
    # broken one is named at once.
    files = [str(p) for p in recipes_for_all().values()] if every else [str(recipe)]
    for model, path in load_every(files, overrides) if every else [load_recipe(files[0], overrides)]:
        sets = [gpu_arch] if gpu_arch or not every else [arch_key(s) for s in default_arch_sets(model)]
        out += [resolve(model, path, s, tuple(overrides)) for s in sets]
    return out


def _lock_row(name: str, archs: str, entry: dict, dest: Path) -> dict:
    return {
        "recipe": name,
        "gpu_archs": archs,
        "render_hash": entry["render_hash"],
        "lock": str(dest),
        "packages": len(entry.get("packages", ())),
        "git": {k: v["commit"] for k, v in entry.get("git", {}).items()},
        "unresolved": entry.get("unresolved", []),
        "rules": {s: sum(1 for r in entry["rules"] if r["status"] == s) for s in _STYLE},
    }


def _in_installed_package(path: Path) -> bool:
    resolved = path.resolve()
    return "_data" in resolved.parts and "site-packages" in str(resolved)


def check_all_shipped() -> list[tuple[str, str, list]]:
    """Every listed recipe x its default arch sets, evaluated (the benchmarked path of ``check --all``)."""
    from rocmstack.patches import load_patches
    from rocmstack.rules.engine import evaluate_rules, load_rules

    rules, patches = load_rules(), load_patches()
    return [
        (r.recipe.name, r.arch_list, evaluate_rules(r, rules=rules, patches=patches))
        for r in _targets(None, None, True, [])
    ]


# A patch's trial as a check row: applies -> pass, fails -> fail, not fetched -> warn (no verdict either way),
# skipped (it acts on the built image's files) -> skip.
_TRIAL_STATUS = {"applies": "pass", "fails": "fail", "unfetched": "warn", "skipped": "skip"}


def _patch_rows(resolved: Resolved, patches: dict[str, Patch], tried: dict[str, list[Trial]]) -> list[Result]:
    """``check --patches``: every patch of the recipe tried on its component's pinned source, as ``patch test``
    does; one trial per recipe however many arch sets --all checks (the sources are the same)."""
    from rocmstack.lock.file import arch_key, entry_of, lock_path
    from rocmstack.patch_trial import trial
    from rocmstack.patches import select
    from rocmstack.rules.engine import Result
    from rocmstack.status import Status

    recipe = resolved.recipe
    key = str(resolved.source)
    if key not in tried:
        chosen = select(recipe.patches, patches, dict(recipe.components), key)
        entry = entry_of(lock_path(resolved.source), arch_key(resolved.gpu_archs))
        tried[key] = trial(resolved, chosen, entry, lambda line: print(line, file=sys.stderr))
    name = shlex.quote(resolved.recipe.name)
    fixes = {
        "fails": "rebase it on the component's pinned source; `rocmstack patch test {r} --only {p}` names each hunk",
        "unfetched": "run where the source is reachable, or through a mirror (git's url.<mirror>.insteadOf)",
    }
    return [
        Result(
            id=f"patch:{t.patch}",
            status=Status(_TRIAL_STATUS[t.status]),
            reason=f"applies to {t.source}" if t.status == "applies" else t.reason,
            fix=fixes.get(t.status, "").format(r=name, p=t.patch),
            source="rocmstack patch test",
        )
        for t in tried[key]
    ]


def register(app: typer.Typer) -> None:
    @app.command("check")
    def check_cmd(
        recipe: str | None = RECIPE_ARG_OPTIONAL,
        gpu_arch: str | None = ARCH_OPT,
        overrides: list[str] = SET_OPT,
        ignore: list[str] = IGNORE_OPT,
        every: bool = ALL_OPT,
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
        from rocmstack.rules.resolver_row import resolver_result

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
        for r in _targets(recipe, gpu_arch, every, overrides):
            # Each recipe's own folder (--all may mix them); --patches-dir wins for all.
            patches = load_patches(chosen_patches_dir(r.recipe, r.source, patches_dir))
            results = evaluate_rules(r, ignore=ignore, rules=rules, patches=patches)
            results += [x for x in advisory_results(r, advisories) if x.id not in ignored_advisories]
            if try_patches:
                results += _patch_rows(r, patches, tried)
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

    @app.command("lock")
    def lock_cmd(
        recipe: str | None = RECIPE_ARG_OPTIONAL,
        names: list[str] = typer.Argument(
            None, help="With --refresh: only these components / packages move (default: all)"
        ),
        gpu_arch: str | None = ARCH_OPT,
        ignore: list[str] = IGNORE_OPT,
        every: bool = ALL_OPT,
        refresh: bool = typer.Option(
            False, "--refresh", help="Move floating git refs and version ranges to what upstream has now"
        ),
        out_dir: Path | None = typer.Option(
            None, "--out-dir", help="Write <name>.lock.json here instead of next to the recipe file"
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
    ) -> None:
        """Resolve and write <recipe>.lock.json: every Python package (version, hashes, layer) of every pip
        layer, every git component's commit, plus pins, base digest, rule results and render hash.

        Versions and commits already locked stay unless --refresh names them (or --refresh alone: all).
        Without --gpu-arch every default arch set is locked and stale entries are dropped. Nothing is
        written unless every entry resolved."""
        from rich.markup import escape

        from rocmstack.errors import InputError, NetworkError
        from rocmstack.lock.file import (
            arch_key,
            default_arch_sets,
            entry_of,
            left_unlocked,
            lock_path,
            write_lock,
        )
        from rocmstack.output import print_json, print_table, stderr, table, warn
        from rocmstack.prepare import lock_resolved, previous_entry, rehashed
        from rocmstack.recipe.load import load_every, load_recipe, recipes_for_all
        from rocmstack.recipe.resolve import recipe_arg, resolve
        from rocmstack.resolver.closure import closure

        _one_or_all(recipe, every, "lock")
        if names and not refresh:
            raise InputError(
                f"names given without --refresh: {', '.join(names)}",
                fix="add --refresh to move just those, or drop the names",
            )
        skipped: list[str] = []
        if every:
            # What `rocmstack recipes` lists; the installed package's own recipes (their locks ship with
            # it, not the user's to rewrite) only with --out-dir.
            targets = []
            for listed in recipes_for_all().values():
                if not out_dir and _in_installed_package(listed):
                    skipped.append(listed.stem)
                else:
                    targets.append(str(listed))
        else:
            targets = [str(recipe)]
        if skipped:
            warn(
                f"--all: not locked: {', '.join(skipped)}: recipes of the installed rocmstack package (their "
                "locks ship with it); pass --out-dir DIR to lock them there"
            )
        if every:
            load_every(targets)  # every broken recipe named before any is locked
        rows, writes = [], []
        for name in targets:
            model, path = load_recipe(name)
            dest = (out_dir / lock_path(path).name) if out_dir else lock_path(path)
            if not out_dir and _in_installed_package(path):
                raise InputError(
                    f"{model.name} is a recipe of the installed rocmstack package; its lock is not yours to rewrite",
                    fix="pass --out-dir DIR, or copy the recipe into your repository and lock that file",
                )
            sets = [gpu_arch] if gpu_arch else [arch_key(s) for s in default_arch_sets(model)]
            entries = {}
            for arch in sets:
                resolved = resolve(model, path, arch)
                if hash_only:
                    locked_entry = entry_of(dest, resolved.arch_list)
                    if locked_entry is None:
                        raise InputError(
                            f"--hash-only: {model.name} [{resolved.arch_list}] has no entry in {dest.name}",
                            fix=f"lock it first: rocmstack lock {recipe_arg(resolved)}",
                        )
                    entry = rehashed(resolved, locked_entry, patches_dir)
                    entries[resolved.arch_list] = entry
                    rows.append(_lock_row(model.name, resolved.arch_list, entry, dest))
                    continue
                # A child without a lock of its own starts from its parent's: it moves only what it changes.
                previous, started = previous_entry(resolved, dest)
                found = None
                if not pins_only:
                    if started and not refresh:
                        stderr().print(escape(f"{model.name} [{resolved.arch_list}]: {started}"), style="dim")
                    stderr().print(escape(f"resolving {model.name} [{resolved.arch_list}] ..."), style="dim")
                    # What the entry started from already left unlocked may stay so (a child of a
                    # shipped recipe locks offline from its parent's lock); any other remote must answer.
                    kept = () if refresh else left_unlocked(previous, model)
                    arch = f" --gpu-arch {shlex.quote(gpu_arch)}" if gpu_arch else ""
                    where = f" --out-dir {shlex.quote(str(out_dir))}" if out_dir else ""
                    again = f"rocmstack lock {recipe_arg(resolved)}{arch}{where} --allow-unreachable-git"
                    try:
                        found = closure(
                            resolved,
                            previous=previous,
                            refresh=(tuple(names) if names else True) if refresh else (),
                            allow_unreachable=allow_unreachable_git or bool(kept),
                        ).to_json()
                        missed = [
                            f"{n}: {g['url']} ({g['ref']}) did not answer"
                            for n, g in sorted(found["git"].items())
                            if g.get("commit") is None and n not in kept
                        ]
                        if missed and not allow_unreachable_git:
                            raise NetworkError(f"git remote of {missed[0]}")
                    except NetworkError as exc:
                        if not exc.message.startswith("git remote "):
                            raise
                        # The way on without that remote, as a command that runs as printed.
                        raise NetworkError(
                            f"{model.name}: {exc.message}",
                            fix=f"check the network and retry, or run `{again}` to leave it unlocked "
                            "(listed in the lock, built from its ref)",
                        ) from None
                    for note in found.get("unresolved", ()):
                        warn(f"{model.name}: not locked: {note}")
                entry = lock_resolved(resolved, ignore=ignore, closure=found, patches_dir=patches_dir)
                entries[resolved.arch_list] = entry
                rows.append(_lock_row(model.name, resolved.arch_list, entry, dest))
            writes.append((dest, model.name, entries))
        # Written only once every recipe resolved: a failure (or Ctrl-C) above leaves every lock as it was.
        for dest, name, entries in writes:
            if out_dir:
                out_dir.mkdir(parents=True, exist_ok=True)
            write_lock(dest, name, entries, replace=not gpu_arch)
        if json_out:
            print_json(rows)
            return
        tab = table(
            "recipe",
            "archs",
            "packages",
            "render hash",
            "rules",
            "lock file",
            keep=("recipe", "archs", "render hash", "lock file"),
        )
        for row in rows:
            rules = ", ".join(f"{n} {s}" for s, n in row["rules"].items() if n)
            tab.add_row(
                row["recipe"],
                row["gpu_archs"],
                str(row["packages"]),
                row["render_hash"][:16],
                rules,
                row["lock"],
            )
        print_table(tab)

    @app.command("outdated")
    def outdated_cmd(
        recipe: str = RECIPE_ARG,
        gpu_arch: str | None = typer.Option(None, "--gpu-arch", help="Lock entry to compare with"),
        no_resolve: bool = typer.Option(
            False, "--no-resolve", help="Judge a bump by the rules only (skip the resolver)"
        ),
        json_out: bool = JSON_OPT,
    ) -> None:
        """Newest upstream release of every pin (index JSON API; git tags where reachable) and what check
        would say with the pin bumped to it (rules, then the resolver on the bumped set)."""
        from rich.markup import escape
        from rich.table import Table

        from rocmstack.lock.file import arch_key, entry_of, lock_path
        from rocmstack.output import console, print_json, stderr
        from rocmstack.recipe.load import load_recipe
        from rocmstack.recipe.resolve import resolve
        from rocmstack.rules.outdated import outdated

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
        table = Table(title=escape(f"{model.name} [{resolved.arch_list}]"), title_justify="left")
        for column in ("component", "source", "pinned", "locked", "latest", "status", "if bumped"):
            table.add_column(column, overflow="fold")
        style = {"outdated": "yellow", "in-range": "cyan", "current": "green"}
        for r in rows:
            table.add_row(
                r.name,
                r.source,
                escape(r.pinned),
                escape(r.locked or ""),
                escape(r.latest or ""),
                f"[{style.get(r.status, 'dim')}]{r.status}[/]",
                escape(r.verdict),
            )
        # Piped output gets a wide table: names and commits are never cut.
        console(highlight=False, width=None if sys.stdout.isatty() else 200).print(table)
