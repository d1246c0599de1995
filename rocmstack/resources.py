"""Locations of the data directories (recipes, templates, patches), and rocmstack's own requirements.

In a source checkout they sit at the repository top level; in an installed wheel (the copy inside an
image) they are packaged under ``rocmstack/_data``.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

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
