"""``rocmstack base-freeze IMAGE``: the Python distributions a base image really has, read inside it through
the container engine (``importlib.metadata`` of the image's ``python3``), as ``base.provides``.

The engine is ``container.engine``'s choice for a probe (``need="probe"``: docker, else buildah, whose chroot
needs no cgroups or namespaces where ``podman run`` does; ``--engine podman`` still runs it with podman).
Only what the base has installed is
read: name, version and Requires-Dist (without extras-only requirements, which nothing here asks for).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import tempfile
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from rocmstack.container.engine import choose, run_in_image, run_in_image_argv
from rocmstack.errors import EngineError, InputError, RecipeError, printable
from rocmstack.recipe.load import dump_yaml, load_recipe
from rocmstack.recipe.model import Provided

TIMEOUT_S = 600

# Runs inside the image with its own python3: standard library only, one JSON document on stdout.
PROBE = """
import importlib.metadata as md, json, re, sys
seen = {}
for d in md.distributions():
    name = d.metadata["Name"]
    if not name:
        continue
    key = re.sub(r"[-_.]+", "-", name).lower()
    if key in seen:
        continue
    reqs = [r for r in (d.requires or []) if "extra ==" not in r.replace("'", '"').replace('extra==', 'extra ==')]
    seen[key] = {"name": name, "version": d.version, "requires": reqs}
dists = sorted(seen.values(), key=lambda x: x["name"].lower())
json.dump({"python": "%d.%d" % sys.version_info[:2], "dists": dists}, sys.stdout)
"""


def commands(engine: str, image: str, name: str) -> list[list[str]]:
    """The engine commands that run the probe in ``image`` (buildah: from, run, rm)."""
    steps = run_in_image_argv(engine, image, ("python3", "-c", PROBE), name=name, pull_never=True)
    return [list(step) for step in steps.commands()]


def read_dists(image: str, engine: str = "auto") -> dict[str, Any]:
    """{"python": "3.12", "dists": [{name, version, requires}]} read inside ``image``."""
    if not image.strip():
        raise InputError("base-freeze: empty image reference")
    chosen = choose(engine, need="probe")
    out = run_in_image(
        chosen,
        image,
        ("python3", "-c", PROBE),
        name=f"rocmstack-freeze-{secrets.token_hex(4)}",
        pull_never=True,
        timeout=TIMEOUT_S,
        quick_timeout=TIMEOUT_S,
    )
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise EngineError(f"{printable(image)}: reading its Python distributions failed: {printable(last)}")
    try:
        data = json.loads(out.stdout)
    except ValueError:
        raise EngineError(
            f"{printable(image)}: the probe printed no JSON (is python3 in the image?)"
        ) from None
    if not isinstance(data, dict):
        raise EngineError(f"{printable(image)}: the probe printed unexpected JSON")
    return data


def provides(data: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """Validated ``base.provides`` entries and notes for what had to be left out (URL requirements etc.)."""
    adapter = TypeAdapter(Provided)
    out, notes = [], []
    for dist in data.get("dists", []):
        requires = []
        for req in dist.get("requires") or []:
            try:
                adapter.validate_python({"name": "x", "version": "0", "requires": (req,)})
                requires.append(req)
            except ValidationError:
                notes.append(
                    f"{dist.get('name')}: requirement {req!r} left out (not a plain PEP 508 requirement)"
                )
        item = {"name": dist.get("name"), "version": dist.get("version"), "requires": requires}
        try:
            adapter.validate_python({**item, "requires": tuple(requires)})
        except ValidationError:
            notes.append(
                f"{dist.get('name')} {dist.get('version')}: left out (name or version not PEP 440/508)"
            )
            continue
        out.append(item)
    return out, notes


def _yaml_block(items: list[dict[str, Any]], image: str) -> str:
    body = dump_yaml(items, sort_keys=False, default_flow_style=None, width=1000)
    indented = "".join(f"    {line}\n" for line in body.splitlines())
    return f"  provides:\n    # read from {image} by `rocmstack base-freeze`\n{indented}"


def write_into(recipe: Path, items: list[dict[str, Any]], image: str) -> None:
    """Replace (or add) the ``provides:`` block under ``base:`` of the recipe file, atomically; the file must
    still load as a valid recipe afterwards, or nothing is written."""
    lines = recipe.read_text(encoding="utf-8").splitlines(keepends=True)
    try:
        start = next(i for i, line in enumerate(lines) if re.match(r"^base:\s*(#.*)?$", line))
    except StopIteration:
        raise InputError(f"{printable(recipe)}: no top-level base: block to put provides into") from None
    end = start + 1
    while end < len(lines) and (lines[end].startswith((" ", "\t")) or not lines[end].strip()):
        end += 1
    block = lines[start + 1 : end]
    kept, skipping = [], False
    for line in block:
        if re.match(r"^  provides:", line):
            skipping = True
            continue
        if skipping and (line.startswith("   ") or not line.strip()):
            continue
        skipping = False
        kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    text = "".join([*lines[: start + 1], *kept, _yaml_block(items, image), *lines[end:]])
    with tempfile.TemporaryDirectory(prefix="rocmstack-freeze.") as folder:
        trial = Path(folder) / recipe.name
        trial.write_text(text, encoding="utf-8")
        try:
            load_recipe(str(trial), directory=recipe.parent)
        except RecipeError as exc:  # exit 2, naming the user's file; nothing written
            raise RecipeError(
                f"--write: the result would not validate: {exc.message.replace(str(trial), str(recipe))}",
                fix=exc.fix,
            ) from None
    fd, tmp = tempfile.mkstemp(prefix=f".{recipe.name}.", dir=recipe.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, recipe)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
