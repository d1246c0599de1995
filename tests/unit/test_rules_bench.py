"""Speed of `rocmstack check --all` (every shipped recipe x its default arch sets): a benchmark, not a timed
assertion. Run: .venv/bin/python -m pytest tests/unit/test_rules_bench.py --benchmark-only"""

from __future__ import annotations

from rocmstack.recipe.load import recipe_files
from rocmstack.rules.targets import check_all_shipped


def test_check_all_shipped_recipes(benchmark):
    runs = benchmark.pedantic(check_all_shipped, rounds=10, warmup_rounds=1)
    assert {name for name, _, _ in runs} == set(recipe_files())
    assert all(r.status != "fail" for _, _, results in runs for r in results)


def test_check_with_the_resolver_warm_cache(benchmark):
    """`check RECIPE`'s resolver row on the shipped verl-0.9.0 lock with a warm cache (goal: <= 2 s per recipe).
    The first (warm-up) round fills the cache; it reaches the package index once."""
    from rocmstack.recipe.load import load_recipe
    from rocmstack.recipe.resolve import resolve
    from rocmstack.rules.resolver_row import resolver_result

    recipe, path = load_recipe("verl-0.9.0-rocm10")
    resolved = resolve(recipe, path, None)
    row, _ = benchmark.pedantic(resolver_result, args=(resolved,), rounds=10, warmup_rounds=1)
    assert row.status != "fail", row.reason  # warn: components whose remote was out of reach at lock time
