"""The shipped locks are current: every entry's render hash is the one its locked inputs give with this
checkout's templates, patches and rocmstack source, so a fresh clone never says "render hash moved" and every
content tag names what a build of this commit holds. A change that moves them is committed with
`make relock` (`rocmstack lock --all --hash-only`: no resolver, no network)."""

from __future__ import annotations

import pytest

from rocmstack.lock.file import lock_path, read_lock
from rocmstack.prepare import rehashed
from rocmstack.recipe.load import load_recipe, recipe_files
from rocmstack.recipe.resolve import resolve


@pytest.mark.parametrize("name", sorted(recipe_files()))
def test_every_shipped_lock_entry_has_the_render_hash_of_this_checkout(name):
    recipe, path = load_recipe(name)
    lock = read_lock(lock_path(path))
    assert lock, f"{name} has no lock"
    moved = [
        key
        for key, entry in lock["entries"].items()
        if rehashed(resolve(recipe, path, key), entry)["render_hash"] != entry["render_hash"]
    ]
    assert not moved, f"{name}: render hash moved for {moved}: run `make relock` and commit the locks"
