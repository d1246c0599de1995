"""A recipe's own patch folder: the ``patches_dir`` field (relative to the recipe file, inherited by a
child) and ``--patches-dir`` (wins over it) reach every command that resolves a recipe."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rocmstack.cli import main

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def _own_recipe(tmp_path: Path, field: str | None = "own-patches") -> Path:
    """tiny-pip (which lists tomli-marker, no shipped patch) beside a folder holding that patch's spec."""
    folder = tmp_path / "recipes"
    (folder / "own-patches").mkdir(parents=True)
    shutil.copy(FIXTURES / "patches" / "tomli-marker.yaml", folder / "own-patches")
    text = (FIXTURES / "recipes" / "tiny-pip.yaml").read_text(encoding="utf-8")
    if field:
        text += f"patches_dir: {field}\n"
    recipe = folder / "tiny-pip.yaml"
    recipe.write_text(text, encoding="utf-8")
    return recipe


def _patches_apply(out: str, recipe_name: str = "tiny-pip") -> str:
    runs = json.loads(out)
    run_ = next(r for r in runs if r["recipe"] == recipe_name)
    return next(x for x in run_["results"] if x["id"] == "patches-apply")["status"]


def test_check_judges_the_recipes_own_patch(capsys, tmp_path):
    recipe = _own_recipe(tmp_path)
    code, out, err = run(capsys, "check", str(recipe), "--offline", "--json")
    assert code == 0, err
    assert _patches_apply(out) == "pass"


def test_render_applies_the_recipes_own_patch(capsys, tmp_path):
    recipe = _own_recipe(tmp_path)
    code, out, err = run(capsys, "render", str(recipe), "-o", str(tmp_path / "ctx"), "--json")
    assert code == 0, err
    assert any("tomli-marker" in f for f in json.loads(out)["files"])


def test_matrix_plans_a_recipe_with_its_own_patch(capsys, tmp_path):
    recipe = _own_recipe(tmp_path)
    code, out, err = run(capsys, "matrix", "--recipe", str(recipe), "--format", "json")
    assert code == 0, err
    assert json.loads(out)["include"][0]["render_hash"]


def test_diff_hashes_a_recipe_with_its_own_patch(capsys, tmp_path):
    recipe = _own_recipe(tmp_path)
    code, out, err = run(capsys, "diff", str(recipe), str(recipe), "--json")
    assert code == 0, err
    assert not json.loads(out)["changes"]  # the same file: the same render hash, with its own patch


def test_show_names_the_folder(capsys, tmp_path):
    recipe = _own_recipe(tmp_path)
    code, out, _ = run(capsys, "show", str(recipe), "--json")
    assert code == 0
    assert json.loads(out)["patches_dir"] == str(recipe.parent / "own-patches")


def test_option_wins_over_the_field(capsys, tmp_path):
    recipe = _own_recipe(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, _ = run(capsys, "check", str(recipe), "--offline", "--json", "--patches-dir", str(empty))
    assert code == 1 and _patches_apply(out) == "fail"
    # And the option alone serves a recipe without the field, on every command.
    plain = _own_recipe(tmp_path / "plain", field=None)
    own = plain.parent / "own-patches"
    for args in (
        ("check", str(plain), "--offline"),
        ("render", str(plain), "-o", str(tmp_path / "ctx")),
        ("matrix", "--recipe", str(plain), "--format", "json"),
        ("diff", str(plain), str(plain)),
        ("show", str(plain)),
    ):
        code, _, err = run(capsys, *args, "--patches-dir", str(own))
        assert code == 0, (args, err)


def test_unknown_patch_names_both_ways_to_give_a_folder(capsys, tmp_path):
    recipe = _own_recipe(tmp_path, field=None)
    code, out, _ = run(capsys, "check", str(recipe), "--offline", "--json")
    assert code == 1
    result = next(x for x in json.loads(out)[0]["results"] if x["id"] == "patches-apply")
    assert "patches_dir" in result["reason"] and "--patches-dir" in result["reason"]
    code, _, err = run(capsys, "diff", str(recipe), str(recipe))
    assert code == 2
    assert "patches_dir" in err and "--patches-dir" in err


def test_child_inherits_the_folder_beside_its_parent(capsys, tmp_path, monkeypatch):
    parent = _own_recipe(tmp_path)
    other = tmp_path / "elsewhere"
    other.mkdir()
    child = other / "tiny-child.yaml"
    child.write_text(
        "schema: 1\nname: tiny-child\nextends: tiny-pip\ndescription: a child\n"
        "publish: {repository: localhost/rocmstack-test/child, tag: 'child-{arch}'}\n",
        encoding="utf-8",
    )
    code, out, err = run(
        capsys, "--recipes-dir", str(parent.parent), "check", str(child), "--offline", "--json"
    )
    assert code == 0, err
    assert _patches_apply(out, "tiny-child") == "pass"
    code, out, _ = run(capsys, "--recipes-dir", str(parent.parent), "show", str(child), "--json")
    assert json.loads(out)["patches_dir"] == str(parent.parent / "own-patches")


def test_missing_folder_is_an_input_error(capsys, tmp_path):
    recipe = _own_recipe(tmp_path, field="nowhere")
    code, _, err = run(capsys, "check", str(recipe), "--offline")
    assert code == 2 and "nowhere" in err and "does not exist" in err
