"""Which resolved recipes a ``check`` or ``lock`` run judges: one recipe at one arch set, or every recipe on
the search path (what ``recipes`` lists) x its default arch sets."""

from __future__ import annotations

from rocmstack.errors import InputError
from rocmstack.lock.file import arch_key, default_arch_sets
from rocmstack.patches import load_patches
from rocmstack.recipe.load import load_every, load_recipe, recipes_for_all
from rocmstack.recipe.resolve import Resolved, resolve
from rocmstack.rules.engine import Result, evaluate_rules, load_rules


def one_or_all(recipe: str | None, every: bool, command: str) -> None:
    if every == bool(recipe):
        raise InputError(
            "give a RECIPE or --all (not both, not neither)",
            fix=f"e.g. rocmstack {command} verl-0.9.0-rocm10",
        )


def targets(recipe: str | None, gpu_arch: str | None, every: bool, overrides: list[str]) -> list[Resolved]:
    """One recipe (one arch set), or every recipe on the search path (--recipes-dir, $ROCMSTACK_RECIPES_PATH
    and the shipped ones) x its default arch sets."""
    one_or_all(recipe, every, "check")
    if every and (gpu_arch or overrides):
        raise InputError(
            "--all checks every listed recipe as written", fix="drop --gpu-arch/--set, or name one recipe"
        )
    out = []
    # By path: the very file `recipes` lists under that name, never another one a name would find; every
    # broken one is named at once.
    files = [str(p) for p in recipes_for_all().values()] if every else [str(recipe)]
    for model, path in load_every(files, overrides) if every else [load_recipe(files[0], overrides)]:
        sets = [gpu_arch] if gpu_arch or not every else [arch_key(s) for s in default_arch_sets(model)]
        out += [resolve(model, path, s, tuple(overrides)) for s in sets]
    return out


def check_all_shipped() -> list[tuple[str, str, list[Result]]]:
    """Every listed recipe x its default arch sets, evaluated (the benchmarked path of ``check --all``)."""
    rules, patches = load_rules(), load_patches()
    return [
        (r.recipe.name, r.arch_list, evaluate_rules(r, rules=rules, patches=patches))
        for r in targets(None, None, True, [])
    ]
