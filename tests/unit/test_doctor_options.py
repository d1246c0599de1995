"""doctor.options.validated: the one home of the doctor's option checks, for every command that runs it."""

from __future__ import annotations

import pytest

from rocmstack.doctor import options as doctor_options
from rocmstack.doctor.model import DoctorOptions
from rocmstack.errors import InputError


def test_the_raw_texts_are_parsed():
    opts = doctor_options.validated(sizes="1M..16M", sync_bytes="2M", budget="2m", gpu_arch="gfx942;gfx950")
    assert (opts.min_bytes, opts.max_bytes, opts.sync_bytes) == (1 << 20, 16 << 20, 2 << 20)
    assert opts.budget_s == 120.0 and opts.level == 2  # a budget alone picks among levels 1 and 2
    assert opts.gpu_archs == ("gfx942", "gfx950")
    assert doctor_options.validated(burn_in="90s").burnin_minutes == 1.5
    assert doctor_options.validated() == DoctorOptions()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"probe_timeout": 0}, "--timeout 0 must be positive"),
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
