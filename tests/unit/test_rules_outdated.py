"""`rocmstack outdated`: the newest release per pin from the real index (``network``) and what check says
with it; git branches and tags on local repositories (file://, mapped from the recipe's https URL)."""

from __future__ import annotations

import json

import pytest

from rocmstack.errors import ExitCode, NetworkError
from rocmstack.recipe.load import load_recipe
from rocmstack.recipe.resolve import resolve
from rocmstack.rules import outdated as O
from tests.unit.test_resolver_closure import UPSTREAM, _recipe
from tests.unit.test_resolver_closure import env as env
from tests.unit.test_resolver_git import _git, commit


@pytest.mark.network
def test_old_pins_are_outdated_and_the_bump_is_judged(cli, tmp_path, env):
    recipe = _recipe(tmp_path)
    assert cli("lock", str(recipe), env=env).code == 0
    res = cli("outdated", str(recipe), "--json", env=env)
    assert res.code == 0, res.err
    rows = {r["name"]: r for r in json.loads(res.out)}
    ini = rows["iniconfig"]
    assert ini["status"] == "outdated" and ini["pinned"] == "2.0.0" and ini["locked"] == "2.0.0"
    assert tuple(int(x) for x in ini["latest"].split(".")[:2]) > (2, 0)
    assert ini["verdict"].startswith("ok: ") and "packages resolve" in ini["verdict"]
    assert rows["helper"]["status"] == "current" and rows["helper"]["latest"] == rows["helper"]["locked"]


def test_a_moved_branch_and_a_newer_tag_are_reported(tmp_path, monkeypatch, env):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    repo = tmp_path / "upstream"
    locked = _git(repo, "rev-parse", "HEAD")
    _git(repo, "tag", "v1.0")
    head = commit(repo, {"x": "2"}, "two")
    _git(repo, "tag", "v1.10")
    _git(repo, "tag", "not-a-version")
    assert O._git_row("helper", UPSTREAM, "main", locked, "tiny").status == "outdated"
    row = O._git_row("helper", UPSTREAM, "main", locked, "tiny")
    assert row.latest == head and "`rocmstack lock tiny --refresh helper`" in row.verdict
    tag = O._git_row("helper", UPSTREAM, "v1.0", locked, "tiny")
    assert (tag.status, tag.latest) == ("outdated", "v1.10")
    assert O._git_row("helper", UPSTREAM, "v1.10", head, "tiny").status == "current"


def test_unreachable_index_is_exit_4(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCMSTACK_PYPI_JSON", "http://127.0.0.1:9/pypi")
    with pytest.raises(NetworkError) as exc:
        O.latest_release("iniconfig", timeout=5)
    assert exc.value.exit_code == ExitCode.ENGINE and "package index unreachable" in exc.value.message


def test_base_components_are_not_looked_up():
    recipe, path = load_recipe("verl-0.7.1-rocm7.0.2")
    rows = O.outdated(resolve(recipe, path, None))
    assert {r.status for r in rows} == {"base"}
