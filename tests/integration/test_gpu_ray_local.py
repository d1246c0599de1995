"""Private Ray instances of the doctor and the smoke job, on a machine that runs another Ray: real Ray, real
processes (`ray start` for the other instance, `rocmstack` as a user runs it)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from test_doctor_cluster import free_ports

from rocmstack.gpu.ray_local import START_TIMEOUT_ENV, TMPDIR_ENV, stop_leftovers

pytestmark = [pytest.mark.slow]

RAY = Path(sys.executable).with_name("ray")

SMOKE = ("smoke", "grpo", "--device", "cpu", "--steps", "2", "--prompts", "4")
DOCTOR = ("doctor", "--level", "2", "--expect-gpus", "0", "--only", "weight-sync-broadcast")


def _daemons(folder: Path) -> list[str]:
    out = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if str(folder) in line and "ps -ww" not in line]


@pytest.fixture(scope="module")
def other_ray():
    """Another Ray on the machine, as `ray start --head` leaves one (its agents on Ray's default ports),
    in its own folder; its GCS and client-server ports are free ones, so its client server, which names
    neither the folder nor anything else of its own, can be found and stopped by its port."""
    pytest.importorskip("ray")
    folder = Path(tempfile.mkdtemp(prefix="rother-", dir="/tmp"))
    gcs_port, client_port = free_ports(2)  # bound at once: two distinct ports
    started = subprocess.run(
        [
            str(RAY),
            "start",
            "--head",
            f"--temp-dir={folder}",
            f"--port={gcs_port}",
            f"--ray-client-server-port={client_port}",
            "--num-cpus=1",
            "--include-dashboard=false",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=180,
        env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
    )
    try:
        assert started.returncode == 0
        yield folder
    finally:
        # Only the processes of this instance, by their ids.
        stop_leftovers(str(folder))
        stop_leftovers(f"--port={client_port} --mode=proxy")
        subprocess.run(["rm", "-rf", str(folder)], check=False)


@pytest.fixture
def ray_tmp(tmp_path_factory):
    # Short: Ray's socket paths must fit 107 bytes.
    folder = Path(tempfile.mkdtemp(prefix="rt-", dir="/tmp"))
    yield folder
    subprocess.run(["rm", "-rf", str(folder)], check=False)


def _rocmstack(args: tuple[str, ...], env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rocmstack", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=timeout,
    )


@pytest.mark.timeout(420)
def test_smoke_runs_beside_another_ray_and_leaves_it_and_nothing_else(other_ray, ray_tmp, tmp_path):
    before = _daemons(other_ray)
    assert before, "the other Ray instance is not running"
    r = _rocmstack((*SMOKE, "--output", str(tmp_path / "rep")), {TMPDIR_ENV: str(ray_tmp)})
    assert r.returncode in (0, 1), r.stderr  # 2 steps: a verdict either way, never a start failure
    assert "Traceback" not in r.stderr
    assert (tmp_path / "rep" / "summary.json").is_file()
    assert list(ray_tmp.iterdir()) == []  # its private folder is gone
    assert _daemons(ray_tmp) == []  # and so are its daemons
    assert len(_daemons(other_ray)) == len(before)  # the other instance was not touched


@pytest.mark.timeout(300)
@pytest.mark.parametrize("args", [SMOKE, DOCTOR], ids=["smoke", "doctor"])
def test_a_start_past_its_limit_is_one_line_exit_4_and_not_retried_in_the_process(args, other_ray, ray_tmp):
    # A start limit no Ray can meet: the attempt times out for real, mid-start. A second ray.init in a process
    # whose start was interrupted anywhere can abort it (SIGABRT, seen here), so the limit ends the start;
    # Ray's own slow-start errors are retried (tests/unit/test_ray_local_plan.py).
    r = _rocmstack(args, {START_TIMEOUT_ENV: "0.3", TMPDIR_ENV: str(ray_tmp)})
    errors = [line for line in r.stderr.splitlines() if line.startswith("rocmstack: error:")]
    assert r.returncode == 4, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert len(errors) == 1, r.stderr
    assert errors[0].startswith(
        "rocmstack: error: no private Ray instance could start (1 attempt; "
        "last: no Ray node within 0.3 s) (check the machine's load"
    ), errors[0]
    assert errors[0].endswith(
        f"`ray status` for other instances; {START_TIMEOUT_ENV}=SECONDS allows a slower start)"
    )
    assert "Ray did not start in time" not in r.stderr
    assert list(ray_tmp.iterdir()) == []
    assert _daemons(ray_tmp) == []
    assert _daemons(other_ray)


# A task's priority against its driver's, in a private instance started by a driver niced by 2.
_NICENESS = """
import os, ray
from rocmstack.gpu.ray_local import private_ray
with private_ray("rnice-", num_cpus=1, log_to_driver=False):
    print(os.nice(0), ray.get(ray.remote(lambda: os.nice(0)).remote()))
"""


@pytest.mark.timeout(300)
def test_the_private_instances_workers_run_at_their_drivers_priority(ray_tmp):
    # Ray's default lowers every worker by 15 (a nice-15 process gets 36/1024 of a busy neighbour's share):
    # the private instance keeps them at the driver's priority, which a `nice` in front still lowers.
    r = subprocess.run(
        [sys.executable, "-c", _NICENESS],
        capture_output=True,
        text=True,
        env={**os.environ, TMPDIR_ENV: str(ray_tmp)},
        timeout=240,
        preexec_fn=lambda: os.nice(2),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["2", "2"]
    assert list(ray_tmp.iterdir()) == []
