"""CLI: recipes, show, schema (``render`` is rocmstack.commands.render')."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from rocmstack.options import ARCH_OPT, JSON_OPT, OUTPUT, PATCHES_DIR_OPT, RECIPE_ARG, SET_OPT

if TYPE_CHECKING:
    from rocmstack.recipe.resolve import Resolved


def load_resolved(recipe: str, gpu_arch: str | None, overrides: list[str]) -> Resolved:
    from rocmstack.recipe.load import load_recipe
    from rocmstack.recipe.resolve import resolve

    model, path = load_recipe(recipe, overrides)
    return resolve(model, path, gpu_arch, tuple(overrides))


def _warn_unverified(resolved: Resolved) -> list[str]:
    from rocmstack.output import warn
    from rocmstack.recipe.resolve import unverified_warnings

    warnings = unverified_warnings(resolved.recipe)
    for line in warnings:
        warn(line)
    return warnings


def register(app: typer.Typer) -> None:
    @app.command("recipes")
    def recipes_cmd(json_out: bool = JSON_OPT) -> None:
        """List the recipes on the search path (--recipes-dir, $ROCMSTACK_RECIPES_PATH, the shipped ones).

        A file that does not load is listed as broken with its errors (exit 2 after the list, naming each)."""
        from rich.markup import escape

        from rocmstack.errors import RecipeError
        from rocmstack.output import print_json, print_table, table
        from rocmstack.recipe.load import (
            broken_recipes,
            load_recipe,
            problem_lines,
            recipes_on_path,
            shadowed,
        )
        from rocmstack.resources import recipes_dir

        rows: list[dict[str, Any]] = []
        broken: dict[str, RecipeError] = {}
        shipped_dir = recipes_dir().resolve()
        found = recipes_on_path()
        hidden = shadowed(found)
        for name, file in found.items():
            # where each came from: a lab's folder, or rocmstack's own; a lab's of a shipped name shadows it
            origin = {
                "origin": "shipped" if file.resolve().parent == shipped_dir else str(file.parent),
                **({"shadows": str(hidden[name])} if name in hidden else {}),
            }
            try:
                model, _ = load_recipe(str(file))
            except RecipeError as exc:
                # One broken file never hides the others: it is a row of its own, with its one-line error.
                broken[name] = exc
                rows.append(
                    {"name": name, "path": str(file), **origin, "error": "; ".join(problem_lines(exc))}
                )
                continue
            rows.append(
                {
                    "name": name,
                    "path": str(file),
                    **origin,
                    "description": model.description,
                    "base": f"{model.base.image}:{model.base.tag}",
                    "gpu_archs": list(model.gpu_archs),
                    "default_gpu_archs": list(model.default_gpu_archs),
                    "unverified": len(model.unverified),
                }
            )
        if json_out:
            print_json(rows)
        else:
            tab = table(
                "recipe",
                "from",
                "base",
                "archs (default)",
                "description",
                "unverified",
                keep=("recipe", "base", "archs (default)"),
            )
            for row in rows:
                if "error" in row:
                    tab.add_row(
                        escape(row["name"]),
                        escape(row["origin"]),
                        "[red]broken[/red]",
                        "",
                        escape(row["error"]),
                        "",
                    )
                    continue
                # The default set is what a build without --gpu-arch gets; it need not be every supported arch.
                origin_cell = escape(row["origin"]) + (
                    " [yellow](shadows the shipped one)[/yellow]" if "shadows" in row else ""
                )
                tab.add_row(
                    escape(row["name"]),
                    origin_cell,
                    row["base"],
                    f"{';'.join(row['gpu_archs'])} ({';'.join(row['default_gpu_archs'])})",
                    escape(row["description"]),
                    str(row["unverified"]),
                )
            print_table(tab)
        if broken:
            raise broken_recipes(broken)

    @app.command("show")
    def show_cmd(
        recipe: str = RECIPE_ARG,
        gpu_arch: str | None = ARCH_OPT,
        overrides: list[str] = SET_OPT,
        patches_dir: Path | None = PATCHES_DIR_OPT,
        json_out: bool = JSON_OPT,
    ) -> None:
        """Print the resolved pins of a recipe."""
        from rich.markup import escape

        from rocmstack.errors import printable
        from rocmstack.output import print_json, print_table, stdout, table, warn
        from rocmstack.patches import chosen_patches_dir, load_patches
        from rocmstack.recipe.model import LAYER_ORDER

        resolved = load_resolved(recipe, gpu_arch, overrides)
        warnings = _warn_unverified(resolved)
        r = resolved.recipe
        folder = chosen_patches_dir(r, resolved.source, patches_dir)
        known = load_patches(folder)
        for pid in r.patches:
            if pid not in known:  # check/render/build refuse it (patches-apply); show says so too
                where = (
                    f"in neither {folder} nor the shipped patches/"
                    if folder
                    else "not among the shipped patches/"
                )
                line = f"{r.name}: patch {pid} is {where}: check, render and build refuse it"
                warn(line)
                warnings.append(line)
        if json_out:
            print_json(
                {
                    "recipe": r.model_dump(mode="json", by_alias=True),
                    "gpu_archs": list(resolved.gpu_archs),
                    "pins": resolved.pins(),
                    "patches_dir": str(folder) if folder else None,  # None: the shipped patches/
                    "overrides": overrides,
                    "warnings": warnings,
                }
            )
            return
        out = stdout()
        out.print(f"[bold]{r.name}[/bold]: {r.description}")
        out.print(
            f"base {r.base.image}:{r.base.tag}{'@' + r.base.digest if r.base.digest else ''} "
            f"(ROCm {r.base.rocm}, Python {r.base.python}, torch {r.base.torch}); archs {resolved.arch_list}"
        )
        tab = table(
            "component",
            "layer",
            "source",
            "version",
            "ref / package",
            keep=("component", "version", "ref / package"),
        )
        unverified = set(r.unverified)
        for name, c in sorted(r.components.items(), key=lambda kv: (LAYER_ORDER.index(kv[1].layer), kv[0])):
            cells = {
                "name": escape(name),
                "version": escape(c.version or ""),
                "ref": escape(c.ref or c.package or ""),
            }
            for path in unverified:
                field = path.removeprefix(f"components.{name}.")
                if field != path:
                    # The mark goes beside the value that is unverified; any other field marks the row.
                    column = field if field in ("version", "ref") else "ref" if field == "package" else "name"
                    cells[column] += " [yellow](unverified)[/yellow]"
            tab.add_row(cells["name"], c.layer.value, c.source, cells["version"], cells["ref"])
        print_table(tab, out)
        where = f" (from {printable(folder)})" if folder else ""
        out.print(f"patches: {', '.join(r.patches) or 'none'}{where}")

    @app.command("schema")
    def schema_cmd(
        output: Path | None = OUTPUT(None, detail="Here: the schema file (default: stdout)."),
    ) -> None:
        """Print the recipe JSON Schema (for editors)."""
        from rocmstack.output import dumps
        from rocmstack.recipe.model import json_schema

        text = dumps(json_schema())
        if output:
            output.write_text(text, encoding="utf-8")
        else:
            typer.echo(text, nl=False)
