"""CLI: ``rocmstack diff`` and ``rocmstack base-freeze``."""

from __future__ import annotations

from pathlib import Path

import typer

from rocmstack.options import ARCH_OPT, CONTAINER_ENGINE, JSON_OPT, MARKDOWN, PATCHES_DIR_OPT


def _console():
    import sys

    from rocmstack.output import console

    # Piped output (CI logs, PR comments) gets a wide table: names and commits are never cut.
    return console(highlight=False, width=None if sys.stdout.isatty() else 200)


def register(app: typer.Typer) -> None:
    @app.command("diff")
    def diff_cmd(
        a: str = typer.Argument(..., help="A lock file (.lock.json), a recipe (name or .yaml) or an image"),
        b: str = typer.Argument(..., help="The same kinds as A"),
        gpu_arch: str | None = ARCH_OPT,
        engine: str | None = CONTAINER_ENGINE(None, detail="Here: for the arguments that are images."),
        md: bool = MARKDOWN(False),
        patches_dir: Path | None = PATCHES_DIR_OPT,
        json_out: bool = JSON_OPT,
    ) -> None:
        """What changed from A to B: packages added/removed/up/down, git commits, pins, env, patches, base."""
        from rich.markup import escape
        from rich.table import Table

        from rocmstack.build.diff import _SYMBOL, diff, load_side, markdown
        from rocmstack.output import print_json

        sides = [load_side(x, gpu_arch=gpu_arch, engine=engine, patches_dir=patches_dir) for x in (a, b)]
        result = diff(*sides)
        if json_out:
            print_json(result.to_json())
            return
        if md:
            typer.echo(markdown(result), nl=False)
            return
        out = _console()
        counts = result.to_json()["summary"]
        title = escape(
            f"{a} -> {b}: " + (", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no changes")
        )
        # The summary is a line of its own, never wrapped nor padded: as the table's title it was wrapped
        # to the table's width (39 columns when nothing changed) and padded with spaces to it.
        out.print(title, soft_wrap=True)
        if result.changes:
            table = Table("section", "name", "change", "old", "new")
            for c in result.changes:
                table.add_row(
                    c.section,
                    c.name,
                    f"{_SYMBOL[c.change]} {c.change}",
                    escape(c.old or ""),
                    escape(c.new or ""),
                )
            out.print(table)
        for note in result.notes:
            out.print(escape(note), style="dim")

    @app.command("base-freeze")
    def base_freeze_cmd(
        image: str = typer.Argument(..., help="Base image (local store of the engine; pulled beforehand)"),
        engine: str = CONTAINER_ENGINE("auto"),
        write: Path | None = typer.Option(
            None, "--write", help="Put the result into this recipe's base.provides (atomically, validated)"
        ),
        json_out: bool = JSON_OPT,
    ) -> None:
        """Read the Python distributions IMAGE really has (name, version, requirements) as base.provides."""
        from rocmstack.output import print_json, stderr, warn
        from rocmstack.recipe.load import dump_yaml
        from rocmstack.resolver.freeze import provides, read_dists, write_into

        stderr().print(f"reading the Python distributions of {image} ...", style="dim", markup=False)
        data = read_dists(image, engine)
        items, notes = provides(data)
        for note in notes:
            warn(note)
        if write is not None:
            write_into(write, items, image)
        if json_out:
            print_json({"image": image, "python": data.get("python"), "provides": items, "notes": notes})
        elif write is not None:
            typer.echo(f"{write}: base.provides <- {len(items)} distributions of {image}")
        else:
            typer.echo(dump_yaml({"provides": items}, sort_keys=False, width=1000), nl=False)
