"""Speed of `rocmstack check --all` (every shipped recipe x its default arch sets): a benchmark, not a timed
assertion. Run: .venv/bin/python -m pytest tests/unit/test_rules_bench.py --benchmark-only"""

from __future__ import annotations

from rocmstack.recipe.load import recipe_files
from rocmstack.rules.commands import check_all_shipped


def test_check_all_shipped_recipes(benchmark):
    runs = benchmark.pedantic(check_all_shipped, rounds=10, warmup_rounds=1)
    assert {name for name, _, _ in runs} == set(recipe_files())
    assert all(r.status != "fail" for _, _, results in runs for r in results)
