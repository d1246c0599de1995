"""A lab's own recipe folder, end to end through the real CLI: `--all` covers it, `diff` sees every field
that changes the image, and messages about a recipe or a `--set` say the right thing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocmstack.build import matrix as M
from rocmstack.build.diff import diff, load_side
from rocmstack.recipe.load import find_recipe, recipe_files
from rocmstack.resources import recipes_dir

NAME = "verl-0.9.0-rocm10"
pytestmark = pytest.mark.timeout(300)

# A child that a lab would write: its own archs, a build arg, its own user and publish identity.
CHILD = """\
name: lab-verl
extends: verl-0.9.0-rocm10
description: verl for the lab's MI355X nodes
gpu_archs: [gfx950]
default_gpu_archs: [gfx950]
build_args:
  MAX_JOBS: "8"
user:
  name: lab
  uid: 1001
  groups: [video, render]
publish:
  repository: ghcr.io/acme/verl
  tag: lab-verl-{components.verl.version}_{arch}
  aliases: []
"""

# A child that fails a rule on its own (verl 0.9 needs vLLM >= 0.18.0).
FAILING = """\
name: lab-old-vllm
extends: verl-0.9.0-rocm10
description: a pin that a rule refuses
components:
  vllm:
    ref: v0.17.0
    version: 0.17.0
publish:
  repository: ghcr.io/acme/verl
  tag: old-vllm-{arch}
  aliases: []
"""


@pytest.fixture
def lab(tmp_path) -> Path:
    folder = tmp_path / "lab"
    folder.mkdir()
    (folder / "lab-verl.yaml").write_text(CHILD)
    return folder


def _labs(cli, lab) -> set[str]:
    """The recipes `recipes` lists from the lab's own folder (it lists the shipped ones too)."""
    rows = json.loads(cli("--recipes-dir", str(lab), "recipes", "--json").out)
    return {r["name"] for r in rows if r["origin"] != "shipped"}


def test_check_all_in_a_lab_checks_the_labs_recipes_only(cli, lab):
    (lab / "lab-old-vllm.yaml").write_text(FAILING)
    res = cli("--recipes-dir", str(lab), "check", "--all", "--offline", "--json")
    assert res.code == 1, res.err
    runs = {(r["recipe"], ";".join(r["gpu_archs"])): r["passed"] for r in json.loads(res.out)}
    assert runs[("lab-old-vllm", "gfx942;gfx950")] is False
    assert runs[("lab-verl", "gfx950")] is True
    assert {name for name, _ in runs} == _labs(cli, lab)  # rocmstack's own recipes are not the lab's CI
    shipped = {r["recipe"] for r in json.loads(cli("check", "--all", "--offline", "--json").out)}
    assert shipped == set(recipe_files())  # without --recipes-dir: the shipped ones


def test_lock_all_in_a_lab_locks_the_labs_recipes_and_never_a_shipped_lock(cli, lab, tmp_path):
    shipped = {p: p.read_bytes() for p in recipes_dir().glob("*.lock.json")}
    res = cli("--recipes-dir", str(lab), "lock", "--all", "--pins-only", "--json")
    assert res.code == 0, res.err
    assert {row["recipe"] for row in json.loads(res.out)} == _labs(cli, lab)
    assert sorted(p.name for p in lab.glob("*.lock.json")) == sorted(
        f"{n}.lock.json" for n in _labs(cli, lab)
    )
    assert {p: p.read_bytes() for p in recipes_dir().glob("*.lock.json")} == shipped


def test_render_all_renders_what_recipes_lists(cli, lab, tmp_path):
    out = tmp_path / "rendered"
    res = cli("--recipes-dir", str(lab), "render", "--all", "-o", str(out), "--json", "-q")
    assert res.code == 0, res.err
    rows = json.loads(res.out)
    assert {r["recipe"] for r in rows} == _labs(cli, lab)
    assert (out / "lab-verl-gfx950" / "Dockerfile").is_file()
    assert all((Path(r["output"]) / "Dockerfile").is_file() for r in rows)
    res = cli("render", "--all", "--set", "ray.version=2.60.0", "-o", str(tmp_path / "x"))
    assert res.code == 2 and "--all renders every listed recipe as written" in res.err


def test_matrix_in_a_lab_plans_the_labs_images_only(lab, monkeypatch):
    monkeypatch.setenv("ROCMSTACK_RECIPES_PATH", str(lab))
    entries = M.expand([], [])
    assert {e.recipe for e in entries} == {p.stem for p in lab.glob("*.yaml")}  # no shipped image


def test_a_broken_file_does_not_hide_the_others_from_recipes(cli, lab):
    (lab / "broken.yaml").write_text("name: broken\nbase: [1\n")
    res = cli("--recipes-dir", str(lab), "recipes", "--json")
    assert res.code == 2
    rows = {r["name"]: r for r in json.loads(res.out)}
    assert {"lab-verl", NAME, "broken"} <= set(rows)
    assert "YAML error at line 3" in rows["broken"]["error"] and "\n" not in rows["broken"]["error"]
    assert res.err.count("\n") == 1 and "broken.yaml" in res.err
    table = cli("--recipes-dir", str(lab), "recipes", env={"COLUMNS": "250"})
    assert "lab-verl" in table.out and "broken" in table.out and table.code == 2


def test_diff_of_a_child_shows_archs_build_args_user_publish_and_the_render_hash(lab):
    result = diff(load_side(NAME), load_side(str(lab / "lab-verl.yaml"))).to_json()
    got = {(c["section"], c["name"]) for c in result["changes"]}
    assert {
        ("recipe", "gpu_archs"),
        ("recipe", "default_gpu_archs"),
        ("recipe", "build_args.MAX_JOBS"),
        ("recipe", "user.name"),
        ("recipe", "user.uid"),
        ("recipe", "publish.repository"),
        ("recipe", "publish.tag"),
        ("recipe", "publish.aliases"),
        ("render", "render_hash"),
    } <= got


def test_diff_never_says_no_changes_when_the_render_hash_differs(tmp_path):
    lock = find_recipe(NAME).with_name(f"{NAME}.lock.json")
    doc = json.loads(lock.read_text())
    for entry in doc["entries"].values():
        entry["render_hash"] = "0" * 64  # the same pins, another build (templates or patches moved)
    copy = tmp_path / f"{NAME}.lock.json"
    copy.write_text(json.dumps(doc))
    result = diff(load_side(str(lock)), load_side(str(copy))).to_json()
    assert [(c["section"], c["change"]) for c in result["changes"]] == [("render", "changed")]
    assert result["summary"] == {"changed": 1}
    same = diff(load_side(str(lock)), load_side(str(lock))).to_json()
    assert same["changes"] == []


def test_set_of_a_secret_env_is_blamed_on_the_set_without_got_dict(cli):
    res = cli("show", NAME, "--set", "env.HF_TOKEN=hf_abc")
    assert res.code == 2 and res.err.count("\n") == 1
    assert res.err.startswith("rocmstack: error: --set env.HF_TOKEN=hf_abc: HF_TOKEN: secrets never go")
    assert "got dict" not in res.err and ".yaml" not in res.err


def test_an_empty_recipe_says_so(cli, tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing yet\n")
    res = cli("show", str(empty))
    assert res.code == 2 and res.err.count("\n") == 1
    assert "empty.yaml: the file is empty" in res.err and "NoneType" not in res.err
    (tmp_path / "list.yaml").write_text("- a\n")
    res = cli("show", str(tmp_path / "list.yaml"))
    assert res.code == 2 and "not a list" in res.err and "got list" not in res.err


def test_base_provides_is_printed_as_the_recipe_writes_it(cli):
    res = cli("show", NAME)
    line = next(ln for ln in res.err.splitlines() if "base.provides =" in ln)
    assert "base.provides = [{name: torch, version: 2.12.0, requires: [filelock," in line
    assert "({'name'" not in line and "'version':" not in line


def test_set_does_not_suggest_keys_it_refuses(cli):
    res = cli("show", NAME, "--set", "nosuch=1")
    assert res.code == 2 and "valid keys:" in res.err
    valid = res.err.split("valid keys: ", 1)[1].rstrip(")\n").split(", ")
    assert "gpu_archs" in valid and not {"name", "extends", "schema"} & set(valid)
