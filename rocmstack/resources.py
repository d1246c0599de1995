"""Locations of the data directories (recipes, templates, patches).

In a source checkout they sit at the repository top level; in an installed wheel (the copy inside an
image) they are packaged under ``rocmstack/_data``.
"""

from __future__ import annotations

from pathlib import Path

# Folders searched for recipe names (os.pathsep-separated) before the shipped recipes; ``--recipes-dir``
# prepends to it.
RECIPES_PATH_ENV = "ROCMSTACK_RECIPES_PATH"

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    for candidate in (_PKG.parent / name, _PKG / "_data" / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"rocmstack data directory {name!r} not found next to {_PKG}")


def recipes_dir() -> Path:
    return data_dir("recipes")


def templates_dir() -> Path:
    return data_dir("dockerfiles")


def patches_dir() -> Path:
    return data_dir("patches")
