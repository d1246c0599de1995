"""The ``rocmstack`` command line: a thin typer layer. Each concern registers its own commands.

Command modules import their heavy dependencies (torch, ray, pydantic models) inside the command
body, so ``rocmstack doctor --fast`` starts quickly.
"""

from __future__ import annotations

import importlib
import sys
from typing import NoReturn

import typer

try:  # typer >= 0.2x vendors its own click; its exceptions are the ones raised
    from typer._click import exceptions as click
    from typer.exceptions import Abort
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as click
    from click.exceptions import Abort

from rocmstack import __version__
from rocmstack.errors import ExitCode, RocmstackError, printable

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


def make_app(modules: tuple[str, ...] = COMMAND_MODULES) -> typer.Typer:
    app = typer.Typer(
        name="rocmstack",
        help="Build and validate ROCm images for RL post-training (verl, slime, vime).",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )

    @app.callback()
    def _root(
        version: bool = typer.Option(
            False, "--version", callback=_version, is_eager=True, help="Print the version."
        ),
    ) -> None:
        """Recipes -> deterministic Dockerfiles -> builds -> bring-up validation."""

    for name in modules:
        importlib.import_module(name).register(app)
    return app


def _fail(message: str, code: ExitCode) -> NoReturn:
    sys.stderr.write(f"rocmstack: error: {printable(message)}\n")
    sys.exit(int(code))


def main(argv: list[str] | None = None, *, modules: tuple[str, ...] = COMMAND_MODULES) -> None:
    """The CLI; ``modules`` narrows it to some concerns (``python -m rocmstack.doctor`` on a host that lacks
    another concern's dependencies), with the same one-line errors and exit codes."""
    app = make_app(modules)
    try:
        # Not standalone: usage errors and I/O errors come back here and become one line, no panel or traceback.
        code = app(args=argv, prog_name="rocmstack", standalone_mode=False)
    except RocmstackError as exc:
        if exc.detail:
            sys.stderr.write(f"rocmstack: error: {exc.one_line()}\n{exc.detail.rstrip()}\n")
            sys.exit(int(exc.exit_code))
        _fail(exc.one_line(), exc.exit_code)
    except click.UsageError as exc:
        hint = f" (see: {exc.ctx.command_path} --help)" if exc.ctx else ""
        _fail(f"{exc.format_message()}{hint}", ExitCode.USAGE)
    except click.ClickException as exc:
        _fail(exc.format_message(), ExitCode.USAGE)
    except (KeyboardInterrupt, Abort):
        sys.stderr.write("rocmstack: interrupted\n")
        code = int(ExitCode.INTERRUPTED)
    except OSError as exc:
        # A path the user gave could not be read or written (the commands check the rest themselves).
        where = f": {exc.filename}" if exc.filename else ""
        _fail(f"{exc.strerror or exc}{where}", ExitCode.USAGE)
    sys.exit(code if isinstance(code, int) else 0)
