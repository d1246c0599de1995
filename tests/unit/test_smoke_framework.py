"""``smoke framework``: the declaration, the metric parsers, the judgments and the run under a time limit.

The run against a real RL framework loop (TRL's GRPO on CPU) is tests/integration/test_smoke_framework_trl.py.
"""

from __future__ import annotations

import math
import os
import sys
import textwrap
from pathlib import Path

import pytest

from rocmstack.cli import main
from rocmstack.recipe.load import load_recipe
from rocmstack.recipe.model import FrameworkSmoke, MetricsSource
from rocmstack.smoke import framework, verdict

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "recipes"

# verl 0.9.1's console logger line (verl/utils/logger/aggregate_logger.py: "step:N - key:pformat(value)"),
# as it comes through Ray's log forwarding from the TaskRunner actor; keys as docs/evidence and
# verl/utils/debug/metrics.py name them. numpy 2 scalars print as np.float64(...).
VERL_LINES = """\
(TaskRunner pid=4242) step:1 - actor/pg_loss:-0.0123 - actor/grad_norm:0.5 - critic/rewards/mean:0.25 - \
training/rollout_probs_diff_mean:6.4e-06 - training/rollout_actor_probs_pearson_corr:0.99997 - \
timing_s/gen:2.2 - timing_s/update_weights:0.42 - perf/throughput:np.float64(812.5) - rollout_corr/kl:0.023
(TaskRunner pid=4242) some other line with step:x in it
step:2 - actor/pg_loss:0.01 - actor/grad_norm:0.0 - critic/rewards/mean:nan - \
training/rollout_probs_diff_mean:0.2 - timing_s/gen:1.9 - perf/throughput:900
"""


def test_verl_console_lines_parse_per_step():
    rows = framework.parse_metrics(VERL_LINES, MetricsSource(format="kv-console"))
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[0]["training/rollout_probs_diff_mean"] == 6.4e-06
    assert rows[0]["perf/throughput"] == 812.5
    assert rows[0]["actor/pg_loss"] == -0.0123
    assert math.isnan(rows[1]["critic/rewards/mean"])


def test_dict_lines_and_jsonl_parse_with_step_rules():
    text = "noise\n{'loss': '0.1', 'reward': '0.5'}\n{'loss': 0.2, 'reward': 0.25}\n{'train_runtime': '1'}\n"
    rows = framework.parse_metrics(text, MetricsSource(format="dict-lines", row_key="loss"))
    assert rows == [{"loss": 0.1, "reward": 0.5, "step": 1}, {"loss": 0.2, "reward": 0.25, "step": 2}]
    jsonl = '{"it": 3, "train/train_rollout_logprob_abs_diff": 0.01}\n{"bad json\n'
    rows = framework.parse_metrics(jsonl, MetricsSource(format="jsonl", step_key="it"))
    assert rows == [{"it": 3.0, "step": 3, "train/train_rollout_logprob_abs_diff": 0.01}]


def test_checks_judge_every_any_first_last_and_name_a_missing_metric():
    rows = framework.parse_metrics(VERL_LINES, MetricsSource(format="kv-console"))
    diff = verdict.metric_check(rows, "training/rollout_probs_diff_mean", "<=", 0.1, "every")
    assert not diff.passed and "step 2: 0.2" in diff.detail
    assert verdict.metric_check(rows, "training/rollout_probs_diff_mean", "<=", 0.1, "first").passed
    assert verdict.metric_check(rows, "actor/grad_norm", ">", 0.0, "any").passed
    assert not verdict.metric_check(rows, "actor/grad_norm", ">", 0.0, "last").passed
    assert not verdict.metric_check(rows, "critic/rewards/mean", "finite", None, "every").passed
    assert verdict.metric_check(rows, "timing_s/gen", "present", None, "every").passed
    missing = verdict.metric_check(rows, "timing_s/update_weights", "present", None, "every")
    assert not missing.passed and "timing_s/update_weights missing at step(s) [2]" in missing.detail
    never = verdict.metric_check(rows, "train/kl", "finite", None, "every")
    assert not never.passed and never.detail == "train/kl missing: none of 2 logged step(s) has it"


def test_placeholders_are_filled_and_braces_elsewhere_untouched():
    values = {"model_dir": "/m", "steps": "2"}
    assert (
        framework.fill("actor_rollout_ref.model.path={model_dir}", values)
        == "actor_rollout_ref.model.path=/m"
    )
    assert framework.fill("trainer.total_training_steps={steps}", values) == "trainer.total_training_steps=2"
    assert framework.fill("trainer.logger=[console]", values) == "trainer.logger=[console]"


def test_shipped_verl_recipes_declare_the_framework_smoke():
    for name in ("verl-0.9.0-rocm10", "verl-0.7.1-rocm7.0.2"):
        recipe, _ = load_recipe(name)
        decl = recipe.framework_smoke
        assert decl is not None and decl.framework == "verl" and decl.steps == 2
        argv = " ".join(decl.command)
        for needed in (
            "verl.trainer.main_ppo",
            "algorithm.adv_estimator=grpo",
            "actor_rollout_ref.rollout.name=vllm",
            "actor_rollout_ref.model.use_remove_padding=False",
            "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
            "trainer.logger=[console]",
            "reward.custom_reward_function.path={reward_py}",
        ):
            assert needed in argv
        assert decl.env["WANDB_MODE"] == "disabled"
        assert "training/rollout_probs_diff_mean" in {c.metric for c in decl.checks}


def _recipe(tmp_path: Path, smoke: str) -> Path:
    (tmp_path / "tiny-pip.yaml").write_text((FIXTURES / "tiny-pip.yaml").read_text())
    path = tmp_path / "fw.yaml"
    path.write_text(
        "name: fw\nextends: tiny-pip\ndescription: test\n"
        "publish: {repository: localhost/t/fw, tag: 'fw_{arch}', aliases: []}\n"
        "framework_smoke:\n" + textwrap.indent(textwrap.dedent(smoke), "  ")
    )
    return path


GOOD = """\
framework: sleeper
command: ["{python}", "-c", "print('step:1 - a:1')"]
timeout_s: 30
metrics: {format: kv-console}
checks: [{metric: a, op: ">", value: 0.0}]
"""


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (("{python}", "{pyth}"), "unknown placeholder(s) {pyth}"),
        (('op: ">", value: 0.0', 'op: ">"'), "a > needs a finite value"),
        (('op: ">"', 'op: "=~"'), "op"),
        (("timeout_s: 30", "timeout_s: 0"), "timeout_s"),
        (("format: kv-console", "format: csv"), "format"),
        (
            ("format: kv-console", "format: kv-console, row_key: loss"),
            "kv-console lines carry their own step",
        ),
    ],
)
def test_bad_declarations_exit_2_with_one_line(tmp_path, capsys, change, named):
    path = _recipe(tmp_path, GOOD.replace(*change))
    with pytest.raises(SystemExit) as exc:
        main(["smoke", "framework", str(path), "--report", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and named in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_recipe_without_a_declaration_exits_2(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["smoke", "framework", str(FIXTURES / "tiny-pip.yaml"), "--report", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "declares no framework smoke" in err and err.count("\n") == 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def test_a_framework_past_its_time_limit_is_killed_whole_and_fails(tmp_path):
    pytest.importorskip("pyarrow", reason="the smoke's parquet is written with pyarrow (test extra)")
    # A parent that starts a child (as a framework starts Ray, engine and trainer processes), both asleep.
    script = (
        "import subprocess, sys, time; "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
        "print('step:1 - a:1', flush=True); "
        "print('child', child.pid, flush=True); "
        "time.sleep(600)"
    )
    decl = FrameworkSmoke.model_validate(
        {
            "framework": "sleeper",
            "command": ("{python}", "-c", script),
            "timeout_s": 10,
            "steps": 2,
            "metrics": {"format": "kv-console"},
            "checks": ({"metric": "a", "op": ">", "value": 0.0},),
        }
    )
    summary = framework.run_framework_smoke(decl, tmp_path, recipe="fw", timeout_s=4, python=sys.executable)
    assert summary["timed_out"] and not summary["passed"]
    assert summary["failed"] == ["exit_clean", "steps_seen"]
    exit_line = summary["criteria"][0]
    assert exit_line["detail"].startswith("killed at the time limit")
    log = (tmp_path / framework.LOG_NAME).read_text()
    child = int(log.split("child ")[1].split()[0])
    assert not _alive(child)
    assert summary["metrics"] == [{"step": 1, "a": 1.0}]
    assert (tmp_path / "summary.json").is_file() and (tmp_path / "model" / "config.json").is_file()
