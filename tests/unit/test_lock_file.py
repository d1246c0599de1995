"""The lock file's one reader validates every entry; the writer refuses an entry that would not read back,
before anything is written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rocmstack.errors import RecipeError
from rocmstack.lock.file import entry_of, lock_path, read_lock, write_lock
from rocmstack.lock.schema import LockError
from rocmstack.recipe.load import find_recipe

NAME = "verl-0.9.0-rocm10"


@pytest.fixture
def lock_copy(tmp_path: Path) -> Path:
    dest = tmp_path / f"{NAME}.lock.json"
    shutil.copy(lock_path(find_recipe(NAME)), dest)
    return dest


def test_every_read_is_validated(lock_copy):
    assert entry_of(lock_copy, "gfx950")["git"]["mbridge"]["commit"]
    data = json.loads(lock_copy.read_text())
    data["entries"]["gfx950"]["packages"][0]["layer"] = "../.."
    lock_copy.write_text(json.dumps(data))
    for read in (lambda: read_lock(lock_copy), lambda: entry_of(lock_copy, "gfx942")):
        with pytest.raises(LockError, match=r"entry 'gfx950': packages\[0\]\.layer = '\.\./\.\.'"):
            read()


@pytest.mark.parametrize("text", ["{not json", "[" * 100_000, '{"schema": true, "entries": {}}', "[]"])
def test_unreadable_or_foreign_files_are_one_line_exit_2(lock_copy, text):
    lock_copy.write_text(text)
    with pytest.raises(RecipeError, match=r"unreadable lock file|not a rocmstack lock file") as err:
        read_lock(lock_copy)
    assert "\n" not in err.value.one_line()


def test_a_bad_entry_is_never_written(lock_copy):
    before = lock_copy.read_bytes()
    entry = entry_of(lock_copy, "gfx950")
    entry["git"]["mbridge"]["commit"] = "main"
    with pytest.raises(LockError, match=r"git\.mbridge\.commit = 'main'"):
        write_lock(lock_copy, NAME, {"gfx950": entry})
    assert lock_copy.read_bytes() == before
    assert sorted(p.name for p in lock_copy.parent.iterdir()) == [lock_copy.name]
