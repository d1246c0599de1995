"""Compatibility rules as data (``recipes/_rules/*.yaml``), checked before anything is rendered or built.

Public API (stable; ``rocmstack build`` calls it):
  enforce(resolved, ignore=()) -> list[Result]   raises rocmstack.errors.RuleFailure when a rule fails
  evaluate_rules(resolved, ignore=()) -> list[Result]
  load_rules() -> tuple[Rule, ...]
Attributes resolve lazily so that importing this package (the CLI does, at start) costs nothing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Result", "Rule", "enforce", "evaluate_rules", "load_rules"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from rocmstack.rules import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'rocmstack.rules' has no attribute {name!r}")
