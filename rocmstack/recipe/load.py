"""Recipe loading: YAML -> (extends merged) -> --set overrides -> validated Recipe.

Every failure is one RecipeError line naming the file, the field and the value.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from rocmstack.errors import RecipeError, printable
from rocmstack.recipe.model import Component, Recipe
from rocmstack.resources import recipes_dir

MAX_EXTENDS_DEPTH = 8
# libyaml's safe loader where available: recipe checks must stay well under a second.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Recipe-level keys whose values are free-form maps: --set may add new keys there.
_OPEN_MAPS = ("env", "build_args")


@dataclass(frozen=True, kw_only=True)
class Override:
    path: tuple[str, ...]
    raw: str

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


def recipe_files(directory: Path | None = None) -> dict[str, Path]:
    """Recipe name -> file. Files starting with '_' hold shared data, not recipes."""
    root = directory or recipes_dir()
    return {p.stem: p for p in sorted(root.glob("*.yaml")) if not p.name.startswith("_")}


def find_recipe(name_or_path: str, directory: Path | None = None) -> Path:
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") and candidate.is_file():
        return candidate
    files = recipe_files(directory)
    if name_or_path in files:
        return files[name_or_path]
    known = ", ".join(files) or "none"
    raise RecipeError(
        f"unknown recipe {name_or_path!r}", fix=f"known recipes: {known}; or pass a path to a .yaml file"
    )


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RecipeError(f"{printable(path)}: cannot read recipe: {exc.strerror}") from None
    try:
        data = yaml.load(text, Loader=YAML_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise RecipeError(f"{printable(path)}: YAML error at {where}: {problem}") from None
    if not isinstance(data, dict):
        raise RecipeError(f"{printable(path)}: a recipe must be a YAML mapping, got {type(data).__name__}")
    return data


def _merge(parent: Mapping[str, Any], child: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge mappings; lists and scalars in the child replace the parent's; ``null`` deletes a key."""
    merged = dict(parent)
    for key, value in child.items():
        if value is None and key in merged and isinstance(merged[key], Mapping):
            del merged[key]
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _raw_with_parents(path: Path, directory: Path | None) -> dict[str, Any]:
    chain: list[tuple[Path, dict[str, Any]]] = []
    seen: set[Path] = set()
    current = path
    while True:
        if current.resolve() in seen or len(chain) >= MAX_EXTENDS_DEPTH:
            raise RecipeError(
                f"{printable(path)}: extends: cycle or chain deeper than {MAX_EXTENDS_DEPTH}"
                f" through {printable(current)}"
            )
        seen.add(current.resolve())
        data = _read_yaml(current)
        chain.append((current, data))
        parent = data.get("extends")
        if parent is None:
            break
        if not isinstance(parent, str):
            raise RecipeError(f"{printable(current)}: extends: expected a recipe name, got {parent!r}")
        try:
            current = find_recipe(parent, directory or current.parent)
        except RecipeError as exc:
            raise RecipeError(f"{printable(current)}: extends: {exc.message}", fix=exc.fix) from None
    merged: dict[str, Any] = {}
    for _, data in reversed(chain):
        merged = _merge(merged, data)
    merged["name"] = chain[0][1].get("name")
    merged["extends"] = chain[0][1].get("extends")
    return merged


def _flag(path: tuple[str, ...]) -> str:
    """``--set KEY`` as an error names it: the user's key, escaped so that the message stays one line."""
    return f"--set {printable('.'.join(path))}"


def parse_override(text: str) -> Override:
    key, sep, value = text.partition("=")
    if not sep or not key or any(not part for part in key.split(".")):
        raise RecipeError(
            f"--set {text!r}: expected KEY=VALUE with a dotted KEY, e.g. base.python=3.12 or vllm.ref=v0.27.0"
        )
    return Override(path=tuple(key.split(".")), raw=value)


def _override_target(raw: Mapping[str, Any], path: tuple[str, ...]) -> tuple[str, ...]:
    """Resolve the shorthand ``vllm.ref`` to ``components.vllm.ref`` and check the key exists in the model."""
    head = path[0]
    fields = Recipe.model_fields
    aliases = {f.alias or name: name for name, f in fields.items()}
    if head not in aliases and head in raw.get("components", {}):
        path = ("components", *path)
        head = "components"
    if head not in aliases:
        valid = sorted(list(aliases) + [f"{c}.<field>" for c in raw.get("components", {})])
        raise RecipeError(f"{_flag(path)}: unknown key {head!r}", fix=f"valid keys: {', '.join(valid)}")
    if head in _OPEN_MAPS:
        if len(path) != 2:
            raise RecipeError(f"{_flag(path)}: expected {head}.NAME=value")
        return path
    if head == "components":
        if len(path) != 3:
            raise RecipeError(f"{_flag(path)}: expected <component>.<field>=value")
        if path[1] not in raw.get("components", {}):
            known = ", ".join(sorted(raw.get("components", {})))
            raise RecipeError(f"{_flag(path)}: unknown component {path[1]!r}", fix=f"components: {known}")
        if path[2] not in Component.model_fields:
            raise RecipeError(
                f"{_flag(path)}: unknown component field {path[2]!r}",
                fix=f"fields: {', '.join(sorted(Component.model_fields))}",
            )
        return path
    model: type[BaseModel] = Recipe
    for depth, part in enumerate(path):
        names = {f.alias or n: n for n, f in model.model_fields.items()}
        if part not in names:
            raise RecipeError(
                f"{_flag(path)}: unknown key {'.'.join(path[: depth + 1])!r}",
                fix=f"valid: {', '.join(sorted(names))}",
            )
        annotation = model.model_fields[names[part]].annotation
        sub = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
        if sub is None and depth != len(path) - 1:
            raise RecipeError(f"{_flag(path)}: {part!r} has no sub-keys")
        if sub is not None:
            model = sub
    if model is not Recipe and len(path) == 1:
        raise RecipeError(f"{_flag(path)}: set a field of {path[0]}, e.g. {path[0]}.<field>=value")
    return path


def _parse_value(path: tuple[str, ...], raw: str) -> Any:
    if path[0] in _OPEN_MAPS:
        return raw  # env values are strings, always
    try:
        value = yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError:
        value = raw
    # Versions like 3.12 must stay strings; lists/bools/null are parsed.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return raw
    return value


def apply_overrides(raw: dict[str, Any], overrides: Iterable[Override]) -> dict[str, Any]:
    data = json.loads(json.dumps(raw, default=str))
    for override in overrides:
        path = _override_target(data, override.path)
        node = data
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise RecipeError(f"{_flag(override.path)}: {part!r} is not a mapping")
        node[path[-1]] = _parse_value(path, override.raw)
    return data


def _describe(error: dict[str, Any]) -> str:
    loc = printable(".".join(str(p) for p in error["loc"] if not str(p).startswith("function-")))
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        return f"{loc}: unknown key (remove it or check the spelling)"
    if kind == "missing":
        return f"{loc}: required field is missing"
    if kind in ("string_type", "str_type") and isinstance(value, (int, float)):
        return f"{loc}: {value!r} is a number; write it as a quoted string"
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    shown = (
        repr(value) if isinstance(value, (str, int, float, bool)) or value is None else type(value).__name__
    )
    if repr(value)[:40] in message:
        return f"{loc}: {message}" if loc else message
    return f"{loc}: {message} (got {shown})" if loc else f"{message} (got {shown})"


def validate(raw: Mapping[str, Any], origin: str) -> Recipe:
    try:
        # JSON mode: YAML lists become tuples, strings become enums, and numbers never become strings.
        return Recipe.model_validate_json(json.dumps(raw, default=str))
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise RecipeError(f"{printable(origin)}: {_describe(errors[0])}{more}") from None


def load_recipe(
    name_or_path: str, overrides: Iterable[str] = (), directory: Path | None = None
) -> tuple[Recipe, Path]:
    path = find_recipe(name_or_path, directory)
    raw = _raw_with_parents(path, directory)
    parsed = [parse_override(o) for o in overrides]
    data = apply_overrides(raw, parsed)
    recipe = validate(data, str(path))
    if recipe.name != path.stem:
        raise RecipeError(f"{printable(path)}: name: {recipe.name!r} must match the file name {path.stem!r}")
    return recipe, path
