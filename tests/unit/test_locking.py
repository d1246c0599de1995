"""``locking``: ``lock`` as a domain call; nothing is written until every entry resolved."""

from __future__ import annotations

import json

import pytest

from rocmstack.errors import InputError
from rocmstack.locking import LockRequest, lock, lock_targets, plan_locks

NAME = "verl-0.9.0-rocm10"


def test_names_without_refresh_are_refused_in_one_line():
    with pytest.raises(InputError, match="names given without --refresh: vllm"):
        lock_targets(LockRequest(recipe=NAME, names=("vllm",)))


def test_a_recipe_or_all_not_both():
    with pytest.raises(InputError, match="give a RECIPE or --all"):
        lock_targets(LockRequest(recipe=NAME, every=True))


def test_the_plan_writes_nothing_and_the_lock_writes_every_entry(tmp_path):
    said: list[str] = []
    request = LockRequest(recipe=NAME, pins_only=True, out_dir=tmp_path / "locks")
    planned, rows = plan_locks(request, said.append)
    assert not (tmp_path / "locks").exists()  # a failure after the plan leaves every lock as it was
    assert [p.dest for p in planned] == [tmp_path / "locks" / f"{NAME}.lock.json"]
    assert said == []  # --pins-only resolves nothing: no progress to say
    rows = lock(request, said.append)
    written = json.loads(planned[0].dest.read_text())
    assert set(written["entries"]) == {r["gpu_archs"] for r in rows} == set(planned[0].entries)
    assert all(r["rules"]["fail"] == 0 and r["rules"]["pass"] > 0 for r in rows)


def test_hash_only_needs_an_entry_to_rehash(tmp_path):
    with pytest.raises(InputError, match=r"--hash-only: .* has no entry in"):
        lock(LockRequest(recipe=NAME, hash_only=True, out_dir=tmp_path), lambda _line: None)
