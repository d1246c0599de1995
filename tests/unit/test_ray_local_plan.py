"""The private Ray start's limits and pauses: arithmetic over the load average, and the retry loop over a
ray.init that fails as told (no Ray started, no sleeps)."""

from __future__ import annotations

import os

import pytest

from rocmstack.gpu.ray_local import (
    ATTEMPTS,
    BACKOFF_MAX_S,
    BACKOFF_S,
    LOAD_FACTOR_MAX,
    START_TIMEOUT_ENV,
    START_TIMEOUT_S,
    _timed_out,
    load_factor,
    start_plan,
    start_timeout,
)


@pytest.mark.parametrize(
    ("load1", "cpus", "factor"),
    [
        (0.2, 2, 1.0),  # idle: never below 1
        (2.0, 2, 1.0),
        (4.0, 2, 2.0),
        (7.0, 2, LOAD_FACTOR_MAX),  # the loaded CI machine: bounded
        (100.0, 2, LOAD_FACTOR_MAX),
        (None, 2, 1.0),  # no load average on this system
        (3.0, None, 1.0),
        (3.0, 0, 1.0),
        (float("nan"), 2, 1.0),
    ],
)
def test_load_factor_is_load_per_core_bounded(load1, cpus, factor):
    assert load_factor(load1, cpus) == factor


def test_idle_machine_plan_is_the_base_limit_and_doubling_pauses():
    plan = start_plan(0.0, 16)
    assert len(plan) == ATTEMPTS
    assert [limit for _, limit in plan] == [START_TIMEOUT_S] * ATTEMPTS
    assert [pause for pause, _ in plan] == [0.0, BACKOFF_S, BACKOFF_S * 2, BACKOFF_S * 4]


def test_loaded_machine_plan_scales_limit_and_pauses_within_bounds():
    plan = start_plan(7.0, 2)  # load average 7 on 2 cores: factor 3 at most
    assert [limit for _, limit in plan] == [START_TIMEOUT_S * LOAD_FACTOR_MAX] * ATTEMPTS
    assert [pause for pause, _ in plan] == [0.0, 6.0, 12.0, 24.0]
    assert all(pause <= BACKOFF_MAX_S for pause, _ in start_plan(100.0, 1, attempts=10))
    assert start_plan(100.0, 1, attempts=10)[-1][0] == BACKOFF_MAX_S


def test_a_limit_from_the_environment_is_taken_as_it_is():
    plan = start_plan(7.0, 2, 0.3)
    assert [limit for _, limit in plan] == [0.3] * ATTEMPTS
    assert plan[1][0] == 6.0  # the pauses still follow the load


def test_at_least_one_attempt():
    assert start_plan(0.0, 4, attempts=0) == [(0.0, START_TIMEOUT_S)]


@pytest.mark.parametrize(
    ("raw", "value"), [("", None), ("0.3", 0.3), ("abc", None), ("0", None), ("-5", None)]
)
def test_start_timeout_from_the_environment(raw, value):
    assert start_timeout({START_TIMEOUT_ENV: raw}) == value


@pytest.mark.parametrize(
    ("message", "slow"),
    [
        ("The current node timed out during startup. This could happen because ...", True),
        ("Timed out while waiting for GCS to become available.", True),
        ("RPC error: Deadline Exceeded", True),
        ("Ray does not support Python 3.99", False),
    ],
)
def test_which_failures_are_tried_again(message, slow):
    assert _timed_out(Exception(message)) is slow


def _starts(monkeypatch, tmp_path, failures):
    """private_ray with ray.init failing with each of ``failures`` in turn, then succeeding; no real Ray."""
    import ray

    from rocmstack.gpu import ray_local

    calls, said = [], []

    def fake_init(**kwargs):
        calls.append(kwargs["_temp_dir"])
        if len(calls) <= len(failures):
            raise failures[len(calls) - 1]

    monkeypatch.setattr(ray, "init", fake_init)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    monkeypatch.setattr(ray_local.time, "sleep", lambda _s: None)
    monkeypatch.setattr(ray_local, "machine_load", lambda: (1.0, 2))
    monkeypatch.setenv(ray_local.TMPDIR_ENV, str(tmp_path))
    return calls, said, ray_local


def test_rays_own_slow_start_is_tried_again_in_a_new_folder(monkeypatch, tmp_path):
    slow = Exception("The current node timed out during startup. This could happen because ...")
    calls, said, ray_local = _starts(monkeypatch, tmp_path, [slow, slow])
    with ray_local.private_ray("t-", num_cpus=1, progress=said.append) as info:
        assert info["attempts"] == 3
    assert len(set(calls)) == 3 and said[0].startswith("Ray did not start in time (attempt 1 of 4: ")
    assert said[1].endswith("retrying in 4 s")


def test_a_start_past_rocmstacks_limit_is_not_tried_again_in_the_process(monkeypatch, tmp_path):
    from rocmstack.errors import EngineError

    calls, said, ray_local = _starts(monkeypatch, tmp_path, [ray_local_timeout()])
    with (
        pytest.raises(EngineError, match=r"\(1 attempt; last: no Ray node within 9 s\)"),
        ray_local.private_ray("t-", num_cpus=1, progress=said.append),
    ):
        pass
    assert len(calls) == 1 and said == []


def ray_local_timeout():
    from rocmstack.gpu.ray_local import _StartTimeout

    return _StartTimeout("no Ray node within 9 s")


def test_rays_gcs_timeouts_follow_the_start_limit_for_the_instances_life(monkeypatch):
    from rocmstack.gpu.ray_local import GCS_PATIENCE_ENV, _instance_env

    connect, reconnect = GCS_PATIENCE_ENV
    monkeypatch.delenv(connect, raising=False)
    monkeypatch.setenv(reconnect, "45")  # the user's own value stays
    with _instance_env(540.0):
        assert os.environ[connect] == "540" and os.environ[reconnect] == "45"
    assert connect not in os.environ and os.environ[reconnect] == "45"
    with _instance_env(10.0):
        assert os.environ[connect] == "60"  # never below Ray's own


def test_the_private_instances_workers_keep_the_callers_priority(monkeypatch):
    from rocmstack.gpu.ray_local import WORKER_NICENESS_ENV, _instance_env, instance_env

    # Ray's default lowers every worker by 15: beside busy processes its actors starve.
    assert instance_env(180.0, {})[WORKER_NICENESS_ENV] == "0"
    assert WORKER_NICENESS_ENV not in instance_env(180.0, {WORKER_NICENESS_ENV: "5"})  # the user's stays
    monkeypatch.delenv(WORKER_NICENESS_ENV, raising=False)
    with _instance_env(180.0):
        assert os.environ[WORKER_NICENESS_ENV] == "0"
    assert WORKER_NICENESS_ENV not in os.environ
