"""Locations of the data directories (recipes, templates, patches), and rocmstack's own requirements.

In a source checkout they sit at the repository top level; in an installed wheel (the copy inside an
image) they are packaged under ``rocmstack/_data``.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from rocmstack.errors import InputError, quoted

# Folders searched for recipe names (os.pathsep-separated) before the shipped recipes; ``--recipes-dir``
# prepends to it.
RECIPES_PATH_ENV = "ROCMSTACK_RECIPES_PATH"

_PKG = Path(__file__).resolve().parent


def recipes_path() -> tuple[Path, ...]:
    """The folders of $ROCMSTACK_RECIPES_PATH, each one checked as ``--recipes-dir`` checks its own: a
    folder that is not there is an InputError naming the variable and the folder, never silently skipped
    (a recipe name would then resolve to a shipped recipe of that name, or to none)."""
    import os

    folders = tuple(Path(p) for p in os.environ.get(RECIPES_PATH_ENV, "").split(os.pathsep) if p)
    for folder in folders:
        if not folder.is_dir():
            raise InputError(
                f"${RECIPES_PATH_ENV}: {quoted(folder)} is not a folder",
                fix=f"create it, or take it out of ${RECIPES_PATH_ENV}",
            )
    return folders


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


def self_requirements() -> list[str]:
    """rocmstack's own runtime requirements (from its installed metadata): every image carries rocmstack, so
    they are a pip layer of every image (locked with the others, see rocmstack.resolver.closure)."""
    from importlib.metadata import requires

    return sorted(r for r in requires("rocmstack") or [] if "extra ==" not in r)


@cache
def yaml_data(path: Path) -> Any:
    """A data file shipped with rocmstack (facts the checks read), parsed once per process."""
    import yaml

    return yaml.safe_load(path.read_text(encoding="utf-8"))
