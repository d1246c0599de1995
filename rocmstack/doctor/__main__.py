"""``python -m rocmstack.doctor``: the doctor alone, for images where only this concern matters.

Same options and exit codes as ``rocmstack doctor``."""

import sys

import typer

from rocmstack.doctor.commands import register
from rocmstack.errors import RocmstackError


def main() -> None:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    register(app)

    @app.callback()
    def _root() -> None:
        """rocmstack doctor"""

    try:
        app(args=["doctor", *sys.argv[1:]], prog_name="rocmstack")
    except RocmstackError as exc:
        sys.stderr.write(f"rocmstack: error: {exc.one_line()}\n")
        sys.exit(int(exc.exit_code))


if __name__ == "__main__":
    main()
