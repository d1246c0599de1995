"""`python -m rocmstack.bench rollout ...`: the bench commands alone, without the other concerns' imports."""

from __future__ import annotations

import sys

import typer

from rocmstack.errors import RocmstackError


def main() -> None:
    from rocmstack.bench.commands import plot, rollout

    app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
    app.command("rollout")(rollout)
    app.command("plot")(plot)
    try:
        app(prog_name="rocmstack bench")
    except RocmstackError as exc:
        sys.stderr.write(f"rocmstack: error: {exc.one_line()}\n")
        sys.exit(int(exc.exit_code))


if __name__ == "__main__":
    main()
