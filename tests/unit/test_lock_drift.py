"""Drift of a lock entry: against rocmstack's own requirements now and against a closure resolved now."""

from __future__ import annotations

from rocmstack.lock.drift import flatten, package_drift, self_layer_drift

PKG = {"name": "a", "version": "1.0", "hashes": ["sha256:" + "0" * 64], "layer": "ray"}


def test_self_layer_drift_names_what_moved():
    assert self_layer_drift({"rocmstack_requirements": ["x>=1"]}, ["x>=1"]) is None
    assert self_layer_drift({}, ["x>=1"]) == "rocmstack's own layer is not locked (a lock from before it was)"
    assert self_layer_drift({"rocmstack_requirements": ["x>=1"]}, ["x>=2"]) == (
        "rocmstack's own requirements changed (-x>=1, +x>=2)"
    )


def test_package_drift_compares_versions_layers_hashes_and_commits():
    entry = {"packages": [PKG], "git": {"c": {"commit": "1" * 40}}, "rocmstack_requirements": []}
    same = {"packages": [PKG], "git": {"c": {"commit": "1" * 40}}, "rocmstack_requirements": []}
    assert package_drift(entry, same) == []
    moved = {
        "packages": [{**PKG, "version": "2.0"}, {**PKG, "name": "b"}],
        "git": {"c": {"commit": "2" * 40}},
        "rocmstack_requirements": ["x>=1"],
    }
    assert package_drift(entry, moved) == [
        "rocmstack's own requirements changed (+x>=1)",
        "+b==1.0",
        "a 1.0->2.0",
        f"c commit {'1' * 40}->{'2' * 40}",
    ]
    assert package_drift(entry, {**same, "packages": [{**PKG, "layer": "verl"}]}) == ["a layer ray->verl"]
    assert package_drift(entry, {**same, "packages": [{**PKG, "hashes": []}]}) == ["a hashes changed"]


def test_flatten_gives_dotted_fields():
    assert flatten({"a": {"b": 1, "c": {}}, "d": [1]}) == {"a.b": 1, "a.c": {}, "d": [1]}


def test_a_field_newer_than_the_lock_is_drift_only_when_set():
    import json
    from pathlib import Path

    from rocmstack.lock.drift import drift
    from rocmstack.recipe.load import load_recipe
    from rocmstack.recipe.resolve import resolve

    root = Path(__file__).resolve().parents[2]
    recipe, path = load_recipe("verl-0.9.0-rocm10")
    resolved = resolve(recipe, path, "gfx950", ())
    lock = json.loads((root / "recipes/verl-0.9.0-rocm10.lock.json").read_text())
    entry = lock["entries"]["gfx950"]
    fields = dict(entry["recipe_fields"])
    fields.pop("models", None)  # a lock written before the recipe model had models:
    assert drift({**entry, "recipe_fields": fields}, resolved) == []
    with_models = resolve(recipe.model_copy(update={"models": ("Qwen3-30B-A3B",)}), path, "gfx950", ())
    assert drift({**entry, "recipe_fields": fields}, with_models) == ["models"]
