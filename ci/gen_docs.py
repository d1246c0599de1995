"""Regenerate the generated parts of the docs from the code, or check that they are current.

    python ci/gen_docs.py          # rewrite them
    python ci/gen_docs.py --check  # exit 1, naming the file, when one is stale (the test suite runs this)

Each generated part sits between ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` in its file:
- docs/architecture.md, ``package-drawing``: every package of rocmstack with the packages it imports (the
  direct imports of all its modules, function-level ones included), drawn from the top layer down.
- README.md, ``options-table``: every option that two or more commands take, with the one meaning
  rocmstack/options.py declares for it.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

import grimp

ROOT = Path(__file__).resolve().parents[1]
# What every package may import: errors, output, the image contract... (the base of both stacks).
SHARED_BASE = (
    "advisories", "contract", "errors", "host", "options", "output", "plots", "redact", "resources", "secrets",
    "signals", "status", "wire",
)  # fmt: skip
# The command layer: the commands, the CLI, its entry and the `python -m` entry points of single commands.
COMMAND_LAYER = ("commands", "cli", "entry", "__main__")


def _package(module: str) -> str:
    parts = module.split(".")
    if parts[-1] == "__main__":
        return "commands"  # `python -m rocmstack.doctor` is the CLI narrowed to one command
    if len(parts) == 1:
        return ""  # the root package: its version
    return "commands" if parts[1] in COMMAND_LAYER else parts[1]


def package_edges() -> dict[str, set[str]]:
    """Each package -> the packages its modules import directly (none of the shared base, none of its own)."""
    graph = grimp.build_graph("rocmstack")
    edges: dict[str, set[str]] = defaultdict(set)
    for module in graph.modules:
        here = _package(module)
        if not here or here in SHARED_BASE:
            continue
        edges[here]
        for imported in graph.find_modules_directly_imported_by(module):
            there = _package(imported)
            if there and there != here and there not in SHARED_BASE:
                edges[here].add(there)
    return edges


def layers(edges: dict[str, set[str]]) -> dict[str, int]:
    """Each package's height: 1 + the highest package it imports (ValueError on a cycle)."""
    height: dict[str, int] = {}

    def of(package: str, path: tuple[str, ...]) -> int:
        if package in path:
            raise ValueError(f"packages import each other: {' -> '.join((*path, package))}")
        if package not in height:
            height[package] = 1 + max((of(q, (*path, package)) for q in edges.get(package, ())), default=0)
        return height[package]

    for package in edges:
        of(package, ())
    return height


def package_drawing() -> str:
    edges = package_edges()
    height = layers(edges)
    width = max(len(p) for p in edges)
    lines = ["```text", f"{'layer':>5}  {'package':<{width}}  imports"]
    for package in sorted(edges, key=lambda p: (-height[p], p)):
        imports = ", ".join(sorted(edges[package], key=lambda q: (-height[q], q))) or "-"
        wrapped = textwrap.wrap(imports, 110 - width - 9, break_on_hyphens=False) or ["-"]
        lines.append(f"{height[package]:>5}  {package:<{width}}  {wrapped[0]}")
        lines += [f"{'':>5}  {'':<{width}}  {more}" for more in wrapped[1:]]
    lines.append(f"{0:>5}  the shared base: {', '.join(SHARED_BASE)}")
    lines.append("```")
    return "\n".join(lines)


def _declarations() -> dict[str, tuple[str, str | None, tuple[str, ...]]]:
    """Every option rocmstack.options declares: its long flag -> (help, metavar, all its flags)."""
    import typer.models

    from rocmstack import options

    found: dict[str, tuple[str, str | None, tuple[str, ...]]] = {}
    for value in vars(options).values():
        if isinstance(value, options.Shared):
            flags, text, metavar = value.flags, value.help, value.metavar
        elif isinstance(value, typer.models.OptionInfo) and not value.hidden:
            flags, text, metavar = tuple(value.param_decls or ()), value.help or "", value.metavar
        else:
            continue
        for flag in flags:
            if flag.startswith("--"):
                found[flag] = (text, metavar, flags)
    return found


def every_option() -> list[tuple[str, str, Any]]:
    """(command path, spelling, its click parameter) of every option of every rocmstack command, in the CLI's
    order; hidden ones too."""
    import typer

    from rocmstack.cli import make_app

    found: list[tuple[str, str, Any]] = []

    def walk(command: Any, path: str) -> None:  # typer's own click, whichever it vendors
        for param in command.params:
            if param.param_type_name == "option":
                found.extend((path, name, param) for name in param.opts)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(make_app()), "")
    return found


def option_uses() -> dict[str, list[str]]:
    """Each visible long option -> the commands that take it, in the CLI's order."""
    uses: dict[str, list[str]] = defaultdict(list)
    for path, flag, param in every_option():
        if flag.startswith("--") and not param.hidden and path not in uses[flag]:
            uses[flag].append(path)
    return uses


def options_table() -> str:
    """README's table: every option two or more commands take, as rocmstack.options declares it once."""
    declared = _declarations()
    lines = ["| option | commands | meaning |", "|---|---|---|"]
    for flag, commands in sorted(option_uses().items()):
        if len(commands) < 2:
            continue
        text, metavar, flags = declared[flag]  # a KeyError: a shared option declared outside rocmstack.options
        spelled = "/".join(flags)
        shown = f"`{spelled} {metavar}`" if metavar else f"`{spelled}`"
        lines.append(f"| {shown} | {', '.join(commands)} | {text.replace('|', '&#124;')} |")
    return "\n".join(lines)


GENERATED = {
    ("docs/architecture.md", "package-drawing"): package_drawing,
    ("README.md", "options-table"): options_table,
}


def replaced(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- {re.escape(name)}:begin -->).*?(<!-- {re.escape(name)}:end -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"no <!-- {name}:begin --> ... <!-- {name}:end --> block")
    return pattern.sub(lambda m: f"{m.group(1)}\n{body}\n{m.group(2)}", text, count=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail on a stale block instead of rewriting it")
    args = parser.parse_args(argv)
    stale = []
    for (file, name), render in GENERATED.items():
        path = ROOT / file
        text = path.read_text(encoding="utf-8")
        new = replaced(text, name, render())
        if new == text:
            continue
        if args.check:
            stale.append(f"{file} ({name})")
        else:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {file} ({name})")
    if stale:
        print(f"stale: {', '.join(stale)}; run `make docs`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
