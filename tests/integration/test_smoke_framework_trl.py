"""``smoke framework`` against a real RL framework's own loop on CPU: TRL's GRPOTrainer through its CLI
(`trl grpo`), declared as data in tests/fixtures/recipes/trl-cpu.yaml. verl needs a GPU; its declaration
runs there (docs/smoke.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocmstack.cli import main
from rocmstack.recipe.load import load_recipe
from rocmstack.smoke import framework

pytest.importorskip("trl", reason="TRL (test extra) runs the real GRPO loop")
pytest.importorskip("pyarrow")

RECIPE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "recipes" / "trl-cpu.yaml"


def test_trl_grpo_runs_its_own_loop_and_is_judged(tmp_path, capsys, monkeypatch):
    # The real loop runs on the minimal environment rocmstack gives a recipe's command: the caller's
    # tokens stay out, and TRL needs nothing of what was left out.
    monkeypatch.setenv("HF_TOKEN", "hf_caller_secret_123")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_caller_secret_456")
    with pytest.raises(SystemExit) as exc:
        main(
            ["smoke", "framework", str(RECIPE), "--output", str(tmp_path), "--allow-recipe-command", "--json"]
        )
    summary = json.loads(capsys.readouterr().out)
    assert exc.value.code == 0, summary["criteria"]
    assert summary["skipped_count"] == 0
    assert summary["passed"] and summary["framework"] == "trl" and summary["steps_seen"] == 2
    names = [c["name"] for c in summary["criteria"]]
    assert names[:2] == ["exit_clean", "steps_seen"] and "grad_norm > 0 (any)" in names
    rows = summary["metrics"]
    assert [r["step"] for r in rows] == [1, 2] and all(r["reward"] > 0 for r in rows)
    log = (tmp_path / framework.LOG_NAME).read_text()
    assert "'rewards/reward/mean'" in log  # TRL called the reward file rocmstack wrote

    # The same real metrics, judged by a declaration asking for a metric TRL does not log: FAIL, named.
    decl, _ = framework.declaration(str(RECIPE), [])
    strict = decl.model_copy(
        update={"checks": (*decl.checks, decl.checks[0].model_copy(update={"metric": "train/kl_loss"}))}
    )
    criteria = framework.judge(strict, rows, returncode=0, timed_out=False, seconds=1.0)
    failed = [c for c in criteria if not c.passed]
    assert [c.name for c in failed] == ["train/kl_loss finite"]
    assert failed[0].detail == "train/kl_loss missing: none of 2 logged step(s) has it"
    assert load_recipe(str(RECIPE))[0].framework_smoke is not None
