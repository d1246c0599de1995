"""CLI: ``rocmstack diff``, ``rocmstack outdated``, ``rocmstack base-freeze`` (registered by rules.commands)."""

from __future__ import annotations

import typer

JSON_OPT = typer.Option(False, "--json", help="Machine-readable output")
ENGINE_OPT = typer.Option(None, "--engine", help="Container engine for image arguments: podman or docker")


def register(app: typer.Typer) -> None:
    @app.command("diff")
    def diff_cmd(
        a: str = typer.Argument(..., help="A lock file (.lock.json), a recipe (name or .yaml) or an image"),
        b: str = typer.Argument(..., help="The same kinds as A"),
        gpu_arch: str | None = typer.Option(
            None, "--gpu-arch", help="Lock entry to compare (default: the widest arch set)"
        ),
        engine: str | None = ENGINE_OPT,
        md: bool = typer.Option(False, "--markdown", help="A Markdown table (for a PR comment)"),
        json_out: bool = JSON_OPT,
    ) -> None:
        """What changed from A to B: packages added/removed/up/down, git commits, pins, env, patches, base."""
        from rich.markup import escape
        from rich.table import Table

        from rocmstack.output import print_json, stdout
        from rocmstack.resolver.diff import _SYMBOL, diff, load_side, markdown

        result = diff(
            load_side(a, gpu_arch=gpu_arch, engine=engine), load_side(b, gpu_arch=gpu_arch, engine=engine)
        )
        if json_out:
            print_json(result.to_json())
            return
        if md:
            typer.echo(markdown(result), nl=False)
            return
        out = stdout()
        counts = result.to_json()["summary"]
        title = escape(
            f"{a} -> {b}: " + (", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no changes")
        )
        table = Table("section", "name", "change", "old", "new", title=title, title_justify="left")
        for c in result.changes:
            table.add_row(
                c.section, c.name, f"{_SYMBOL[c.change]} {c.change}", escape(c.old or ""), escape(c.new or "")
            )
        out.print(table)
        for note in result.notes:
            out.print(escape(note), style="dim")
