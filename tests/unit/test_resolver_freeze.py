"""base-freeze's pure parts: what the in-image probe reports becomes validated base.provides, and --write
replaces the block in a recipe atomically or not at all. The engine path runs on the real test image in
tests/integration/test_build_podman.py."""

from __future__ import annotations

import pytest

from rocmstack.errors import RecipeError
from rocmstack.recipe.load import load_recipe
from rocmstack.resolver import freeze
from tests.conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "recipes" / "tiny-pip.yaml"


def test_probe_output_becomes_provides_and_odd_entries_are_named():
    data = {
        "python": "3.12",
        "dists": [
            {
                "name": "torch",
                "version": "2.9.1+rocm7.0.2",
                "requires": ["filelock", 'sympy>=1.13.3; python_version >= "3.9"'],
            },
            {"name": "odd", "version": "not a version", "requires": []},
            {"name": "vcs", "version": "1.0", "requires": ["dep @ https://example.org/dep.whl"]},
        ],
    }
    items, notes = freeze.provides(data)
    assert items == [
        {
            "name": "torch",
            "version": "2.9.1+rocm7.0.2",
            "requires": ["filelock", 'sympy>=1.13.3; python_version >= "3.9"'],
        },
        {"name": "vcs", "version": "1.0", "requires": []},
    ]
    assert any(n.startswith("odd not a version: left out") for n in notes)
    assert any("dep @ https://example.org/dep.whl" in n for n in notes)


def test_write_replaces_the_block_and_the_recipe_still_loads(tmp_path):
    recipe = tmp_path / "tiny-pip.yaml"
    recipe.write_text(FIXTURE.read_text())
    items = [{"name": "wheel", "version": "0.38.4", "requires": []}]
    freeze.write_into(recipe, items, "localhost/base:1")
    freeze.write_into(
        recipe, [*items, {"name": "pip", "version": "23.0.1", "requires": []}], "localhost/base:2"
    )
    model, _ = load_recipe(str(recipe))
    assert [(p.name, p.version) for p in model.base.provides] == [("wheel", "0.38.4"), ("pip", "23.0.1")]
    text = recipe.read_text()
    assert text.count("provides:") == 1 and "localhost/base:1" not in text and "gpu_archs: [gfx942]" in text


def test_a_result_that_does_not_validate_writes_nothing(tmp_path):
    recipe = tmp_path / "tiny-pip.yaml"
    recipe.write_text(FIXTURE.read_text())
    before = recipe.read_bytes()
    with pytest.raises(RecipeError) as exc:
        freeze.write_into(recipe, [{"name": "wheel", "version": "1", "requires": []}] * 2, "x")
    assert str(recipe) in exc.value.message and "provides lists wheel twice" in exc.value.message
    assert recipe.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["tiny-pip.yaml"]


def test_buildah_runs_the_probe_in_a_working_container_and_removes_it():
    setup, probe, cleanup = freeze.commands("buildah", "img:1", "c1")
    assert setup[-5:] == ["from", "--pull=never", "--name", "c1", "img:1"]
    assert probe[-3:-1] == ["python3", "-c"] and "chroot" in probe and cleanup[-2:] == ["rm", "c1"]
    (only,) = freeze.commands("podman", "img:1", "c1")
    assert only[only.index("run") :][:5] == ["run", "--rm", "--pull=never", "--entrypoint", "python3"]
