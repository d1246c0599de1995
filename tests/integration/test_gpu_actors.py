"""Stopping actors on a real local Ray instance: an idle actor exits through its exit handlers (what frees
the buffers it shared), a hung one is killed after the grace period, a dead one is no error."""

from __future__ import annotations

import atexit
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from rocmstack.gpu.actors import stop_actors

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _holder_class() -> type:
    """Made here so Ray ships it by value: its workers cannot import a test module."""

    class Holder:
        def __init__(self, marker: str) -> None:
            atexit.register(Path(marker).write_text, "exited")

        def ping(self) -> str:
            return "pong"

        def hang(self) -> None:
            time.sleep(3600)

    return Holder


@pytest.fixture(scope="module")
def local_ray():
    if ray.is_initialized():
        yield
        return
    temp_dir = tempfile.mkdtemp(prefix="rgat-", dir="/tmp")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp_dir)
    yield
    ray.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)


def _holder(marker: Path):
    actor = ray.remote(_holder_class()).options(num_cpus=0).remote(str(marker))
    assert ray.get(actor.ping.remote(), timeout=120) == "pong"
    return actor


def _dead(actor, within: float = 30.0) -> bool:
    """Whether the actor is gone within ``within`` seconds: ray.kill only sends the request, and a call
    made right after it may still be answered."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            ray.get(actor.ping.remote(), timeout=5)
        except ray.exceptions.RayActorError:
            return True
        except ray.exceptions.GetTimeoutError:
            pass
        time.sleep(0.1)
    return False


def test_idle_actors_exit_through_their_exit_handlers(local_ray, tmp_path):
    markers = [tmp_path / "a", tmp_path / "b"]
    actors = [_holder(m) for m in markers]
    stop_actors(actors, grace_s=60)
    assert all(_dead(a) for a in actors)
    deadline = time.monotonic() + 30
    while not all(m.exists() for m in markers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [m.read_text() for m in markers] == ["exited", "exited"]  # ray.kill alone never writes them


def test_killing_alone_skips_the_exit_handlers(local_ray, tmp_path):
    """The reason stop_actors exists: the contrast that makes the test above mean something."""
    marker = tmp_path / "k"
    actor = _holder(marker)
    ray.kill(actor)
    assert _dead(actor)
    time.sleep(2)
    assert not marker.exists()


def test_a_hung_actor_is_killed_after_the_grace_period(local_ray, tmp_path):
    actor = _holder(tmp_path / "h")
    actor.hang.remote()
    time.sleep(1)  # the call is running: the exit request queues behind it
    stop_actors([actor], grace_s=2)
    assert _dead(actor)
    assert not (tmp_path / "h").exists()


def test_stopping_a_dead_actor_is_no_error(local_ray, tmp_path):
    actor = _holder(tmp_path / "d")
    ray.kill(actor)
    assert _dead(actor)
    stop_actors([actor], grace_s=2)
    stop_actors([])
