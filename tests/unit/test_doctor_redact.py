"""Secrets are masked by name in the environment dump and scrubbed by value everywhere else."""

from __future__ import annotations

from rocmstack.doctor.redact import REDACTED, env_dump, scrub, secret_values
from rocmstack.secrets import is_secret_name

ENV = {
    "HF_TOKEN": "hf_abcdefghijklmnop",
    "WANDB_API_KEY": "0123456789abcdef",
    "AWS_SECRET_ACCESS_KEY": "s3cr3tvalue",
    "DB_PASSWORD": "hunter2hunter2",
    "HIP_VISIBLE_DEVICES": "0,1",
    "HOME": "/root",
    "RAY_ADDRESS": "auto",
}


def test_names():
    for name in ("HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "github_token"):
        assert is_secret_name(name)
    assert not is_secret_name("HIP_VISIBLE_DEVICES")


def test_dump_masks_and_keeps_relevant():
    dump = env_dump(ENV)
    assert (
        dump["HF_TOKEN"] == REDACTED and dump["WANDB_API_KEY"] == REDACTED and dump["DB_PASSWORD"] == REDACTED
    )
    assert dump["HIP_VISIBLE_DEVICES"] == "0,1" and dump["RAY_ADDRESS"] == "auto"
    assert "HOME" not in dump


def test_scrub_nested_values():
    report = {
        "checks": [{"summary": "tool said hf_abcdefghijklmnop", "details": ["key=0123456789abcdef"]}],
        "n": 3,
    }
    clean = scrub(report, secret_values(ENV))
    text = repr(clean)
    assert "hf_abcdefghijklmnop" not in text and "0123456789abcdef" not in text
    assert clean["n"] == 3 and REDACTED in clean["checks"][0]["summary"]


def test_short_values_are_not_scrubbed_everywhere():
    assert secret_values({"API_KEY": "1"}) == []
