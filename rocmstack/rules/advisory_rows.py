"""``check``'s advisory rows: the recipe's pins (base rocm/torch/python, each component's version) and GPU
archs against the known-bad versions of rocmstack/advisories, before a build. Only matches are rows."""

from __future__ import annotations

from collections.abc import Iterable

from packaging.utils import canonicalize_name

from rocmstack.advisories.match import match, recipe_inventory
from rocmstack.advisories.model import Advisory
from rocmstack.recipe.resolve import Resolved
from rocmstack.rules.engine import Result
from rocmstack.status import Status


def advisory_results(resolved: Resolved, advisories: Iterable[Advisory]) -> list[Result]:
    recipe = resolved.recipe
    base = {"rocm": recipe.base.rocm, "torch": recipe.base.torch, "python": recipe.base.python}
    components = {
        str(canonicalize_name(c.package or name)): c.version or ""
        for name, c in recipe.components.items()
        if c.version
    }
    inv = recipe_inventory(f"{recipe.name} [{resolved.arch_list}]", base, components, resolved.gpu_archs)
    return [
        Result(
            id=f"advisory:{m.advisory.id}",
            status=Status.FAIL if m.advisory.versions_alone == "fail" else Status.WARN,
            reason=f"{m.advisory.title} ({m.why})",
            fix=m.advisory.fix,
            source=m.advisory.source,
            severity="fail" if m.advisory.versions_alone == "fail" else "warn",
            description=m.advisory.symptom,
        )
        for m in match(advisories, inv)
    ]
