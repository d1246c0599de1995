"""Secrets are masked by name in the environment dump and scrubbed by value everywhere else."""

from __future__ import annotations

from rocmstack.redact import REDACTED, env_dump, scrub, secret_values
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


def test_names_are_judged_by_their_parts():
    for name in ("GHTOKEN", "MY_APIKEY", "GOOGLE_APPLICATION_CREDENTIALS", "db-password"):
        assert is_secret_name(name), name
    # A word inside another word is not a secret: these are settings, and hiding them hides the bug.
    for name in ("TOKENIZERS_PARALLELISM", "HIP_KEYSPACE"):
        assert not is_secret_name(name), name


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


def test_auth_names_are_secrets():
    """Credentials named AUTH hold none of the other words: npm's _auth, GitLab CI's DOCKER_AUTH_CONFIG
    (registry credentials as JSON), an HTTP Authorization header passed on."""
    for name in (
        "NPM_CONFIG__AUTH",
        "REGISTRY_AUTH",
        "DOCKER_AUTH_CONFIG",
        "HTTP_AUTHORIZATION",
        "hf_hub_auth",
    ):
        assert is_secret_name(name), name
    for name in ("AUTHOR", "HSA_AUTHORITY", "OAUTHLIB_INSECURE", "RAY_AUTHOR_NAME"):
        assert not is_secret_name(name), name
    dump = env_dump({"HF_HUB_AUTH": "Bearer abcdefgh", "NPM_CONFIG__AUTH": "dXNlcjpwYXNz"})
    assert dump == {"HF_HUB_AUTH": REDACTED, "NPM_CONFIG__AUTH": REDACTED}
    assert scrub("npm said dXNlcjpwYXNz", secret_values({"NPM_CONFIG__AUTH": "dXNlcjpwYXNz"})) == (
        f"npm said {REDACTED}"
    )


def test_credentials_in_urls_are_redacted_wherever_they_appear():
    env = {
        "HF_ENDPOINT": "https://mirror-user:mirror-pass-123@hf.example.org/api",
        "PIP_INDEX_URL": "https://__token__:pypi-AgEIcHlwaS5vcmc@pypi.example.org/simple",
        "RAY_ADDRESS": "auto",
    }
    dump = env_dump(env)
    assert dump["HF_ENDPOINT"] == f"https://{REDACTED}@hf.example.org/api" and dump["RAY_ADDRESS"] == "auto"
    report = {
        "checks": [
            # in a message, with no variable behind it (a git remote, a proxy)
            {"summary": "fetch https://oauth2:glpat-xyzxyzxyz@gitlab.example.org/g/r.git failed"},
            {"details": ["proxy http://bob:s3cret-pw@10.0.0.1:3128 refused", "ssh://git@github.com/o/r"]},
            # the password alone, echoed by a tool that took it from the variable
            {"summary": "401 for pypi-AgEIcHlwaS5vcmc and mirror-pass-123"},
        ],
        "ok": "https://pypi.org/simple/?q=a@b and user@example.org stay",
    }
    clean = scrub(report, secret_values(env))
    text = repr(clean)
    for leaked in (
        "glpat-xyzxyzxyz",
        "s3cret-pw",
        "pypi-AgEIcHlwaS5vcmc",
        "mirror-pass-123",
        "oauth2",
        "bob:",
    ):
        assert leaked not in text, leaked
    assert clean["checks"][0]["summary"] == f"fetch https://{REDACTED}@gitlab.example.org/g/r.git failed"
    assert clean["checks"][1]["details"][1] == f"ssh://{REDACTED}@github.com/o/r"
    assert clean["ok"] == report["ok"]
    assert scrub("https://u:p@h", []) == f"https://{REDACTED}@h"  # with no secret-named variable too
