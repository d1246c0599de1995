"""Reading advisories: the shipped ones (rocmstack/advisories/data) and a lab's own folders, each file checked
against the model; a bad file is one line naming the file and the field (exit 2)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import yaml
from pydantic import ValidationError

from rocmstack.advisories.model import Advisory
from rocmstack.errors import InputError, printable

SHIPPED = Path(__file__).with_name("data")


def load_file(path: Path) -> Advisory:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InputError(f"advisory {printable(path)}: cannot read it ({exc})", fix="fix the YAML") from None
    try:
        advisory = Advisory.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise InputError(
            f"advisory {printable(path)}: {where}: {first['msg']}",
            fix="see docs/advisories.md for the fields",
        ) from None
    if advisory.id != path.stem:
        raise InputError(
            f"advisory {printable(path)}: id {advisory.id!r} is not the file's name",
            fix=f"name it {advisory.id}.yaml",
        )
    return advisory


def load_all(extra: Iterable[Path] = ()) -> tuple[Advisory, ...]:
    """Every advisory, shipped first; a lab's id that repeats a shipped one is refused."""
    found: dict[str, tuple[Advisory, Path]] = {}
    for folder in (SHIPPED, *extra):
        if not folder.is_dir():
            raise InputError(
                f"advisories folder {printable(folder)}: no such folder", fix="give a folder of *.yaml"
            )
        for path in sorted(folder.glob("*.yaml")):
            if not path.is_file():
                raise InputError(f"advisory {printable(path)}: not a regular file", fix="remove it")
            advisory = load_file(path)
            if advisory.id in found:
                raise InputError(
                    f"advisory {printable(path)}: id {advisory.id!r} is also {printable(found[advisory.id][1])}",
                    fix="give it an id of its own",
                )
            found[advisory.id] = (advisory, path)
    return tuple(a for a, _ in found.values())
