"""``rocmstack advisories [ID]``: the known-bad versions and error signatures rocmstack matches."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from rocmstack.errors import InputError, printable, quoted
from rocmstack.options import ADVISORIES_DIR_OPT, COMPONENT, JSON_OPT


def register(app: typer.Typer) -> None:
    @app.command("advisories")
    def advisories_cmd(
        advisory_id: str | None = typer.Argument(None, metavar="[ID]", help="Show this advisory whole."),
        component: str | None = COMPONENT(None),
        advisories_dir: list[Path] = ADVISORIES_DIR_OPT,
        json_out: bool = JSON_OPT,
    ) -> None:
        """List the advisories (shipped, then a lab's folders), filter them by component, or show one.

        `check` matches them against a recipe's pins before a build, `doctor` (known-advisories) against the
        node, and every failing doctor row and preflight log against their error signatures."""
        from rocmstack.advisories.load import load_all
        from rocmstack.advisories.model import COMPONENTS
        from rocmstack.output import print_json

        found = load_all(advisories_dir)
        if component is not None and component not in COMPONENTS:
            raise InputError(
                f"--component {quoted(component)} is not a component", fix=f"one of {', '.join(COMPONENTS)}"
            )
        if advisory_id is not None:
            one = next((a for a in found if a.id == advisory_id), None)
            if one is None:
                near = [a.id for a in found if advisory_id.split("-")[0] in a.id][:5]
                raise InputError(
                    f"no advisory {quoted(advisory_id)}",
                    fix=f"did you mean {', '.join(near)}?" if near else "see `rocmstack advisories`",
                )
            found = (one,)
        if component is not None:
            found = tuple(a for a in found if any(x.component == component for x in a.affects))
        if json_out:
            print_json([a.model_dump(mode="json") for a in found])
            return
        out = sys.stdout
        if advisory_id is not None:
            a = found[0]
            for key, value in a.model_dump(mode="json").items():
                shown = (
                    value
                    if isinstance(value, str)
                    else ", ".join(
                        f"{x['component']} {x['versions']}" if isinstance(x, dict) else str(x) for x in value
                    )
                    if isinstance(value, list)
                    else value
                )
                out.write(f"{key}: {printable(shown)}\n")
            return
        for a in found:
            affects = ", ".join(f"{x.component} {x.versions}" for x in a.affects)
            out.write(f"{a.id:<48} {a.severity:<4} {printable(affects)}\n    {printable(a.title)}\n")
        out.write(f"{len(found)} advisories\n")
