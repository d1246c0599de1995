"""``check``'s resolver row: the recipe's pip layers resolved (uv) against its lock entry, as one rule row."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from rocmstack.lock.drift import package_drift
from rocmstack.lock.file import arch_key, closure_of, entry_of, lock_path
from rocmstack.recipe.resolve import Resolved, recipe_arg
from rocmstack.resolver.closure import closure as resolve_closure
from rocmstack.resolver.uv import ResolutionError
from rocmstack.rules.engine import Result
from rocmstack.status import Status

RESOLVER_SOURCE = "https://docs.astral.sh/uv/pip/compile/"


def resolver_result(
    resolved: Resolved, *, offline: bool = False, patches_dir: Path | None = None
) -> tuple[Result, str | None]:
    """The resolver as one check row (id ``resolver``) and, when it fails, uv's full explanation.

    Online: the pip layers are resolved (cached) starting from the lock entry (its commits and versions
    are preferred) and compared with it: unsatisfiable -> fail, a lock that no longer matches -> fail
    (drift). ``offline``: the lock entry only. NetworkError (exit 4) when the index is out of reach."""
    entry = entry_of(lock_path(resolved.source), arch_key(resolved.gpu_archs))
    full = closure_of(entry) is not None and not resolved.overrides

    def row(status: Status, reason: str, fix: str = "") -> Result:
        return Result(id="resolver", status=status, reason=reason, fix=fix, source=RESOLVER_SOURCE)

    def unlocked(notes: Iterable[str]) -> str:
        return "not locked (built from the ref): " + ", ".join(sorted({u.split(":", 1)[0] for u in notes}))

    relock = f"rocmstack lock {recipe_arg(resolved)} --gpu-arch '{resolved.arch_list}'"
    reachable = f"run `{relock}` where their git remotes are reachable"
    if offline:
        if not full:
            return row(Status.WARN, "offline: no full lock entry to check against", f"run `{relock}`"), None
        count = len(entry["packages"]) if entry else 0
        if entry and entry.get("unresolved"):  # the lock says so itself: no need to ask a remote
            return row(
                Status.WARN, f"offline: {count} locked packages; {unlocked(entry['unresolved'])}", reachable
            ), None
        return row(Status.PASS, f"offline: {count} locked packages (not re-resolved)"), None
    try:
        now = resolve_closure(resolved, previous=entry if full else None, as_locked=True)
    except ResolutionError as exc:
        return row(
            Status.FAIL, exc.message, "change the pins, or declare the conflict under accepted_conflicts"
        ), exc.detail
    if not full:
        why = "--set overrides: not compared with the lock" if resolved.overrides else "no full lock entry"
        return row(Status.WARN, f"{len(now.packages)} packages resolve ({why})", f"run `{relock}`"), None
    moved = package_drift(entry or {}, now.to_json())
    if moved:
        shown = ", ".join(moved[:6]) + (f" (+{len(moved) - 6} more)" if len(moved) > 6 else "")
        return row(Status.FAIL, f"lock out of date: {shown}", f"run `{relock}` to accept it"), None
    if now.unresolved:
        return row(
            Status.WARN,
            f"{len(now.packages)} packages resolve exactly as locked; {unlocked(now.unresolved)}",
            reachable,
        ), None
    return row(Status.PASS, f"{len(now.packages)} packages resolve exactly as locked"), None
