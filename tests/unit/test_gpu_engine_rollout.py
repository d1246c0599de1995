from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocmstack.gpu.engine_rollout import EngineRollout


class FakeRollout(EngineRollout):
    """The base's state machine over an engine that only records what it was asked to do."""

    name = "fake"

    def __init__(self, *, device: str = "cpu", sleep_mode: bool = True, stop_error: bool = False) -> None:
        super().__init__({"hidden_size": 8}, device=device, sleep_mode=sleep_mode)
        self.calls: list[str] = []
        self.stop_error = stop_error

    def _release(self) -> None:
        self.calls.append("release")

    def _resume_weights(self) -> None:
        self.calls.append("weights")

    def _resume_rest(self) -> None:
        self.calls.append("rest")

    def _stop(self) -> None:
        self.calls.append("stop")
        if self.stop_error:
            raise RuntimeError("engine stuck")


class GpuOnlyRollout(FakeRollout):
    cpu_refusal = "Fake has no CPU engine"


def test_sleep_then_wake_in_two_steps():
    r = FakeRollout()
    r.sleep()
    r.sleep()  # already asleep: the engine is not asked twice
    assert r.asleep and r.calls == ["release"]
    r.wake_weights()
    assert r.asleep and r.calls == ["release", "weights"]  # a load comes between the two wakes
    r.wake_rest()
    assert not r.asleep and r.calls == ["release", "weights", "rest"]
    r.wake_weights()
    r.wake_rest()  # awake: nothing to do
    assert r.calls == ["release", "weights", "rest"]


def test_without_sleep_mode_nothing_sleeps():
    r = FakeRollout(sleep_mode=False)
    r.sleep()
    r.wake_weights()
    r.wake_rest()
    assert not r.asleep and r.calls == []


def test_the_model_folder_lives_until_shutdown():
    r = FakeRollout()
    cfg = json.loads((r.model_dir / "config.json").read_text())
    assert cfg["model_type"] == "qwen3" and cfg["hidden_size"] == 8
    assert Path(r._tmp.name).name.startswith("rocmstack-fake-")
    r.shutdown()
    assert r.calls == ["stop"] and not r.model_dir.exists()


def test_the_model_folder_goes_even_when_the_engine_fails_to_stop():
    r = FakeRollout(stop_error=True)
    with pytest.raises(RuntimeError, match="engine stuck"):
        r.shutdown()
    assert not r.model_dir.exists()


def test_memory_on_cpu_is_not_measurable():
    r = FakeRollout()
    assert r.baseline.nbytes is None and r.memory() == r.baseline
    r.shutdown()


def test_an_engine_without_a_cpu_build_refuses_the_cpu():
    with pytest.raises(RuntimeError, match=r"^Fake has no CPU engine$"):
        GpuOnlyRollout()
