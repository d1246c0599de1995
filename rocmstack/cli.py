"""The ``rocmstack`` command line: a thin typer layer. Each concern registers its own commands.

Command modules import their heavy dependencies (torch, ray, pydantic models) inside the command
body, so ``rocmstack doctor --fast`` starts quickly.
"""

from __future__ import annotations

import importlib
import sys

import typer

from rocmstack import __version__
from rocmstack.errors import ExitCode, RocmstackError

# One module per concern; each exposes ``register(app)``.
COMMAND_MODULES = (
    "rocmstack.recipe.commands",
    "rocmstack.build.commands",
    "rocmstack.doctor.commands",
    "rocmstack.bench.commands",
    "rocmstack.smoke.commands",
    "rocmstack.validate.commands",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"rocmstack {__version__}")
        raise typer.Exit()


def make_app() -> typer.Typer:
    app = typer.Typer(
        name="rocmstack",
        help="Build and validate ROCm images for RL post-training (verl, slime, vime).",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )

    @app.callback()
    def _root(
        version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    ) -> None:
        """Recipes -> deterministic Dockerfiles -> builds -> bring-up validation."""

    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)
    return app


def main(argv: list[str] | None = None) -> None:
    app = make_app()
    try:
        app(args=argv, prog_name="rocmstack")
    except RocmstackError as exc:
        sys.stderr.write(f"rocmstack: error: {exc.one_line()}\n")
        sys.exit(int(exc.exit_code))
    except KeyboardInterrupt:
        sys.stderr.write("rocmstack: interrupted\n")
        sys.exit(int(ExitCode.INTERRUPTED))
