"""A child of a locked recipe locks offline from its parent's lock: what the parent left unlocked (a git
remote out of reach, `--allow-unreachable-git`) stays unlocked without the flag; any other remote must
answer. The relock hint runs as printed (it keeps --output); an unlocked render says so beside its result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.test_resolver_closure import UPSTREAM, _entry, _recipe, env  # noqa: F401  (env: a fixture)

CHILD = (
    "name: tiny-debug\nextends: tiny\ndescription: tiny with debug logging\n"
    "env:\n  TINY_DEBUG: '1'\n"
    "publish:\n  repository: localhost/rocmstack-test/tiny-debug\n  tag: t-{arch}\n  aliases: []\n"
)


def _gone(base: dict, tmp_path: Path) -> dict:
    return {**base, "GIT_CONFIG_KEY_0": f"url.{(tmp_path / 'gone').as_uri()}.insteadOf"}


@pytest.mark.network
def test_a_child_locks_offline_from_a_parent_that_left_a_remote_unlocked(cli, tmp_path, env):  # noqa: F811
    gone = _gone(env, tmp_path)
    parent = _recipe(tmp_path, "tiny")
    assert cli("lock", str(parent), "--allow-unreachable-git", env=gone).code == 0
    child = tmp_path / "tiny-debug.yaml"
    child.write_text(CHILD)
    res = cli("lock", str(child), env=gone)
    assert res.code == 0, res.err
    entry = _entry(tmp_path / "tiny-debug.lock.json")
    assert entry["git"]["helper"]["commit"] is None and entry["requirements_unlocked"] == ["helper"]
    # Once the remote answers, the child's next lock pins it: kept unlocked only while out of reach.
    assert cli("lock", str(child), env=env).code == 0
    assert _entry(tmp_path / "tiny-debug.lock.json")["git"]["helper"]["commit"]


@pytest.mark.network
def test_a_child_that_moves_an_unlocked_ref_still_needs_its_remote(cli, tmp_path, env):  # noqa: F811
    gone = _gone(env, tmp_path)
    parent = _recipe(tmp_path, "tiny")
    assert cli("lock", str(parent), "--allow-unreachable-git", env=gone).code == 0
    child = tmp_path / "tiny-debug.yaml"
    child.write_text(CHILD + "components:\n  helper:\n    ref: v2\n")
    res = cli("lock", str(child), env=gone)
    assert res.code == 4 and "--allow-unreachable-git" in res.err
    assert not (tmp_path / "tiny-debug.lock.json").exists()


def test_the_unreachable_remote_hint_keeps_out_dir(cli, tmp_path, env):  # noqa: F811
    recipe = _recipe(tmp_path)
    out = tmp_path / "locks"
    out.mkdir()
    res = cli("lock", str(recipe), "--output", str(out), "--pins-only", env=_gone(env, tmp_path))
    assert res.code == 0  # --pins-only asks no remote
    res = cli("lock", str(recipe), "--output", str(out), env=_gone(env, tmp_path))
    errors = [line for line in res.err.splitlines() if line.startswith("rocmstack:")]
    assert res.code == 4 and f"git remote {UPSTREAM} unreachable" in errors[0]
    assert f"--output {out} --allow-unreachable-git" in errors[0]
    assert json.loads((out / "tiny.lock.json").read_text())  # the pins-only lock is left as it was


def test_an_unlocked_render_says_so_beside_its_result(cli, tmp_path):
    recipe = _recipe(tmp_path)
    res = cli("render", str(recipe), "-o", str(tmp_path / "ctx"))
    assert res.code == 0, res.err
    assert "UNLOCKED: no lock entry in tiny.lock.json [gfx942]" in res.out and "not hash-checked" in res.out
