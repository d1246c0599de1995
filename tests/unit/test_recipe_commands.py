"""`rocmstack recipes` and `show`: full names at any width, the unverified mark beside the unverified value."""

from __future__ import annotations

import pytest

from rocmstack.cli import main
from rocmstack.recipe.load import recipe_files


def run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


@pytest.mark.parametrize("columns", ["80", "60"])
def test_recipes_table_shows_whole_names_when_piped(capsys, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    code, out, _ = run(capsys, "recipes")
    assert code == 0 and "…" not in out
    for name in recipe_files():
        assert name in out


def _row(out: str, component: str) -> list[str]:
    line = next(line for line in out.splitlines() if line.startswith(f"│ {component} "))
    return [cell.strip() for cell in line.strip("│").split("│")]


def test_show_marks_the_unverified_field_in_its_own_column(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run(capsys, "-q", "show", "verl-0.9.0-rocm10")
    assert code == 0 and "…" not in out
    # components.cupy-rocm-7-0.version is unverified: the mark goes on the version, not on the ref column.
    assert _row(out, "cupy-rocm-7-0")[3:] == ["14.2.0 (unverified)", ""]
    # components.verl.ref is unverified, its version is not.
    assert _row(out, "verl")[3:] == ["0.9.0", "release/0.9.0.amd0 (unverified)"]
    assert _row(out, "sglang")[4] == "0801cc05ed202544e2e5c67d6b0a1d454de54fca"


def test_recipes_table_names_each_default_arch_set(capsys):
    code, out, _ = run(capsys, "recipes")
    assert code == 0
    vime = next(line for line in out.splitlines() if "vime-megatron-vllm-rocm7.14" in line)
    assert "gfx942;gfx950 (gfx942)" in vime


def _two_broken(tmp_path):
    from pathlib import Path

    import yaml

    base = yaml.safe_load((Path(__file__).parents[2] / "recipes" / "verl-0.9.0-rocm10.yaml").read_text())
    for name, change in (("aaa-broken", {"bogus": 1}), ("zzz-broken", {"gpu_archs": ["gfx999"]})):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump({**base, "name": name, **change}))
    return str(tmp_path)


@pytest.mark.parametrize(
    "command",
    [
        ("recipes",),
        ("check", "--all"),
        ("render", "--all", "-o", "OUT"),
        ("lock", "--all", "--output", "OUT"),
    ],
)
def test_every_broken_recipe_is_named_at_once(capsys, tmp_path, command):
    # `recipes` said "(and 1 more broken)"; check/render/lock --all named only the first broken recipe.
    (tmp_path / "recipes").mkdir()
    folder = _two_broken(tmp_path / "recipes")
    args = [a.replace("OUT", str(tmp_path / "out")) for a in command]
    code, _, err = run(capsys, "--recipes-dir", folder, *args)
    first, *lines = err.splitlines()
    assert code == 2 and "2 recipes do not load: aaa-broken, zzz-broken" in first
    assert any("aaa-broken.yaml: bogus: unknown key" in line for line in lines)
    assert any("zzz-broken.yaml: gpu_archs.0: unknown GPU arch 'gfx999'" in line for line in lines)
    assert not (tmp_path / "out").exists()


def test_show_says_when_a_listed_patch_is_in_no_folder(capsys, tmp_path):
    code, _out, err = run(
        capsys, "show", "verl-0.9.0-rocm10", "--set", "patches=[rtld-local, nope]", "--json"
    )
    assert code == 0
    assert "verl-0.9.0-rocm10: patch nope is not among the shipped patches/" in err
    assert "rtld-local" not in err
    code, _out, err = run(
        capsys, "show", "verl-0.9.0-rocm10", "--set", "patches=[nope]", "--patches-dir", str(tmp_path)
    )
    assert f"patch nope is in neither {tmp_path} nor the shipped patches/" in err


def test_a_lab_recipe_of_a_shipped_name_says_it_shadows_it(capsys, tmp_path):
    import json

    lab = tmp_path / "lab"
    lab.mkdir()
    shipped = recipe_files()["verl-0.9.0-rocm10"]
    (lab / "verl-0.9.0-rocm10.yaml").write_text(shipped.read_text())
    code, out, err = run(capsys, "--recipes-dir", str(lab), "recipes", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert code == 0
    assert rows["verl-0.9.0-rocm10"]["origin"] == str(lab.resolve())
    assert rows["verl-0.9.0-rocm10"]["shadows"] == str(shipped)
    assert rows["slime-rocm"]["origin"] == "shipped" and "shadows" not in rows["slime-rocm"]
    code, out, err = run(capsys, "--recipes-dir", str(lab), "show", "verl-0.9.0-rocm10")
    assert code == 0
    assert err.count("shadows the shipped recipe of that name") == 1, err
