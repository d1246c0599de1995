"""``check --patches``: every patch of a recipe tried on its component's pinned source (``patch test``'s
trial), each as a check row."""

from __future__ import annotations

import shlex
import sys

from rocmstack.lock.file import arch_key, entry_of, lock_path
from rocmstack.patch_trial import Trial, trial
from rocmstack.patches import Patch, select
from rocmstack.recipe.resolve import Resolved
from rocmstack.rules.engine import Result
from rocmstack.status import Status

# applies -> pass, fails -> fail, not fetched -> warn (no verdict either way), skipped (it acts on the built
# image's files) -> skip.
_TRIAL_STATUS = {"applies": "pass", "fails": "fail", "unfetched": "warn", "skipped": "skip"}


def patch_rows(resolved: Resolved, patches: dict[str, Patch], tried: dict[str, list[Trial]]) -> list[Result]:
    """One row per patch of the recipe; one trial per recipe file however many arch sets a run checks (the
    sources are the same), kept in ``tried``."""
    recipe = resolved.recipe
    key = str(resolved.source)
    if key not in tried:
        chosen = select(recipe.patches, patches, dict(recipe.components), key)
        entry = entry_of(lock_path(resolved.source), arch_key(resolved.gpu_archs))
        tried[key] = trial(resolved, chosen, entry, lambda line: print(line, file=sys.stderr))
    name = shlex.quote(resolved.recipe.name)
    fixes = {
        "fails": "rebase it on the component's pinned source; `rocmstack patch test {r} --only {p}` names each hunk",
        "unfetched": "run where the source is reachable, or through a mirror (git's url.<mirror>.insteadOf)",
    }
    return [
        Result(
            id=f"patch:{t.patch}",
            status=Status(_TRIAL_STATUS[t.status]),
            reason=f"applies to {t.source}" if t.status == "applies" else t.reason,
            fix=fixes.get(t.status, "").format(r=name, p=t.patch),
            source="rocmstack patch test",
        )
        for t in tried[key]
    ]
