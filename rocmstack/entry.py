"""The ``rocmstack`` program's first frame: Ctrl-C while the command line is still being imported (typer,
the command modules) is one line and exit 130, as it is once a command runs."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from rocmstack.cli import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        from rocmstack.errors import ExitCode

        sys.stderr.write("rocmstack: interrupted\n")
        sys.exit(int(ExitCode.INTERRUPTED))
