"""Recipe loading: YAML -> (extends merged) -> --set overrides -> validated Recipe.

Every failure is one RecipeError line naming the file, the field and the value.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from rocmstack.errors import RecipeError, did_you_mean, printable, quoted
from rocmstack.recipe.model import PROBLEM_SEPARATOR, Component, Recipe, consistency_problems, hide_userinfo
from rocmstack.resources import RECIPES_PATH_ENV, recipes_dir, recipes_path

MAX_EXTENDS_DEPTH = 8
# --set may not change these: they say which file a recipe is, not what it pins.
_FILE_IDENTITY = ("name", "extends", "schema")


_BASE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
NO_ANCHORS = (
    "anchors and aliases (&name, *name, <<: *name) are not allowed: an alias can expand a few bytes into "
    "gigabytes; write each value out in full (or share it through `extends:`)"
)


class StrictLoader(_BASE_LOADER):  # type: ignore[misc,valid-type]  # base picked at import
    """A safe loader (libyaml's where available: recipe checks stay well under a second) that refuses a
    key given twice in one mapping (plain YAML keeps the last one and silently drops the first) and any
    anchor or alias (a billion-laughs document expands without bound once something walks it)."""

    def __init__(self, stream: str | bytes) -> None:
        # One pass over the events first (cheap with libyaml, nothing is built): the first anchor or alias
        # stops the load at its line, before any node is constructed.
        for event in yaml.parse(stream, Loader=_BASE_LOADER):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                mark = event.start_mark  # libyaml's Mark: the same line/column as PyYAML's
                raise yaml.constructor.ConstructorError(None, None, NO_ANCHORS, mark)  # type: ignore[arg-type]
        super().__init__(stream)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:
                continue  # an unhashable key: the base constructor reports it
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {quoted(key)} (first at line {first.start_mark.line + 1}); "
                    "YAML would keep only the last one: merge the two entries",
                    key_node.start_mark,
                )
            seen[key] = key_node
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


YAML_LOADER = StrictLoader


class _NoAliasDumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_yaml(data: Any, **kwargs: Any) -> str:
    """YAML that the recipe loader reads back: a repeated object is written out again, never as an alias."""
    return str(yaml.dump(data, Dumper=_NoAliasDumper, **kwargs))


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


def search_path(first: Path | None = None) -> tuple[Path, ...]:
    """Where recipe names are looked up, in order: ``first`` (the folder of the recipe that says
    ``extends:``, or a test's folder), each folder of $ROCMSTACK_RECIPES_PATH (``--recipes-dir`` puts
    its folders there), then the shipped recipes, which are always on the path."""
    env = recipes_path()
    out: list[Path] = []
    for folder in (*([first] if first else []), *env, recipes_dir()):
        if folder.resolve() not in (o.resolve() for o in out):
            out.append(folder)
    return tuple(out)


def _first_wins(folders: Iterable[Path]) -> dict[str, Path]:
    """Recipe name -> file over ``folders`` in order: an earlier folder shadows a later one."""
    found: dict[str, Path] = {}
    for folder in reversed(tuple(folders)):
        if folder.is_dir():
            found.update(recipe_files(folder))
    return dict(sorted(found.items()))


def recipes_on_path(first: Path | None = None) -> dict[str, Path]:
    """Recipe name -> file over the search path."""
    return _first_wins(search_path(first))


def recipes_for_all() -> dict[str, Path]:
    """What ``--all`` (check, lock, render, matrix) takes: the recipes of the folders the user gave
    (--recipes-dir, $ROCMSTACK_RECIPES_PATH) when there are any, else the shipped ones. A lab's repository
    never checks, plans or relocks rocmstack's own recipes; naming the shipped folder there takes them too."""
    return _first_wins(recipes_path() or (recipes_dir(),))


def find_recipe(name_or_path: str, directory: Path | None = None) -> Path:
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or "/" in name_or_path or os.sep in name_or_path:
        if candidate.is_file() and candidate.suffix in (".yaml", ".yml"):
            return candidate
        # A path is never looked up as a name: say what is wrong with the path.
        why = (
            "is a folder"
            if candidate.is_dir()
            else "is not a .yaml file"
            if candidate.is_file()
            else "does not exist"
        )
        fix = (
            "give --recipes-dir the folder, and the recipe's name" if candidate.is_dir() else "check the path"
        )
        raise RecipeError(f"recipe file {quoted(name_or_path)} {why}", fix=fix)
    files = recipes_on_path(directory)
    if name_or_path in files:
        return files[name_or_path]
    known = ", ".join(files) or "none"
    where = ", ".join(printable(p) for p in search_path(directory))
    raise RecipeError(
        f"unknown recipe {quoted(name_or_path)}",
        fix=f"{did_you_mean(name_or_path, files)}known recipes: {known} (searched {where}; add folders with "
        f"--recipes-dir or ${RECIPES_PATH_ENV}); or pass a path to a .yaml file",
    )


def shadowed(found: Mapping[str, Path]) -> dict[str, Path]:
    """Name -> the shipped file each recipe of ``found`` (``recipes_on_path()``) shadows (the command line
    warns of each once a run)."""
    shipped = recipe_files(recipes_dir())
    return {
        name: shipped[name]
        for name, path in found.items()
        if name in shipped and path.resolve() != shipped[name].resolve()
    }


def _extends_target(parent: str, recipe: Path) -> str:
    """``extends:`` names a recipe; a path there is refused in one line (it would be read against whatever
    folder the command runs in, and the lock records the name)."""
    if Path(parent).suffix in (".yaml", ".yml") or "/" in parent or os.sep in parent:
        raise RecipeError(
            f"{printable(recipe)}: extends: {quoted(parent)} is a path; extends takes a recipe name",
            fix=f"write `extends: {Path(parent).stem}` and put its folder on the search path (--recipes-dir "
            f"{printable(recipe.parent / Path(parent).parent)}, or ${RECIPES_PATH_ENV}), or keep it beside "
            f"{printable(recipe.name)}",
        )
    return parent


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RecipeError(f"{printable(path)}: cannot read recipe: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        raise RecipeError(
            f"{printable(path)}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} on line {line})",
            fix="save the recipe as UTF-8",
        ) from None
    try:
        data = yaml.load(text, Loader=YAML_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise RecipeError(f"{printable(path)}: YAML error at {where}: {problem}") from None
    if data is None:
        raise RecipeError(
            f"{printable(path)}: the file is empty",
            fix="write the recipe's fields (docs/recipes.md), or delete it",
        )
    if not isinstance(data, dict):
        kind = {list: "a list", str: "a single string", int: "a number", float: "a number", bool: "a boolean"}
        raise RecipeError(
            f"{printable(path)}: a recipe must be a YAML mapping of fields (name: ..., base: ...), "
            f"not {kind.get(type(data), 'a ' + type(data).__name__)}"
        )
    return data


def parent_file(path: Path, directory: Path | None = None) -> Path | None:
    """The file the recipe at ``path`` extends (None: it extends nothing), looked up as loading does."""
    parent = _read_yaml(path).get("extends")
    if not isinstance(parent, str):
        return None
    return find_recipe(_extends_target(parent, path), directory or path.parent)


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
        target = _extends_target(parent, current)
        try:
            current = find_recipe(target, directory or current.parent)
        except RecipeError as exc:
            raise RecipeError(f"{printable(current)}: extends: {exc.message}", fix=exc.fix) from None
    merged: dict[str, Any] = {}
    for depth, (file, data) in reversed(list(enumerate(chain))):
        parent_publish = merged.get("publish")
        merged = _merge(merged, data)
        if depth < len(chain) - 1:
            _check_own_publish(file, data, merged.get("publish"), parent_publish, chain[depth + 1][0].stem)
    merged["name"] = chain[0][1].get("name")
    merged["extends"] = chain[0][1].get("extends")
    return merged


def _check_own_publish(
    file: Path, data: Mapping[str, Any], publish: Any, parent: Any, parent_name: str
) -> None:
    """A child image is a different image: it may not take its parent's immutable descriptive tag (two
    renders, one "immutable" tag) nor its floating aliases in the same repository."""
    if not (isinstance(publish, Mapping) and isinstance(parent, Mapping)):
        return
    if publish.get("repository") != parent.get("repository"):
        return
    shared = sorted(set(publish.get("aliases") or ()) & set(parent.get("aliases") or ()))
    if publish.get("tag") != parent.get("tag") and not shared:
        return
    name = data.get("name") if isinstance(data.get("name"), str) else file.stem
    what = f"aliases {', '.join(shared)}" if publish.get("tag") != parent.get("tag") else "descriptive tag"
    raise RecipeError(
        f"{printable(file)}: publish: inherits the {what} of {parent_name} in {publish.get('repository')}, "
        "so two different images would share one tag",
        fix=f"give it its own publish identity, e.g. publish: {{tag: '{publish.get('tag')}_{name}', "
        "aliases: []}, or another publish.repository",
    )


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
    if head in _FILE_IDENTITY:
        raise RecipeError(
            f"{_flag(path)}: --set cannot change {head}: it says which recipe file this is",
            fix="write a recipe file that says `extends: <recipe>` and holds your changes; docs/recipes.md shows one",
        )
    fields = Recipe.model_fields
    aliases = {f.alias or name: name for name, f in fields.items()}
    if head not in aliases and head in raw.get("components", {}):
        path = ("components", *path)
        head = "components"
    if head not in aliases:
        # Only what --set can change: the file-identity keys are refused above.
        settable = [a for a in aliases if a not in _FILE_IDENTITY]
        valid = sorted(settable + [f"{c}.<field>" for c in raw.get("components", {})])
        raise RecipeError(
            f"{_flag(path)}: unknown key {head!r}",
            fix=f"{did_you_mean(head, valid)}valid keys: {', '.join(valid)}",
        )
    if head in _OPEN_MAPS:
        if len(path) != 2:
            raise RecipeError(f"{_flag(path)}: expected {head}.NAME=value")
        return path
    if head == "components":
        if len(path) != 3:
            raise RecipeError(f"{_flag(path)}: expected <component>.<field>=value")
        if path[1] not in raw.get("components", {}):
            known = ", ".join(sorted(raw.get("components", {})))
            raise RecipeError(
                f"{_flag(path)}: unknown component {path[1]!r}",
                fix=f"{did_you_mean(path[1], raw.get('components', {}))}components: {known}",
            )
        if path[2] not in Component.model_fields:
            raise RecipeError(
                f"{_flag(path)}: unknown component field {path[2]!r}",
                fix=f"{did_you_mean(path[2], Component.model_fields)}fields: "
                f"{', '.join(sorted(Component.model_fields))}",
            )
        return path
    model: type[BaseModel] = Recipe
    for depth, part in enumerate(path):
        names = {f.alias or n: n for n, f in model.model_fields.items()}
        if part not in names:
            raise RecipeError(
                f"{_flag(path)}: unknown key {'.'.join(path[: depth + 1])!r}",
                fix=f"{did_you_mean(part, names)}valid: {', '.join(sorted(names))}",
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


def _is_list_field(path: tuple[str, ...]) -> bool:
    """Whether the model field at ``path`` (already resolved by _override_target) holds a list."""
    if path[0] == "components":
        annotation = Component.model_fields[path[2]].annotation
    else:
        model: type[BaseModel] = Recipe
        annotation = None
        for part in path:
            names = {f.alias or n: n for n, f in model.model_fields.items()}
            annotation = model.model_fields[names[part]].annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                model = annotation
    return typing.get_origin(annotation) is tuple


def _parse_value(path: tuple[str, ...], raw: str) -> Any:
    if path[0] in _OPEN_MAPS:
        return raw  # env values are strings, always
    if _is_list_field(path) and not raw.lstrip().startswith("["):
        # gpu_archs=gfx942;gfx950 as --gpu-arch takes it (commas too); YAML's [a, b] is parsed below.
        return [part.strip() for part in raw.replace(",", ";").split(";") if part.strip()]
    try:
        value = yaml.load(raw, Loader=YAML_LOADER) if raw else ""
    except yaml.YAMLError:
        value = raw
    # Versions like 3.12 must stay strings; lists/bools/null are parsed.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return raw
    return value


def apply_overrides(raw: dict[str, Any], overrides: Iterable[Override]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(raw, default=str))
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
    if isinstance(value, str):  # a URL's token is not repeated into the terminal or a CI log
        value = hide_userinfo(value, schemeless=True)
    if kind == "extra_forbidden":
        return f"{loc}: unknown key (remove it or check the spelling)"
    if kind == "missing":
        return f"{loc}: required field is missing"
    if kind in ("string_type", "str_type") and isinstance(value, (int, float)):
        return f"{loc}: {value!r} is a number; write it as a quoted string"
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    # A scalar is worth showing; a whole mapping or list is not ("(got dict)" says nothing the field does not).
    if not (isinstance(value, (str, int, float, bool)) or value is None) or repr(value)[:40] in message:
        return f"{loc}: {message}" if loc else message
    return f"{loc}: {message} (got {value!r})" if loc else f"{message} (got {value!r})"


def _names_key(message: str, key: str) -> bool:
    """Whether a message is about ``key`` (it names it as a word: ``HF_TOKEN: secrets never go ...``)."""
    return re.search(rf"(?<![\w.-]){re.escape(key)}(?![\w-])", message) is not None


def _each_problem(errors: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """pydantic's errors, one per problem: a validator that found several joined them (PROBLEM_SEPARATOR),
    and a list is not also "too short" when its items failed."""
    errors = list(errors)
    out = []
    for error in errors:
        loc = tuple(error["loc"])
        if error["type"] == "too_short" and any(
            tuple(e["loc"])[: len(loc)] == loc != tuple(e["loc"]) for e in errors
        ):
            continue  # a list whose items failed is "too short" only for want of them: the items say why
        for message in str(error.get("msg", "")).split(PROBLEM_SEPARATOR):
            out.append({**error, "msg": message})
    return out


def validate(
    raw: Mapping[str, Any], origin: str, overrides: Iterable[Override] = (), also: Iterable[str] = ()
) -> Recipe:
    """The validated recipe, or one RecipeError listing every problem at once (``also``: the caller's own
    problems with the file); a problem in a value that ``--set`` gave is blamed on that ``--set``, not on
    the file. One problem is one line; several are a first line naming the file and one line each below."""
    try:
        # JSON mode: YAML lists become tuples, strings become enums, and numbers never become strings.
        recipe: Recipe | None = Recipe.model_validate_json(json.dumps(raw, default=str))
        errors: list[dict[str, Any]] = []
    except ValidationError as exc:
        recipe, errors = None, _each_problem(exc.errors(include_url=False))
        if all(e["loc"] for e in errors):
            # A field error keeps pydantic from running the checks across fields: run them here, so that
            # a file's problems all show at once rather than in rounds.
            invalid = {str(e["loc"][0]) for e in errors}
            errors += [
                {"loc": (), "type": "value_error", "msg": m, "input": raw}
                for m in consistency_problems(raw, invalid)
            ]
    also = list(also)
    if recipe is not None and not also:
        return recipe
    targets = [(_override_target(raw, o.path), o) for o in overrides]
    from_file, from_set = [], []
    for error in errors:
        loc = tuple(str(p) for p in error["loc"])
        blamed = [o for target, o in targets if loc[: len(target)] == target]
        if not blamed:
            # A check across fields (loc above the --set's key) that names the key --set gave is the --set's.
            message = str(error.get("msg", ""))
            blamed = [
                o
                for target, o in targets
                if target[: len(loc)] == loc and len(target) > len(loc) and _names_key(message, target[-1])
            ]
        if blamed:
            from_set.append(
                f"--set {printable(blamed[-1].dotted)}={printable(hide_userinfo(blamed[-1].raw, schemeless=True))}: "
                f"{_describe(error)}"
            )
        elif not loc and targets:
            from_file.append(
                f"{_describe(error)} (with --set {', '.join(printable(o.dotted) for _, o in targets)})"
            )
        else:
            from_file.append(_describe(error) + _spelling_hint(loc, error, raw))
    from_file += also
    if len(from_set) + len(from_file) == 1:
        raise RecipeError(from_set[0] if from_set else f"{printable(origin)}: {from_file[0]}")
    lines = [*from_set, *from_file]
    raise RecipeError(
        f"{printable(origin)}: {len(lines)} problems",
        detail="\n".join(f"  {printable(line)}" for line in lines),
    )


def _spelling_hint(loc: tuple[str, ...], error: Mapping[str, Any], raw: Mapping[str, Any]) -> str:
    """A near miss for what a file misspelt: a key the model does not have, or a component the parent has
    under another name (a child's misspelt component reads as a new one, without source or layer)."""
    given = raw.get("components")
    components: Mapping[str, Any] = given if isinstance(given, dict) else {}
    if error["type"] == "extra_forbidden" and len(loc) == 1:
        fields = {f.alias or n for n, f in Recipe.model_fields.items()}
        guess = did_you_mean(loc[0], fields)
    elif error["type"] == "extra_forbidden" and len(loc) == 3 and loc[0] == "components":
        guess = did_you_mean(loc[2], Component.model_fields)
    elif error["type"] == "missing" and len(loc) == 3 and loc[0] == "components":
        guess = did_you_mean(loc[1], [c for c in components if c != loc[1]])
        guess = f"a new component needs source and layer; {guess}" if guess else ""
    else:
        return ""
    return f" ({guess.rstrip()})" if guess else ""


def problem_lines(exc: RecipeError) -> list[str]:
    """A RecipeError as lines: its one line, then each problem it lists below it."""
    return [exc.one_line(), *(line.strip() for line in (exc.detail or "").splitlines() if line.strip())]


def load_recipe(
    name_or_path: str, overrides: Iterable[str] = (), directory: Path | None = None
) -> tuple[Recipe, Path]:
    path = find_recipe(name_or_path, directory)
    raw = _raw_with_parents(path, directory)
    parsed = [parse_override(o) for o in overrides]
    data = apply_overrides(raw, parsed)
    name = data.get("name")
    # Checked with the rest, so that a misnamed file with other problems is not a second round.
    misnamed = (
        [f"name: {name!r} must match the file name {path.stem!r}"]
        if isinstance(name, str) and name != path.stem
        else []
    )
    return validate(data, str(path), parsed, also=misnamed), path


def broken_recipes(broken: Mapping[str, RecipeError]) -> RecipeError:
    """One error for every recipe that did not load (name -> its error): each named, each problem a line."""
    if len(broken) == 1:
        return next(iter(broken.values()))
    # Each file's first line, its problems indented below it.
    lines = [
        f"{'    ' if i else '  '}{line}"
        for exc in broken.values()
        for i, line in enumerate(problem_lines(exc))
    ]
    return RecipeError(
        f"{len(broken)} recipes do not load: {', '.join(printable(n) for n in broken)}",
        fix="fix each file below, or move it off the search path",
        detail="\n".join(lines),
    )


def load_every(files: Iterable[str], overrides: Iterable[str] = ()) -> list[tuple[Recipe, Path]]:
    """Each recipe loaded, or one RecipeError naming every one that does not load (``--all``): a broken
    recipe never hides the next."""
    overrides = list(overrides)
    loaded, broken = [], {}
    for file in files:
        try:
            loaded.append(load_recipe(file, overrides))
        except RecipeError as exc:
            broken[Path(file).stem] = exc
    if broken:
        raise broken_recipes(broken)
    return loaded


def shown_path(path: Path) -> str:
    """A path as a command line would name it: relative to the current folder when inside it, quoted."""
    try:
        shown = str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        shown = str(path.resolve())
    return shlex.quote(shown)


def recipe_arg_for(name: str, source: Path) -> str:
    """How a suggested command names the recipe NAME read from SOURCE (see ``resolve.recipe_arg``)."""
    target = source.resolve()
    if target.parent == recipes_dir().resolve() and recipes_on_path().get(name, source).resolve() == target:
        return name  # a shipped recipe that no folder of the search path shadows
    try:
        found = find_recipe(name).resolve() == target
    except RecipeError:
        found = False
    if found:
        return f"{name} --recipes-dir {shown_path(target.parent)}"
    return shlex.quote(str(source))  # as it was given: from where it was given
