"""CLI: ``rocmstack render``, and the gate-then-render step ``build`` and ``tags`` share."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from rocmstack.render.context import Rendered
    from rocmstack.rules.gate import Gate

RECIPE_ARG = typer.Argument(..., help="Recipe name (see `rocmstack recipes`) or path to a recipe .yaml")
ARCH_OPT = typer.Option(None, "--gpu-arch", help="GPU arch or ';'-list, e.g. gfx950 or 'gfx942;gfx950'")
SET_OPT = typer.Option(
    [], "--set", help="Override a field: component.field=value, base.python=3.12, env.NAME=value"
)
JSON_OPT = typer.Option(False, "--json", help="Machine-readable output")


def gate_and_render(
    recipe: str,
    gpu_arch: str | None,
    overrides: list[str],
    *,
    ignore: list[str],
    relock: bool,
    patches_dir: Path | None = None,
) -> tuple[Gate, Rendered, tuple[str, str], list[str]]:
    """What ``render``, ``build`` and ``tags`` run first: the gate (lock drift exit 2, then the rules exit 1),
    its warnings printed, then the render. Returns (gate, rendered, source revision, warnings)."""
    from rocmstack.output import warn
    from rocmstack.recipe.resolve import unverified_warnings
    from rocmstack.render.context import render, source_revision
    from rocmstack.rules.gate import gate

    checked = gate(recipe, gpu_arch, overrides, ignore=ignore, relock=relock, patches_dir=patches_dir)
    notes = [*unverified_warnings(checked.resolved.recipe), *checked.notes]
    for note in notes:
        warn(note)
    revision = source_revision()
    rendered = render(
        checked.resolved, ignored_rules=checked.ignored, patches_dir=patches_dir, revision=revision
    )
    return checked, rendered, revision, notes


def register(app: typer.Typer) -> None:
    @app.command("render")
    def render_cmd(
        recipe: str = RECIPE_ARG,
        gpu_arch: str | None = ARCH_OPT,
        overrides: list[str] = SET_OPT,
        output: Path = typer.Option(..., "-o", "--output", help="Folder for the build context"),
        ignore_rules: list[str] = typer.Option(
            [], "--ignore-rule", help="Override a failing rule (repeatable); recorded in the image labels"
        ),
        relock: bool = typer.Option(False, "--relock", help="Accept recipe changes: rewrite its lock entry"),
        json_out: bool = JSON_OPT,
    ) -> None:
        """Write a complete build context (Dockerfile + every file it COPYs) and print the render hash."""
        from rocmstack.output import print_json, stdout
        from rocmstack.render.context import write_context

        # Lock drift (exit 2) and compatibility rules (exit 1) are checked before anything is written.
        checked, rendered, _, warnings = gate_and_render(
            recipe, gpu_arch, overrides, ignore=ignore_rules, relock=relock
        )
        resolved = checked.resolved
        write_context(rendered, output)
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
            if checked.ignored:
                stdout().print(
                    f"ignored rules: {', '.join(checked.ignored)} (label dev.rocmstack.ignored-rules)"
                )
            stdout().print(rendered.render_hash)
