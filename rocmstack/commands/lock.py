"""``rocmstack lock`` and ``rocmstack outdated``: a recipe's pins resolved and written, and what upstream has
since."""

from __future__ import annotations

import shlex
import sys
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
from rocmstack.status import Status

# The counts a lock row shows, in this order (a lock's rules are never an error).
_RULE_COUNTS = [str(s) for s in (Status.PASS, Status.FAIL, Status.WARN, Status.SKIP)]


def _lock_row(name: str, archs: str, entry: dict, dest: Path) -> dict:
    return {
        "recipe": name,
        "gpu_archs": archs,
        "render_hash": entry["render_hash"],
        "lock": str(dest),
        "packages": len(entry.get("packages", ())),
        "git": {k: v["commit"] for k, v in entry.get("git", {}).items()},
        "unresolved": entry.get("unresolved", []),
        "rules": {s: sum(1 for r in entry["rules"] if r["status"] == s) for s in _RULE_COUNTS},
    }


def _in_installed_package(path: Path) -> bool:
    resolved = path.resolve()
    return "_data" in resolved.parts and "site-packages" in str(resolved)


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
        from rocmstack.rules.targets import one_or_all

        one_or_all(recipe, every, "lock")
        out_dir = renamed(output, out_dir_old, "--out-dir", "--output")
        if names and not refresh:
            raise InputError(
                f"names given without --refresh: {', '.join(names)}",
                fix="add --refresh to move just those, or drop the names",
            )
        skipped: list[str] = []
        if every:
            # What `rocmstack recipes` lists; the installed package's own recipes (their locks ship with
            # it, not the user's to rewrite) only with --output.
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
                "locks ship with it); pass --output DIR to lock them there"
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
                    fix="pass --output DIR, or copy the recipe into your repository and lock that file",
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
                    where = f" --output {shlex.quote(str(out_dir))}" if out_dir else ""
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
        gpu_arch: str | None = ARCH_OPT,
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
