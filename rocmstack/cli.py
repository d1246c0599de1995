"""The ``rocmstack`` command line: a thin typer layer. Each concern registers its own commands.

Command modules import their heavy dependencies (torch, ray, pydantic models) inside the command
body, so ``rocmstack doctor --fast`` starts quickly.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import signal
import sys
import warnings
from pathlib import Path
from typing import NoReturn

import typer

try:  # typer >= 0.2x vendors its own click; its exceptions are the ones raised
    from typer._click import exceptions as click
    from typer.exceptions import Abort
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as click  # type: ignore[no-redef]  # same classes, older home
    from click.exceptions import Abort  # type: ignore[assignment]  # same class, older home

from rocmstack import __version__
from rocmstack.errors import ExitCode, InputError, RocmstackError, printable, quoted
from rocmstack.options import bare_old_flags
from rocmstack.output import QUIET_ENV, ClosedPipe, PipeGuard
from rocmstack.resources import RECIPES_PATH_ENV

# One module per command or command group (rocmstack/commands/); each exposes ``register(app)``.
COMMAND_MODULES = tuple(
    f"rocmstack.commands.{name}"
    for name in (
        "recipe",
        "render",
        "check",
        "lock",
        "diff",
        "build",
        "doctor",
        "bench",
        "smoke",
        "validate",
        "publish",
        "preflight",
        "advisories",
        "soak",
        "patch",
    )
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"rocmstack {__version__}")
        raise typer.Exit()


def make_app(modules: tuple[str, ...] = COMMAND_MODULES) -> typer.Typer:
    app = typer.Typer(
        name="rocmstack",
        help="Build and validate ROCm images for RL post-training (recipes for verl and vime).",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )

    @app.callback()
    def _root(
        version: bool = typer.Option(
            False, "--version", callback=_version, is_eager=True, help="Print the version."
        ),
        recipe_dirs: list[Path] = typer.Option(
            [],
            "--recipes-dir",
            metavar="DIR",
            help=f"Also look up recipe names here (repeatable; before ${RECIPES_PATH_ENV}; "
            "the shipped recipes are always searched last)",
        ),
        quiet: bool = typer.Option(False, "-q", "--quiet", help="Hide warnings (errors still print)."),
    ) -> None:
        """Recipes -> deterministic Dockerfiles -> builds -> bring-up validation."""
        for folder in recipe_dirs:
            if not folder.is_dir():
                raise InputError(f"--recipes-dir {quoted(folder)} is not a folder", fix="check the path")
        if recipe_dirs:
            # The environment carries the search path to every command, and to the processes they start.
            rest = [p for p in os.environ.get(RECIPES_PATH_ENV, "").split(os.pathsep) if p]
            os.environ[RECIPES_PATH_ENV] = os.pathsep.join([*(str(d.resolve()) for d in recipe_dirs), *rest])
        if quiet:
            os.environ[QUIET_ENV] = "1"
            warnings.simplefilter("ignore")  # library warnings too (torch, ray); main() restores the filters
        if os.environ.get(RECIPES_PATH_ENV):
            _say_shadowed()

    for name in modules:
        importlib.import_module(name).register(app)
    _reflow_help(app)
    return app


def _say_shadowed() -> None:
    """Once a run: each recipe of the user's folders that shadows a shipped one (its children get it too)."""
    from rocmstack.output import warn
    from rocmstack.recipe.load import recipes_on_path, shadowed, shown_path

    try:
        found = recipes_on_path()
    except InputError:
        return  # a folder that is not one: the command that reads recipes says so, in one line
    for name in shadowed(found):
        warn(
            f"recipe {name} is {shown_path(found[name])}, which shadows the shipped recipe of that name (and "
            "every recipe that extends it gets this one); rename it to keep both"
        )


def reflow(text: str) -> str:
    """A help text as paragraphs: the line breaks of a docstring inside a paragraph become spaces, so the
    terminal wraps each paragraph at its own width (never a sentence broken where the source was). A line
    that starts a list item (``- ``) or is indented keeps its own line."""
    out = []
    for para in inspect.cleandoc(text).split("\n\n"):
        lines: list[str] = []
        for line in para.splitlines():
            if lines and not line.startswith(("- ", "* ", " ")):
                lines[-1] = f"{lines[-1]} {line.strip()}"
            else:
                lines.append(line.rstrip())
        out.append("\n".join(lines))
    return "\n\n".join(out)


def _reflow_help(app: typer.Typer) -> None:
    """Every command's and group's help text reflowed (``reflow``), in this app and the apps under it."""
    for command in app.registered_commands:
        text = command.help or inspect.getdoc(command.callback)
        if text:
            command.help = reflow(text)
    for group in app.registered_groups:
        if group.help:
            group.help = reflow(group.help)
        if group.typer_instance is not None:
            info = group.typer_instance.info
            if isinstance(info.help, str):
                info.help = reflow(info.help)
            _reflow_help(group.typer_instance)


# Options that belong to the whole program; accepted after the command too (`rocmstack show X -q`).
_GLOBAL_FLAGS = ("-q", "--quiet")
_GLOBAL_VALUE_OPTIONS = ("--recipes-dir",)


def _hoist_global_options(argv: list[str]) -> list[str]:
    """Move -q/--quiet and --recipes-dir DIR in front of the command, where the root callback reads them."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest += argv[i:]
            break
        if arg in _GLOBAL_FLAGS:
            front.append(arg)
        elif arg in _GLOBAL_VALUE_OPTIONS and i + 1 < len(argv):
            front += argv[i : i + 2]
            i += 1
        elif arg.split("=", 1)[0] in _GLOBAL_VALUE_OPTIONS:
            front.append(arg)
        else:
            rest.append(arg)
        i += 1
    return front + rest


def _command(argv: list[str]) -> str | None:
    """The command named after the hoisted global options (None: none, or an option such as --help)."""
    i = 0
    while i < len(argv) and (argv[i] in _GLOBAL_FLAGS or argv[i].split("=", 1)[0] in _GLOBAL_VALUE_OPTIONS):
        i += 2 if argv[i] in _GLOBAL_VALUE_OPTIONS else 1
    return argv[i] if i < len(argv) and not argv[i].startswith("-") else None


def _refuse_empty_values(argv: list[str]) -> None:
    """``--gpu-arch ""``, ``-o ""`` or ``inspect ""`` is a mistake (often an unset variable in a script),
    never a request for the default or for the current folder: refuse it before any command runs."""
    for i, arg in enumerate(argv):
        if arg == "--":
            return
        option = arg[:-1] if arg.startswith("--") and arg.endswith("=") else None
        if arg.strip() and not option:
            continue
        where = (
            f"{option}=" if option else f"after {printable(argv[i - 1])}" if i else "as the first argument"
        )
        raise InputError(
            f"empty value {quoted(arg) if not option else repr('')} ({where})",
            fix="leave an option out to get its default, or give a value",
        )


def _fail(message: str, code: ExitCode) -> NoReturn:
    sys.stderr.write(f"rocmstack: error: {printable(message)}\n")
    sys.exit(int(code))


def _closed_pipe() -> NoReturn:
    """The reader went away (``rocmstack ... | head -1``): that is not a failed check. Exit quietly with the
    shell's code for SIGPIPE; stdout is pointed at /dev/null so the interpreter's last flush cannot fail."""
    if isinstance(sys.stdout, PipeGuard):
        sys.stdout = sys.stdout._stream
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    sys.exit(128 + int(signal.SIGPIPE))


def main(argv: list[str] | None = None, *, modules: tuple[str, ...] = COMMAND_MODULES) -> None:
    """The CLI; ``modules`` narrows it to some concerns (``python -m rocmstack.doctor`` on a host that lacks
    another concern's dependencies), with the same one-line errors and exit codes."""
    # --recipes-dir and --quiet reach the commands through the environment: restored on the way out, so
    # one call of main() (a test, or an embedding program) never changes the next.
    saved = {name: os.environ.get(name) for name in (RECIPES_PATH_ENV, QUIET_ENV)}
    try:
        app = make_app(modules)  # imports every command module: Ctrl-C here is the same one line
        # Not standalone: usage errors and I/O errors come back here and become one line, no panel or traceback.
        args = _hoist_global_options(list(sys.argv[1:] if argv is None else argv))
        args = bare_old_flags(args, _command(args))
        _refuse_empty_values(args)
        with warnings.catch_warnings():
            sys.stdout = PipeGuard(sys.stdout)  # a stream in all but a closed pipe
            code = app(args=args, prog_name="rocmstack", standalone_mode=False)
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        if code == ExitCode.INTERRUPTED:
            # typer turns Ctrl-C into a silent Exit(130); a command that says where it stopped raises
            # Interrupted instead (its one line above).
            sys.stderr.write("rocmstack: interrupted\n")
    except (ClosedPipe, BrokenPipeError):
        _closed_pipe()
    except RocmstackError as exc:
        if exc.detail:
            sys.stderr.write(f"rocmstack: error: {exc.one_line()}\n{exc.detail.rstrip()}\n")
            sys.exit(int(exc.exit_code))
        _fail(exc.one_line(), exc.exit_code)
    except click.UsageError as exc:
        if not exc.format_message():
            # `rocmstack`, `rocmstack bench`: the help was printed; a command is missing (usage, exit 2).
            sys.exit(int(ExitCode.USAGE))
        hint = f" (see: {exc.ctx.command_path} --help)" if exc.ctx else ""
        _fail(f"{exc.format_message()}{hint}", ExitCode.USAGE)
    except click.ClickException as exc:
        _fail(exc.format_message(), ExitCode.USAGE)
    except (KeyboardInterrupt, Abort):
        sys.stderr.write("rocmstack: interrupted\n")
        code = int(ExitCode.INTERRUPTED)
    except UnicodeDecodeError as exc:
        # The last guard: a file the user gave holds bytes that are not UTF-8 (the loaders name the file).
        _fail(f"a file given is not UTF-8 text ({exc.reason} at byte {exc.start})", ExitCode.USAGE)
    except OSError as exc:
        # A path the user gave could not be read or written (the commands check the rest themselves).
        where = f": {exc.filename}" if exc.filename else ""
        _fail(f"{exc.strerror or exc}{where}", ExitCode.USAGE)
    finally:
        if isinstance(sys.stdout, PipeGuard):
            sys.stdout = sys.stdout._stream
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    sys.exit(code if isinstance(code, int) else 0)
