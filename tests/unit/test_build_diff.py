"""`rocmstack diff` between two locks and between a recipe and its lock, on the committed (real) locks."""

from __future__ import annotations

import json

from rocmstack.build.diff import diff, load_side, markdown
from rocmstack.recipe.load import find_recipe

NAME = "verl-0.9.0-rocm10"


def _lock_copy(tmp_path, edit) -> str:
    doc = json.loads(find_recipe(NAME).with_name(f"{NAME}.lock.json").read_text())
    for entry in doc["entries"].values():
        edit(entry)
    path = tmp_path / f"{NAME}.lock.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_two_locks_show_packages_up_down_added_removed_and_commits(tmp_path):
    committed = str(find_recipe(NAME).with_name(f"{NAME}.lock.json"))

    def edit(entry):
        by_name = {p["name"]: p for p in entry["packages"]}
        by_name["accelerate"]["version"] = "1.14.0"  # older in the copy: the committed lock is "up"
        by_name["aiohttp"]["version"] = "9.0.0"  # newer in the copy: "down"
        entry["packages"] = [p for p in entry["packages"] if p["name"] != "yarl"]
        entry["packages"].append({"name": "extra-pkg", "version": "1.0", "hashes": [], "layer": "verl"})
        entry["git"]["mbridge"]["commit"] = "0" * 40
        entry["env"]["NEW_VAR"] = "1"

    result = diff(load_side(_lock_copy(tmp_path, edit)), load_side(committed)).to_json()
    got = {(c["section"], c["name"]): c["change"] for c in result["changes"]}
    assert got == {
        ("package", "accelerate"): "up",
        ("package", "aiohttp"): "down",
        ("package", "yarl"): "added",
        ("package", "extra-pkg"): "removed",
        ("git", "mbridge"): "changed",
        ("env", "NEW_VAR"): "removed",
    }
    assert result["summary"] == {"up": 1, "down": 1, "added": 1, "removed": 2, "changed": 1}


def test_recipe_against_its_lock_compares_pins_and_says_what_it_cannot(tmp_path, cli):
    recipe = tmp_path / f"{NAME}.yaml"
    recipe.write_text(find_recipe(NAME).read_text().replace("version: 0.18.0", "version: 0.18.1"))
    lock = str(find_recipe(NAME).with_name(f"{NAME}.lock.json"))
    res = cli("diff", lock, str(recipe), "--json")
    assert res.code == 0, res.err
    data = json.loads(res.out)
    assert data["changes"][0] == {
        "section": "component",
        "name": "megatron-core",
        "change": "up",
        "old": "0.18.0",
        "new": "0.18.1",
    }
    # Another pin is another build: the render hash says so too.
    assert [(c["section"], c["name"]) for c in data["changes"][1:]] == [("render", "render_hash")]
    assert any("packages not compared" in n for n in data["notes"])
    md = cli("diff", lock, str(recipe), "--markdown").out
    assert (
        md.startswith("### rocmstack diff")
        and "| component | `megatron-core` | ↑ up | 0.18.0 | 0.18.1 |" in md
    )
    assert markdown(diff(load_side(lock), load_side(lock))).splitlines()[2] == "no changes"


def test_bad_arguments_are_one_line_exit_2(cli, tmp_path):
    res = cli("diff", str(tmp_path / "missing.lock.json"), NAME)
    assert res.code == 2 and res.err.count("\n") == 1 and "no such lock file" in res.err
    res = cli("diff", str(find_recipe(NAME).with_name(f"{NAME}.lock.json")), NAME, "--gpu-arch", "gfx90a")
    assert res.code == 2 and "no lock entry for --gpu-arch 'gfx90a'" in res.err


def test_the_summary_is_one_unpadded_line_when_piped(cli):
    lock = str(find_recipe(NAME).with_name(f"{NAME}.lock.json"))
    res = cli("diff", lock, lock)
    # It was the table's title: wrapped to the empty table's 39 columns and padded with spaces.
    assert res.code == 0 and res.out.splitlines()[0] == f"{lock} -> {lock}: no changes"
    recipe = cli("diff", NAME, lock)
    first = recipe.out.splitlines()[0]
    assert first.startswith(f"{NAME} -> {lock}: ") and first == first.rstrip()
    assert all(line == line.rstrip() for line in recipe.out.splitlines())
