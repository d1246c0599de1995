"""The whole GRPO smoke job on a real local Ray cluster, CPU only (gloo, shared-memory handles).

One Ray instance serves every test here (starting Ray costs seconds on CI's 2 cores).
"""

from __future__ import annotations

import json
import shutil
import tempfile

import pytest

from rocmstack.smoke import SmokeOptions, run_grpo_smoke
from rocmstack.smoke.config import INJECT_EXPECTS
from rocmstack.smoke.report import SmokeSummary

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="session")
def ray_cluster():
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        yield ray
        return
    temp_dir = tempfile.mkdtemp(prefix="rsmt-", dir="/tmp")
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False, _temp_dir=temp_dir)
    yield ray
    ray.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)


def _check_pass(summary: dict) -> None:
    SmokeSummary.model_validate(json.loads(json.dumps(summary)))  # the real run is what its readers index
    assert summary["passed"], json.dumps(summary["criteria"], indent=1)
    assert summary["failed"] == []
    final = summary["final"]
    assert final["reward_last_window"] - final["reward_first_window"] >= 0.25
    assert final["sync_bytes"] > 0 and final["tokens_per_gpu_per_sec_avg"] > 0


@pytest.mark.timeout(300)
def test_colocated_cpu_learns_and_passes(ray_cluster, tmp_path):
    summary = run_grpo_smoke(SmokeOptions(device="cpu", placement="colocated", report_dir=tmp_path))
    _check_pass(summary)
    assert summary["same_device"] and summary["dtype"] == "float32"
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == summary["steps"] and rows[0]["kl"] == 0.0
    for key in (
        "raw_reward_std",
        "zero_std_group_frac",
        "entropy",
        "clip_frac",
        "sync_gb_per_s",
        "time_sync_s",
    ):
        assert key in rows[0]
    assert json.loads((tmp_path / "summary.json").read_text())["passed"] is True
    for name in ("reward.png", "logprob_diff.png", "phase_times.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.timeout(300)
def test_split_cpu_broadcasts_over_gloo_and_passes(ray_cluster):
    summary = run_grpo_smoke(SmokeOptions(device="cpu", placement="split"))
    _check_pass(summary)
    assert summary["placement"] == "split"


@pytest.mark.timeout(180)
@pytest.mark.parametrize("inject", sorted(INJECT_EXPECTS))
def test_each_injected_fault_fails_with_its_reason(ray_cluster, inject):
    summary = run_grpo_smoke(SmokeOptions(device="cpu", inject=inject, steps=4))
    assert summary["passed"] is False
    assert INJECT_EXPECTS[inject] in summary["failed"] and summary["inject_caught"] is True
    detail = {c["name"]: c["detail"] for c in summary["criteria"]}
    if inject == "skip-sync":
        assert "unchanged" in detail["sync_canary"]
    if inject == "stale-weights":
        assert "stale" in detail["sync_canary"] or "do not match" in detail["sync_canary"]


@pytest.mark.timeout(180)
def test_cli_json_and_exit_code_on_a_failed_verdict(ray_cluster):
    from typer.testing import CliRunner

    from rocmstack.cli import make_app

    result = CliRunner().invoke(
        make_app(), ["smoke", "grpo", "--device", "cpu", "--steps", "3", "--inject", "zero-reward", "--json"]
    )
    assert result.exit_code == 1, result.output
    summary = json.loads(result.stdout)
    assert summary["failed"][0] == "rewards_rise" and summary["inject"] == "zero-reward"
    # No terminal: a plain line a step (and one at least every 30 s), never a bar a log cannot show
    assert "smoke grpo: colocated on cpu, 3 steps\n" in result.stderr
    assert [ln.split(":")[1] for ln in result.stderr.splitlines() if ln.startswith("smoke grpo: step ")] == [
        " step 1/3",
        " step 2/3",
        " step 3/3",
    ]


@pytest.mark.timeout(300)
def test_a_placement_group_that_never_gets_ready_is_removed(ray_cluster, monkeypatch):
    from ray.exceptions import GetTimeoutError
    from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group

    from rocmstack.smoke import runner

    monkeypatch.setattr(runner, "PG_READY_TIMEOUT_S", 3.0, raising=False)
    hog = placement_group([{"CPU": ray_cluster.cluster_resources()["CPU"]}], strategy="STRICT_PACK")
    ray_cluster.get(hog.ready(), timeout=60)  # every CPU taken: the smoke's group can never be placed
    try:
        before = set(placement_group_table())
        with pytest.raises(GetTimeoutError):
            runner._spawn(SmokeOptions(device="cpu", placement="colocated"), "cpu", "float32", {})
        mine = [pg for pid, pg in placement_group_table().items() if pid not in before]
        assert mine and all(pg["state"] == "REMOVED" for pg in mine), mine
    finally:
        remove_placement_group(hog)


def test_ctrl_c_says_where_and_keeps_a_partial_report(ray_cluster, tmp_path):
    import os
    import signal
    import threading

    from rocmstack.errors import ExitCode, Interrupted

    def on_step(row: dict) -> None:
        if row["step"] == 1:  # the second step finished: a real SIGINT lands during the third
            threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()

    with pytest.raises(Interrupted) as exc:
        run_grpo_smoke(SmokeOptions(device="cpu", report_dir=tmp_path), on_step=on_step)
    summary = json.loads((tmp_path / "summary.json").read_text())
    rows = (tmp_path / "metrics.jsonl").read_text().splitlines()
    where = summary["interrupted"]
    assert not summary["passed"] and summary["failed"] == ["interrupted"]
    assert where["step"] == len(rows) + 1 >= 3 and where["steps"] == 30 and summary["steps"] == len(rows)
    assert exc.value.exit_code == ExitCode.INTERRUPTED
    assert exc.value.one_line() == (
        f"smoke interrupted at step {where['step']}/30, {where['phase']}; {len(rows)} finished step(s) in "
        f"{tmp_path} (marked interrupted)"
    )
    assert (tmp_path / "reward.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.timeout(300)
def test_one_step_warns_before_it_starts(ray_cluster, capsys):
    from rocmstack.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["smoke", "grpo", "--device", "cpu", "--steps", "1", "--json"])
    err = capsys.readouterr().err
    assert exc.value.code == 1
    assert err.startswith(
        "warning: --steps 1 cannot pass rewards_rise: it compares the mean reward of the first"
    )
