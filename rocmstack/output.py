"""Shared output helpers: one JSON style for every --json, one rich console per stream."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocmstack.errors import InputError, printable, quoted

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

# Set by ``rocmstack -q``: warnings are not printed (errors and results still are).
QUIET_ENV = "ROCMSTACK_QUIET"


class ClosedPipe(Exception):
    """The reader of stdout went away (``rocmstack check --all | head -1``). Not an OSError on purpose:
    click and rich turn a broken pipe into exit 1, which means a failed check; ``cli.main`` exits quietly."""


class PipeGuard:
    """sys.stdout as it is, except that a write to a closed pipe raises ClosedPipe."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            raise ClosedPipe from None

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise ClosedPipe from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def console(**options: Any) -> Console:
    """A rich Console whose closed pipe raises ClosedPipe (rich's own handling exits 1)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True  # nothing more is written to the closed pipe
            raise ClosedPipe

    return _Console(**options)


def stdout() -> Console:
    return console(highlight=False, soft_wrap=True)


def stderr() -> Console:
    return console(stderr=True, highlight=False, soft_wrap=True)


def dumps(obj: Any) -> str:
    """Canonical JSON: sorted keys, stable separators, so outputs diff and hash cleanly."""
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n"


def print_json(obj: Any) -> None:
    sys.stdout.write(dumps(obj))
    sys.stdout.flush()


def quiet() -> bool:
    return os.environ.get(QUIET_ENV) == "1"


def warn(message: str) -> None:
    if quiet():
        return
    from rich.markup import escape

    # The message is data (it may hold "ray[default]" or "[gfx942;gfx950]"): never read as markup.
    stderr().print(f"[yellow]warning:[/yellow] {escape(message)}")


def table(*headers: str, keep: tuple[str, ...] = (), **options: Any) -> Table:
    """A rich Table whose ``keep`` columns (names, ids, refs, URLs: what users copy and type) never wrap
    or shorten; every other column wraps, and folds a word longer than its column rather than cut it."""
    from rich.table import Table

    out = Table(**options)
    for header in headers:
        if header in keep:
            out.add_column(header, no_wrap=True, overflow="ignore")
        else:
            out.add_column(header, overflow="fold")
    return out


def print_table(tab: Any, console: Console | None = None) -> None:
    """Print ``tab`` no narrower than its unbreakable columns need: where the terminal (or the 80 columns
    rich assumes for a pipe) is too narrow, the line runs long instead of a name being cut to ``verl-0.9…``."""
    console = console or stdout()
    needed = _min_width(tab, console)
    width = console.width
    console.width = max(width, needed)  # the same console: a recording or a file keeps the table
    try:
        console.print(tab)
    finally:
        console.width = width


def _min_width(tab: Any, console: Console) -> int:
    """The narrowest ``tab`` can be with its no_wrap columns whole and the others at their longest word."""
    from rich.measure import Measurement

    options = console.options.update_width(1 << 20)  # measure unclamped: a URL is wider than 80
    total = 0
    for column in tab.columns:
        cells = [column.header, *column.cells] if tab.show_header else list(column.cells)
        sizes = [Measurement.get(console, options, cell) for cell in cells] or [Measurement(1, 1)]
        width = max(s.maximum if column.no_wrap else s.minimum for s in sizes)
        total += max(width, column.min_width or 0) + sum(tab.padding[1::2])
    if not tab.pad_edge:
        total -= tab.padding[3] + tab.padding[1]
    edges = len(tab.columns) + 1 if tab.box else 0
    # One column of slack each: rich's collapse rounds per column.
    return total + edges + len(tab.columns)


def check_output_dir(path: Path, flag: str) -> None:
    """Refuse, before any work, a folder a command could not write its files into at the end."""

    if path.exists() and not path.is_dir():
        raise InputError(
            f"{flag} {quoted(path)}: exists and is not a folder (several files are written into it)",
            fix=f"pass a new folder, e.g. {flag} {quoted(path.with_name(path.name + '.d'))}",
        )
    parent = path
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(
            f"{flag} {quoted(path)}: {quoted(parent)} is not a writable folder",
            fix="pass a folder you can write",
        )


def check_output_file(path: Path, flag: str) -> None:
    """Refuse, before any work, a file path a command could not write at the end."""

    if path.is_dir():
        raise InputError(
            f"{flag} {quoted(path)}: is a folder", fix=f"name a file, e.g. {flag} {quoted(path / 'out.json')}"
        )
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(
            f"{flag} {quoted(path)}: {quoted(parent)} is not a writable folder",
            fix="create the folder first, or name a file in a folder you can write",
        )


# A log or a pipe (CI) hears from a long command at least this often, whether or not a step ended: a runner
# that ends silent jobs, or a reader, can tell a slow command from a hung one.
HEARTBEAT_S = 30.0


@contextlib.contextmanager
def log_lines(label: str, every_s: float | None = None) -> Iterator[Callable[[str], None]]:
    """For a stream that is no terminal: yields ``say(text)``, which prints ``LABEL: text`` on stderr; when
    nothing was said for ``every_s`` (default HEARTBEAT_S), a line says the command is still at its last
    news, with the time."""
    every = HEARTBEAT_S if every_s is None else every_s
    lock = threading.Lock()
    start = time.monotonic()
    last, news = [start], ["starting"]
    stop = threading.Event()

    def say(text: str) -> None:
        text = printable(text)
        with lock:
            last[0], news[0] = time.monotonic(), text
            sys.stderr.write(f"{label}: {text}\n")
            sys.stderr.flush()

    def beat() -> None:
        while not stop.wait(min(1.0, every / 2)):
            with lock:
                if time.monotonic() - last[0] >= every:
                    last[0] = time.monotonic()
                    sys.stderr.write(
                        f"{label}: still running after {time.monotonic() - start:.0f} s (last: {news[0]})\n"
                    )
                    sys.stderr.flush()

    thread = threading.Thread(target=beat, name=f"{label} heartbeat", daemon=True)
    thread.start()
    try:
        yield say
    finally:
        stop.set()
        thread.join(timeout=5)


@contextlib.contextmanager
def progress_lines(label: str) -> Iterator[Callable[[str], None]]:
    """A long command's progress on stderr: yields ``say(text)``, printed as ``LABEL: text``. A terminal
    sees each line as it comes; a log or a pipe also hears from the command at least every HEARTBEAT_S
    (``log_lines``)."""
    err = stderr()
    if not err.is_terminal:
        with log_lines(label) as say:
            yield say
        return
    from rich.markup import escape

    yield lambda text: err.print(f"[dim]{label}:[/dim] {escape(printable(text))}", highlight=False)


@contextlib.contextmanager
def waiting(console: Console, label: str, text: str) -> Iterator[None]:
    """A step that says nothing until it ends (a push, a copy): a terminal shows TEXT beside a spinner; a log
    or a pipe gets ``LABEL: TEXT`` and a still-running line at least every HEARTBEAT_S."""
    if console.is_terminal:
        with console.status(text):
            yield
        return
    with log_lines(label) as say:
        say(text)
        yield
