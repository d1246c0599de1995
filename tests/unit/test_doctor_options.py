"""doctor.options.validated: the one home of the doctor's option checks, for every command that runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rocmstack.doctor import options as doctor_options
from rocmstack.doctor.model import DoctorOptions
from rocmstack.errors import InputError


def test_the_raw_texts_are_parsed():
    opts = doctor_options.validated(sizes="1M..16M", sync_bytes="2M", budget="2m", gpu_arch="gfx942;gfx950")
    assert (opts.active.min_bytes, opts.active.max_bytes, opts.active.sync_bytes) == (
        1 << 20,
        16 << 20,
        2 << 20,
    )
    assert opts.budget_s == 120.0 and opts.level == 2  # a budget alone picks among levels 1 and 2
    assert opts.gpu_archs == ("gfx942", "gfx950")
    assert doctor_options.validated(burn_in="90s").burnin.minutes == 1.5
    assert doctor_options.validated() == DoctorOptions()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"probe_timeout": 0}, "--probe-timeout 0s must be positive"),
        ({"expect_gpus": -1}, "--expect-gpus -1 is negative"),
        ({"tensor_parallel": 0}, "--tensor-parallel 0 must be >= 1"),
        ({"memory_share": 1.5}, "--memory-share 1.5 is outside (0, 1]"),
        ({"fast": True, "deep": True}, "--fast and --deep both given"),
        ({"collectives": ("gossip",)}, "--collective 'gossip' is unknown"),
        ({"sizes": "1G..1M"}, "MAX below MIN"),
        ({"comm_inits": 0}, "--comm-inits 0 must be >= 1"),
        ({"budget": "soon"}, "--budget 'soon' is not a positive duration"),
        ({"budget": "10s", "cluster_address": "auto"}, "--budget times this node's own run"),
        ({"level": 4, "cluster_address": "auto"}, "--level 4 (the burn-in) runs on this node"),
        ({"level": 3}, "--level 3 runs across a Ray cluster"),
        ({"burnin_minutes": 0}, "--burn-in 0m must be positive"),
        ({"burn_in": "0s"}, "--burn-in '0s' is not a positive duration"),
        ({"culprit_budget": 0}, "--culprit-budget 0 must be positive"),
        ({"gpu_arch": "gfx1"}, "--gpu-arch 'gfx1': the checkpoint preflight knows"),
        ({"save_baseline": Path("b.json")}, "--save-busbw-baseline saves level 2's busbw"),
        (
            {"save_baseline": Path("b.json"), "level": 2, "cluster_address": "auto"},
            "--save-busbw-baseline keeps this node's own busbw",
        ),
        ({"save_baseline": Path("/"), "level": 2}, "--save-busbw-baseline '/': is a folder"),
    ],
)
def test_a_bad_option_is_named(fields, message):
    with pytest.raises(InputError) as exc:
        doctor_options.validated(**fields)
    assert message in str(exc.value)


def test_validate_gets_the_doctors_checks(tmp_path):
    from rocmstack.validate.pipeline import ValidateOptions

    with pytest.raises(InputError, match="--expect-gpus -1 is negative"):
        ValidateOptions(report_dir=tmp_path / "r", expect_gpus=-1).validated()


def test_save_baseline_takes_a_file_whose_folders_are_made_as_needed(tmp_path):
    target = tmp_path / "new" / "busbw.json"
    assert doctor_options.validated(level=2, save_baseline=target).active.save_baseline == target


def _doctor(capsys, *args: str) -> tuple[int, str]:
    from rocmstack.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["doctor", *args])
    return int(exc.value.code or 0), capsys.readouterr().err


def test_the_busbw_baseline_has_its_own_spelling_and_the_old_ones_still_read(capsys, tmp_path):
    """--baseline and --save-baseline are the rollout bench's; the doctor's busbw baseline is
    --busbw-baseline / --save-busbw-baseline. The doctor's old spellings, the bare flag (save into the
    baseline file) among them, are read for one release with one note; all reach the same checks."""
    code, err = _doctor(capsys, "--save-busbw-baseline", str(tmp_path / "b.json"), "--json")
    assert code == 2 and "note:" not in err and "--save-busbw-baseline saves level 2's busbw" in err
    code, err = _doctor(capsys, "--save-baseline", str(tmp_path / "b.json"), "--json")
    assert code == 2 and "--save-busbw-baseline saves level 2's busbw" in err
    assert err.startswith("note: --save-baseline is deprecated; use --save-busbw-baseline\n")
    for bare in (["--save-baseline", "--json"], ["--json", "--save-baseline"]):
        code, err = _doctor(capsys, "--busbw-baseline", str(tmp_path / "b.json"), *bare)
        assert code == 2 and "--save-busbw-baseline saves level 2's busbw" in err
        assert err.startswith(
            "note: --save-baseline without FILE is deprecated; use --save-busbw-baseline FILE\n"
        )
    code, err = _doctor(capsys, "--baseline", str(tmp_path / "b.json"), "--save-baseline", "--json")
    assert code == 2 and err.count("note:") == 2 and "deprecated; use --busbw-baseline" in err
    code, err = _doctor(capsys, "--level", "2", "--ray-address", "auto", "--save-busbw-baseline", "x.json")
    assert code == 2 and "--save-busbw-baseline keeps this node's own busbw" in err


def test_the_time_options_read_durations(capsys):
    for flag in ("--probe-timeout", "--cluster-timeout", "--culprit-budget"):
        code, err = _doctor(capsys, flag, "soon")
        assert code == 2 and f"{flag} 'soon' is not a positive duration" in err
    code, err = _doctor(capsys, "--timeout", "0")  # the old spelling of --probe-timeout, in seconds
    assert code == 2 and err.startswith("note: --timeout is deprecated; use --probe-timeout\n")
    assert "--timeout '0' is not a positive duration" in err


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="drops to nobody from root")
def test_save_baseline_into_a_folder_the_user_cannot_write_is_refused_before_any_work():
    top = Path(tempfile.mkdtemp(prefix="rsb-", dir="/tmp"))  # pytest's tmp_path is root's alone (0700)
    top.chmod(0o755)
    locked = top / "locked"
    locked.mkdir(mode=0o755)  # root's: nobody may read it but not write it
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    proc = subprocess.run(
        [*nobody, sys.executable, "-m", "rocmstack", "doctor", "--level", "2", "--save-busbw-baseline",
         str(locked / "sub" / "b.json")],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(top)},
    )  # fmt: skip
    shutil.rmtree(top)
    assert proc.returncode == 2, proc.stderr
    assert f"'{locked}' is not writable" in proc.stderr and "Traceback" not in proc.stderr
