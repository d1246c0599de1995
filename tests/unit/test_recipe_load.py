"""Recipe loading, overrides and bad input: every error is one line naming file, field and value."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rocmstack.errors import InputError, RecipeError
from rocmstack.recipe.load import load_recipe, recipe_files
from rocmstack.recipe.model import json_schema
from rocmstack.recipe.resolve import parse_archs, resolve, unverified_warnings

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(recipe_files())
BASE = yaml.safe_load((ROOT / "recipes" / "verl-0.9.0-rocm10.yaml").read_text())


def write(tmp_path: Path, data: dict, name: str = "r") -> Path:
    data = {**data, "name": name}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_shipped_recipes_are_listed():
    assert {"verl-0.9.0-rocm10", "verl-0.7.1-rocm7.0.2", "vime-megatron-vllm-rocm7.14"} <= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_recipes_load_and_resolve(name):
    recipe, path = load_recipe(name)
    resolved = resolve(recipe, path, None)
    assert resolved.gpu_archs == tuple(sorted(recipe.default_gpu_archs))
    for component in recipe.components.values():
        if component.source == "git" and component.ref and len(component.ref) == 40:
            assert all(c in "0123456789abcdef" for c in component.ref)


def test_verl_090_pins_match_the_sources():
    recipe, _ = load_recipe("verl-0.9.0-rocm10")
    c = recipe.components
    assert (recipe.base.image, recipe.base.tag, recipe.base.torch, recipe.base.python) == (
        "rocm/primus",
        "v26.7",
        "2.12.0",
        "3.12",
    )
    assert (c["vllm"].ref, c["ray"].version, c["ray"].extras, c["megatron-core"].version) == (
        "v0.27.0",
        "2.58.0",
        ("default", "serve"),
        "0.18.0",
    )
    assert c["sglang"].ref == "0801cc05ed202544e2e5c67d6b0a1d454de54fca" and c["amdsmi"].source == "sdk"
    assert recipe.env["SGLANG_ATTENTION_BACKEND"] == "triton" and recipe.env["SGLANG_USE_AITER"] == "0"


def test_unverified_fields_are_named_in_warnings():
    recipe, _ = load_recipe("verl-0.9.0-rocm10")
    warnings = unverified_warnings(recipe)
    assert any("components.verl.ref = 'release/0.9.0.amd0' is UNVERIFIED" in w for w in warnings)
    assert len(warnings) == len(recipe.unverified)


def test_override_base_env_and_component_shorthand():
    recipe, _ = load_recipe(
        "verl-0.9.0-rocm10",
        ["base.python=3.11", "env.NEW_FLAG=1", "vllm.ref=v0.28.0", "components.ray.version=2.59.0"],
    )
    assert recipe.base.python == "3.11" and recipe.env["NEW_FLAG"] == "1"
    assert recipe.components["vllm"].ref == "v0.28.0" and recipe.components["ray"].version == "2.59.0"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("base.pyton=3.12", "unknown key 'base.pyton'"),
        ("nosuch.ref=x", "unknown key 'nosuch'"),
        ("vllm.reff=v1", "unknown component field 'reff'"),
        ("components.nosuch.ref=v1", "unknown component 'nosuch'"),
        ("env=1", "expected env.NAME=value"),
        ("novalue", "expected KEY=VALUE"),
        ("base=3", "set a field of base"),
    ],
)
def test_override_errors(override, message):
    with pytest.raises(RecipeError, match=message):
        load_recipe("verl-0.9.0-rocm10", [override])


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("base", "python"), 3.12, "base.python: 3.12 is a number; write it as a quoted string"),
        (
            ("base", "tag"),
            "v26.7\nRUN curl evil",
            "base.tag: 'v26.7\\nRUN curl evil' is not a valid image tag",
        ),
        (("components", "vllm", "ref"), "v0.27.0; rm -rf /", "components.vllm.ref"),
        (("components", "vllm", "ref"), "$(curl x)", "components.vllm.ref"),
        (("components", "vllm", "url"), "https://github.com/a/b`id`", "components.vllm.url"),
        (("components", "ray", "version"), '2.58.0"', "components.ray.version"),
        (("components", "ray", "version"), "not-a-version", "components.ray.version"),
        (("env", "SGLANG_USE_AITER"), 'a"b', "env.SGLANG_USE_AITER"),
        (("env", "SGLANG_USE_AITER"), "x\\y", "env.SGLANG_USE_AITER"),
        (("env", "SGLANG_USE_AITER"), "${HOME}", "env.SGLANG_USE_AITER"),
        (("env", "bad name"), "1", "env.bad name"),
        (("env", "HF_TOKEN"), "abc", "secrets never go into ENV, ARG or build env"),
        (("build_args", "WANDB_API_KEY"), "abc", "secrets never go into ENV, ARG or build env"),
        (("env", "WANDB_KEY"), "abc", "secrets never go into ENV"),
        (("env", "GITHUB_PAT"), "abc", "secrets never go into ENV"),
        (
            ("components", "vllm", "build_env", "HF_HUB_TOKEN"),
            "abc",
            "secrets never go into ENV, ARG or build env",
        ),
        (("gpu_archs",), ["gfx950", "sm_90"], "gpu_archs.1"),
        (("components", "vllm", "colour"), "red", "components.vllm.colour: unknown key"),
        (("nonsense",), 1, "nonsense: unknown key"),
        (("components", "ray", "source"), "conda", "components.ray.source"),
    ],
)
def test_bad_input_is_one_clear_line(tmp_path, path, value, message):
    data = json.loads(json.dumps(BASE))
    node = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    file = write(tmp_path, data)
    with pytest.raises(RecipeError) as err:
        load_recipe(str(file))
    line = err.value.one_line()
    assert "\n" not in line and str(file) in line and message in line


def test_missing_required_field(tmp_path):
    data = json.loads(json.dumps(BASE))
    del data["base"]["torch"]
    with pytest.raises(RecipeError, match=r"base.torch: required field is missing"):
        load_recipe(str(write(tmp_path, data)))


def test_every_missing_and_invalid_field_is_listed_at_once(tmp_path):
    data = json.loads(json.dumps(BASE))
    for key in ("description", "sources", "publish"):
        del data[key]
    del data["base"]["torch"]
    data["base"]["python"] = 3.12
    with pytest.raises(RecipeError) as err:
        load_recipe(str(write(tmp_path, data)))
    # The first line names the file and the count; each problem is a line of its own below it.
    file = str(tmp_path / "r.yaml")
    assert err.value.one_line() == f"{file}: 5 problems"
    lines = err.value.detail.splitlines()
    assert len(lines) == 5
    fields = {line.strip().split(": ")[0] for line in lines}
    assert fields == {"description", "sources", "publish", "base.torch", "base.python"}


def test_duplicate_yaml_keys_are_refused(tmp_path):
    path = tmp_path / "dup.yaml"
    text = (
        (ROOT / "recipes" / "verl-0.9.0-rocm10.yaml")
        .read_text()
        .replace("name: verl-0.9.0-rocm10", "name: dup")
    )
    # A second components: block would silently replace the first (and drop verl) in plain YAML.
    path.write_text(text + "components:\n  ray: {source: pypi, layer: ray, version: 2.58.0}\n")
    with pytest.raises(RecipeError) as err:
        load_recipe(str(path))
    line = err.value.one_line()
    assert "duplicate key 'components' (first at line " in line and "dup.yaml: YAML error at line " in line
    nested = tmp_path / "nested.yaml"
    nested.write_text("name: nested\nbase:\n  tag: a\n  tag: b\n")
    with pytest.raises(RecipeError, match="duplicate key 'tag'"):
        load_recipe(str(nested))


# The classic "billion laughs": 9 levels of 9 aliases, a few hundred bytes that name 9**9 strings.
BILLION_LAUGHS = "schema: 1\nname: lol\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi", strict=True)
)


def _limited_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # the bomb would take more than this


def test_an_alias_bomb_recipe_is_refused_before_it_expands(tmp_path):
    """A few hundred bytes of nested aliases took over 1 GB and a minute: anchors and aliases are refused at
    the line of the first one, nothing is expanded (the CLI runs here under a 1 GiB address-space limit)."""
    import subprocess
    import sys

    bomb = tmp_path / "lol.yaml"
    bomb.write_text(BILLION_LAUGHS)
    proc = subprocess.run(
        [sys.executable, "-m", "rocmstack", "check", str(bomb), "--offline"],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_limited_memory,
        cwd=ROOT,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert f"{bomb}: YAML error at line 3, column 4: anchors and aliases" in proc.stderr
    assert "write each value out in full" in proc.stderr


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("name: a\nbase: &base {tag: x}\n", 2),  # an anchor nobody uses yet
        ("name: a\nenv:\n  A: &v '1'\n  B: *v\n", 3),
        ("name: a\nx: &m {tag: x}\nbase:\n  <<: *m\n", 2),  # a merge key needs an alias
    ],
)
def test_anchors_and_aliases_are_refused_naming_the_line(tmp_path, text, line):
    path = tmp_path / "a.yaml"
    path.write_text(text)
    with pytest.raises(RecipeError) as err:
        load_recipe(str(path))
    assert f"a.yaml: YAML error at line {line}, column " in err.value.one_line()
    assert "anchors and aliases" in err.value.one_line()


def test_non_utf8_recipe_is_one_line(tmp_path):
    path = tmp_path / "latin.yaml"
    path.write_bytes("name: latin\ndescription: caf\u00e9\n".encode("latin-1"))
    with pytest.raises(RecipeError) as err:
        load_recipe(str(path))
    assert err.value.one_line() == (
        f"{path}: not UTF-8 text (byte 0xe9 on line 2) (save the recipe as UTF-8)"
    )


def test_recipe_outside_recipes_extends_a_shipped_one(tmp_path, monkeypatch):
    mine = tmp_path / "repo"
    mine.mkdir()
    (mine / "my-verl.yaml").write_text((ROOT / "docs" / "examples" / "my-verl.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    recipe, _ = load_recipe(str(mine / "my-verl.yaml"))
    assert recipe.extends == "verl-0.9.0-rocm10" and recipe.gpu_archs == ("gfx950",)
    assert recipe.components["vllm"].ref == "v0.27.0" and recipe.env["NCCL_DEBUG"] == "WARN"
    # By name: through $ROCMSTACK_RECIPES_PATH (what --recipes-dir sets); the shipped recipes stay found.
    with pytest.raises(RecipeError, match="unknown recipe 'my-verl'"):
        load_recipe("my-verl")
    monkeypatch.setenv("ROCMSTACK_RECIPES_PATH", str(mine))
    assert load_recipe("my-verl")[1] == mine / "my-verl.yaml"
    assert load_recipe("verl-0.9.0-rocm10")[0].name == "verl-0.9.0-rocm10"


def test_extends_finds_a_sibling_before_a_shipped_recipe(tmp_path):
    sibling = {**BASE, "name": "verl-0.9.0-rocm10", "description": "a local variant"}
    (tmp_path / "verl-0.9.0-rocm10.yaml").write_text(yaml.safe_dump(sibling))
    (tmp_path / "kid.yaml").write_text(
        yaml.safe_dump(
            {"name": "kid", "extends": "verl-0.9.0-rocm10", "publish": {"tag": "kid", "aliases": []}}
        )
    )
    recipe, _ = load_recipe(str(tmp_path / "kid.yaml"))
    assert recipe.description == "a local variant"


@pytest.mark.parametrize(
    ("publish", "message"),
    [
        (None, "inherits the descriptive tag of verl-0.9.0-rocm10 in rocmstack/verl"),
        ({"tag": "mine_{arch}"}, "inherits the aliases verl-0.9 of verl-0.9.0-rocm10"),
    ],
)
def test_child_may_not_inherit_the_parents_tags(tmp_path, publish, message):
    child = {"name": "kid", "extends": "verl-0.9.0-rocm10", "description": "x"}
    if publish:
        child["publish"] = publish
    (tmp_path / "kid.yaml").write_text(yaml.safe_dump(child))
    with pytest.raises(RecipeError, match=message) as err:
        load_recipe(str(tmp_path / "kid.yaml"))
    assert "give it its own publish identity" in err.value.one_line()


@pytest.mark.parametrize(
    "publish",
    [{"tag": "kid_{arch}", "aliases": []}, {"repository": "ghcr.io/acme/verl"}],
)
def test_child_with_its_own_publish_identity_gets_its_own_tags(tmp_path, publish):
    from rocmstack.build.tags import tag_set

    (tmp_path / "kid.yaml").write_text(
        yaml.safe_dump(
            {"name": "kid", "extends": "verl-0.9.0-rocm10", "description": "x", "publish": publish}
        )
    )
    kid, kid_path = load_recipe(str(tmp_path / "kid.yaml"))
    parent, parent_path = load_recipe("verl-0.9.0-rocm10")
    kid_tags = set(tag_set(resolve(kid, kid_path, None), "a" * 64).refs())
    parent_tags = set(tag_set(resolve(parent, parent_path, None), "b" * 64).refs())
    assert not kid_tags & parent_tags


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("extends=verl-0.7.1-rocm7.0.2", "--set extends: --set cannot change extends"),
        ("name=other", "--set name: --set cannot change name"),
    ],
)
def test_set_cannot_change_which_file_a_recipe_is(override, message):
    with pytest.raises(RecipeError, match=message) as err:
        load_recipe("verl-0.9.0-rocm10", [override])
    assert "extends: <recipe>" in err.value.one_line()


@pytest.mark.parametrize("value", ["gfx942;gfx950", "gfx942,gfx950", "[gfx942, gfx950]", " gfx942 ; gfx950 "])
def test_set_list_values_take_the_gpu_arch_syntax(value):
    recipe, _ = load_recipe("verl-0.9.0-rocm10", [f"gpu_archs={value}", "default_gpu_archs=gfx950"])
    assert recipe.gpu_archs == ("gfx942", "gfx950") and recipe.default_gpu_archs == ("gfx950",)
    ray, _ = load_recipe("verl-0.9.0-rocm10", ["ray.extras=default;serve;tune"])
    assert ray.components["ray"].extras == ("default", "serve", "tune")


def test_bad_set_value_is_blamed_on_the_set_not_the_file():
    with pytest.raises(RecipeError) as err:
        load_recipe("verl-0.9.0-rocm10", ["base.python=3.1x", "vllm.ref=v0.28.0"])
    line = err.value.one_line()
    assert line.startswith("--set base.python=3.1x: base.python: '3.1x' is not a valid version")
    assert "verl-0.9.0-rocm10.yaml" not in line


def test_a_missing_path_is_not_looked_up_as_a_name(tmp_path):
    with pytest.raises(RecipeError) as err:
        load_recipe("/no/such/file.yaml")
    assert err.value.one_line() == "recipe file '/no/such/file.yaml' does not exist (check the path)"
    (tmp_path / "notes.txt").write_text("x")
    for path, why in ((tmp_path / "notes.txt", "is not a .yaml file"), (tmp_path, "is a folder")):
        with pytest.raises(RecipeError, match=why):
            load_recipe(str(path))
    with pytest.raises(RecipeError, match="does not exist"):
        load_recipe("./verl-0.9.0-rocm10")


def test_empty_gpu_arch_is_not_the_default():
    recipe, _ = load_recipe("verl-0.9.0-rocm10")
    with pytest.raises(InputError, match="no architecture given"):
        parse_archs("", recipe)


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: broken\nbase: [unclosed\n")
    with pytest.raises(RecipeError, match=r"broken.yaml: YAML error at line \d+"):
        load_recipe(str(path))


def test_extends_merges_and_null_deletes(tmp_path):
    (tmp_path / "parent.yaml").write_text(yaml.safe_dump({**BASE, "name": "parent"}))
    child = {
        "name": "child",
        "extends": "parent",
        "description": "child recipe",
        "components": {"vllm": {"ref": "v0.28.0", "version": "0.28.0"}, "mbridge": None},
        "unverified": [],
        "publish": {"tag": "child_{arch}", "aliases": []},
    }
    (tmp_path / "child.yaml").write_text(yaml.safe_dump(child))
    recipe, _ = load_recipe("child", directory=tmp_path)
    assert recipe.components["vllm"].ref == "v0.28.0" and recipe.components["vllm"].url.endswith("vllm.git")
    assert "mbridge" not in recipe.components and recipe.base.tag == "v26.7"


def test_extends_cycle_is_an_error(tmp_path):
    (tmp_path / "a.yaml").write_text("name: a\nextends: b\n")
    (tmp_path / "b.yaml").write_text("name: b\nextends: a\n")
    with pytest.raises(RecipeError, match="cycle"):
        load_recipe("a", directory=tmp_path)


def test_name_must_match_file(tmp_path):
    path = tmp_path / "other.yaml"
    path.write_text(yaml.safe_dump(BASE))
    with pytest.raises(RecipeError, match="must match the file name"):
        load_recipe(str(path))


def test_unknown_recipe_lists_known():
    with pytest.raises(RecipeError) as err:
        load_recipe("no-such-recipe")
    assert "known recipes: " in err.value.one_line() and "verl-0.9.0-rocm10" in err.value.one_line()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gfx950", ("gfx950",)),
        ("gfx950;gfx942", ("gfx942", "gfx950")),
        ("gfx942,gfx942", ("gfx942",)),
        (None, ("gfx942", "gfx950")),
    ],
)
def test_parse_archs(text, expected):
    recipe, _ = load_recipe("verl-0.9.0-rocm10")
    assert parse_archs(text, recipe) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gfx90a", "recipe verl-0.9.0-rocm10 does not support it"),
        ("gfx999", "unknown GPU arch 'gfx999'"),
        ("sm_90", "unknown GPU arch"),
        (";", "no architecture given"),
    ],
)
def test_bad_archs_name_the_supported_ones(text, message):
    recipe, _ = load_recipe("verl-0.9.0-rocm10")
    with pytest.raises(InputError, match=message) as err:
        parse_archs(text, recipe)
    assert "gfx942" in err.value.one_line()


def test_arch_missing_from_base_torch_is_left_to_its_rule():
    recipe, _ = load_recipe("verl-0.9.0-rocm10", ["base.torch_archs=[gfx942]"])
    assert parse_archs("gfx950", recipe) == (
        "gfx950",
    )  # the rule gpu-arch-in-torch decides (and can be ignored)
    with pytest.raises(InputError, match=r"recipe verl-0.9.0-rocm10 does not support it"):
        parse_archs("gfx1100", recipe)


def test_gfx1150_is_a_known_arch():
    # The rule gfx115x-rocm-7.0.2 handles it (its examples include gfx1150); parse_archs refused it first.
    recipe, _ = load_recipe("verl-0.9.0-rocm10", ["gpu_archs=[gfx942, gfx950, gfx1150]"])
    assert parse_archs("gfx1150", recipe) == ("gfx1150",)


def test_json_schema_is_valid_and_describes_the_model():
    from jsonschema import Draft202012Validator

    schema = json_schema()
    Draft202012Validator.check_schema(schema)
    for name in SHIPPED:
        Draft202012Validator(schema).validate(yaml.safe_load((ROOT / "recipes" / f"{name}.yaml").read_text()))


def test_committed_schema_accepts_extends_recipes_and_still_rejects_bad_ones():
    from jsonschema import Draft202012Validator

    committed = Draft202012Validator(json.loads((ROOT / "recipes" / "recipe.schema.json").read_text()))
    example = yaml.safe_load((ROOT / "docs" / "examples" / "my-verl.yaml").read_text())
    assert list(committed.iter_errors(example)) == []
    deleting = {
        **example,
        "components": {"mbridge": None, "vllm": {"ref": "v0.28.0"}},
        "base": {"tag": "v26.8"},
    }
    assert list(committed.iter_errors(deleting)) == []
    assert list(committed.iter_errors({**example, "colour": "red"}))
    assert list(committed.iter_errors({**example, "components": {"vllm": {"reff": "x"}}}))
    plain = {k: v for k, v in example.items() if k != "extends"}
    assert {e.message for e in committed.iter_errors(plain)} >= {"'sources' is a required property"}


_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=30)
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=8,
)


@pytest.mark.property
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path=st.lists(
        st.sampled_from(
            [
                "base",
                "components",
                "vllm",
                "ref",
                "env",
                "tag",
                "python",
                "gpu_archs",
                "patches",
                "publish",
                "version",
                "x",
            ]
        ),
        min_size=1,
        max_size=3,
    ),
    value=_values,
)
@example(path=["base"], value={"\xa0": None})  # found by `make fuzz`: an invisible key printed as is
def test_fuzzed_recipes_fail_only_with_recipe_errors(tmp_path, path, value):
    data = json.loads(json.dumps(BASE))
    node = data
    for part in path[:-1]:
        if not isinstance(node, dict):
            break
        node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else node[part]
    if isinstance(node, dict):
        node[path[-1]] = value
    file = write(tmp_path, data)
    try:
        recipe, _ = load_recipe(str(file))
    except RecipeError as exc:
        assert exc.message.isprintable() and (exc.fix or "").isprintable(), exc.message
        return
    # Whatever got through must still be safe to put in a Dockerfile.
    dumped = json.dumps(recipe.model_dump(mode="json", exclude={"validated_together", "description"}))
    for bad in ("\\n", "`", "$("):
        assert bad not in dumped


@pytest.mark.property
@given(st.text(max_size=60))
@example("\n=")  # found by chance in CI: the key went into the message unescaped
@example("\xa0=")  # found by `make fuzz`: a no-break space passed as printable
@example("base.\u2028=1")
def test_fuzzed_overrides_fail_only_with_recipe_errors(text):
    try:
        load_recipe("verl-0.9.0-rocm10", [text])
    except RecipeError as exc:
        # Escaped where the input is quoted, not only by the last guard in one_line().
        assert exc.message.isprintable() and (exc.fix or "").isprintable(), exc.message
        assert "\n" not in exc.one_line()


def test_committed_schema_is_current():
    committed = json.loads((ROOT / "recipes" / "recipe.schema.json").read_text())
    assert committed == json.loads(json.dumps(json_schema())), (
        "run: rocmstack schema -o recipes/recipe.schema.json"
    )


@pytest.mark.parametrize(
    ("component", "message"),
    [
        ("ray", "requirements_from stands in for the requirements of a git or base component, not a pypi"),
        ("vllm", "give requirements (a file of the repository) or requirements_from (a published release)"),
    ],
)
def test_requirements_from_is_for_git_and_base_components_only(component, message):
    with pytest.raises(RecipeError, match=re.escape(message)):
        load_recipe("verl-0.9.0-rocm10", [f"{component}.requirements_from=verl==0.9.0"])


def test_requirements_from_names_one_exact_release():
    with pytest.raises(RecipeError, match=r"published release, name==version"):
        load_recipe("verl-0.9.0-rocm10", ["verl.requirements_from=verl>=0.9"])


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("sources", "dockerfile"), "https://ci:ghp_S3CRETt0ken@github.com/a/b", "sources.dockerfile"),
        (
            ("components", "vllm", "url"),
            "https://ci:ghp_S3CRETt0ken@github.com/a/b.git",
            "components.vllm.url",
        ),
        (
            ("accepted_conflicts", 0, "source"),
            "https://ghp_S3CRETt0ken@example.org/x",
            "accepted_conflicts.0",
        ),
        (("base", "image"), "ci:ghp_S3CRETt0ken@registry.example.org/rocm/pytorch", "base.image"),
        (("publish", "repository"), "ci:ghp_S3CRETt0ken@ghcr.io/me/verl", "publish.repository"),
    ],
)
def test_a_token_in_a_recipe_url_is_refused_without_repeating_it(tmp_path, path, value, field):
    """A URL's user:token@ would be copied into the lock and the image: exit 2, the field named, the fix
    given, and the token itself nowhere in the message."""
    data = json.loads(json.dumps(BASE))
    node = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    file = write(tmp_path, data)
    with pytest.raises(RecipeError) as err:
        load_recipe(str(file))
    line = err.value.one_line()
    assert err.value.exit_code == 2 and field in line and "\n" not in line
    assert "credential helper / netrc, never a token in a recipe" in line
    assert "S3CRET" not in line and "<redacted>@" in line


def test_a_url_without_user_information_still_loads():
    recipe, _ = load_recipe("verl-0.9.0-rocm10", ["base.image=rocm/pytorch"])
    assert recipe.base.image == "rocm/pytorch"


def test_a_token_given_with_set_is_refused_and_not_echoed():
    with pytest.raises(RecipeError) as err:
        load_recipe("verl-0.9.0-rocm10", ["base.image=ci:ghp_S3CRETt0ken@registry.example.org/rocm/pytorch"])
    line = err.value.one_line()
    assert "--set base.image=<redacted>@registry.example.org" in line and "S3CRET" not in line


def test_a_file_with_four_problems_reports_all_four_at_once(tmp_path):
    # A field error (the unknown key) kept pydantic from running the checks across fields, and those stopped
    # at their first problem: the four came in three rounds.
    data = json.loads(json.dumps(BASE))
    data["bogus"] = 1
    data["patches"] = [data["patches"][0]] * 2
    data["build_args"] = {"GPU_ARCH": "gfx942"}
    file = write(tmp_path, data).rename(tmp_path / "other.yaml")
    with pytest.raises(RecipeError) as err:
        load_recipe(str(file))
    assert err.value.exit_code == 2 and err.value.one_line() == f"{file}: 4 problems"
    assert [line.strip() for line in err.value.detail.splitlines()] == [
        "bogus: unknown key (remove it or check the spelling)",
        "patches lists an id twice",
        "GPU_ARCH is set by --gpu-arch, not by build_args",
        "name: 'r' must match the file name 'other'",
    ]


def test_every_problem_across_fields_is_listed_when_the_fields_are_valid(tmp_path):
    data = json.loads(json.dumps(BASE))
    data["patches"] = [data["patches"][0]] * 2
    data["build_args"] = {"GPU_ARCH": "gfx942", "HF_TOKEN": "x"}
    with pytest.raises(RecipeError) as err:
        load_recipe(str(write(tmp_path, data)))
    lines = err.value.detail.splitlines()
    assert err.value.one_line().endswith(": 3 problems") and len(lines) == 3
    assert (
        "patches lists an id twice" in lines[0] and "GPU_ARCH" in lines[1] and "HF_TOKEN: secrets" in lines[2]
    )


def test_an_unknown_gpu_arch_is_named_as_such_not_as_a_default_mismatch(tmp_path):
    data = json.loads(json.dumps(BASE))
    data["gpu_archs"] = ["gfx999"]
    data["default_gpu_archs"] = ["gfx942"]
    file = write(tmp_path, data)
    with pytest.raises(RecipeError) as err:
        load_recipe(str(file))
    line = err.value.one_line()
    assert line.startswith(f"{file}: gpu_archs.0: unknown GPU arch 'gfx999' (known: gfx90a, gfx942, ")
    assert "default_gpu_archs" not in line and "at least 1 item" not in line and not err.value.detail


def test_a_component_lists_each_of_its_problems(tmp_path):
    data = json.loads(json.dumps(BASE))
    data["components"]["ray"] = {
        "source": "sdk",
        "layer": "ray",
        "extras": ["default"],
        "requirements": "r.txt",
    }
    with pytest.raises(RecipeError) as err:
        load_recipe(str(write(tmp_path, data)))
    lines = [line.strip() for line in err.value.detail.splitlines()]
    assert lines == [
        "components.ray: url/ref/subdir/setup_script only apply to git components, not sdk",
        "components.ray: a sdk component is not installed by rocmstack: no extras/no_deps/build_env",
    ]


def test_every_recipe_field_has_a_description_in_the_schema():
    """Editors show a field's description on hover: every field of every recipe model has one."""
    defs = json_schema()["$defs"]
    missing = [
        f"{model}.{field}"
        for model, definition in defs.items()
        if not model.endswith("Overlay")
        for field, prop in definition.get("properties", {}).items()
        if not prop.get("description")
    ]
    assert missing == []


def test_every_recipe_field_is_in_the_recipes_doc():
    """docs/recipes.md names each field a recipe or a component can carry."""
    from rocmstack.recipe.model import Component, Recipe

    doc = (ROOT / "docs" / "recipes.md").read_text()
    fields = [*Recipe.model_fields, *Component.model_fields]
    names = ["schema" if f == "schema_" else f for f in fields]
    assert [n for n in names if f"`{n}`" not in doc] == []


def test_the_recipes_path_error_is_the_one_the_doc_quotes(tmp_path):
    from tests.conftest import run_cli

    missing = tmp_path / "missing"
    result = run_cli("recipes", env={"ROCMSTACK_RECIPES_PATH": str(missing)})
    assert result.code == 2
    said = result.err.strip().replace(str(missing), "/path/to/missing")
    doc = " ".join((ROOT / "docs" / "recipes.md").read_text().split())
    assert f"`{said}`" in doc, said


def test_extends_takes_a_name_and_a_path_there_says_so_in_one_line(tmp_path, monkeypatch):
    (tmp_path / "base").mkdir()
    (tmp_path / "lab").mkdir()
    parent = {**BASE, "name": "acme-base", "publish": {**BASE["publish"], "tag": "acme-base", "aliases": []}}
    (tmp_path / "base" / "acme-base.yaml").write_text(yaml.safe_dump(parent))
    kid = {"name": "kid", "extends": "../base/acme-base.yaml", "publish": {"tag": "kid", "aliases": []}}
    (tmp_path / "lab" / "kid.yaml").write_text(yaml.safe_dump(kid))
    monkeypatch.chdir(tmp_path / "lab")  # where the path would have resolved: refused all the same
    with pytest.raises(RecipeError) as err:
        load_recipe(str(tmp_path / "lab" / "kid.yaml"))
    assert err.value.message.endswith(
        "extends: '../base/acme-base.yaml' is a path; extends takes a recipe name"
    )
    assert err.value.fix.startswith("write `extends: acme-base` and put its folder on the search path")
    (tmp_path / "lab" / "kid.yaml").write_text(yaml.safe_dump({**kid, "extends": "acme-base"}))
    monkeypatch.setenv("ROCMSTACK_RECIPES_PATH", str(tmp_path / "base"))  # what the fix says
    assert load_recipe(str(tmp_path / "lab" / "kid.yaml"))[0].description == BASE["description"]


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (("show", "verl-0.9.0-rocm1"), "(did you mean 'verl-0.9.0-rocm10'? known recipes: "),
        (("show", "verl-0.9.0-rocm10", "--set", "descripton=x"), "(did you mean 'description'? valid keys: "),
        (("show", "verl-0.9.0-rocm10", "--set", "components.sglnag.ref=x"), "(did you mean 'sglang'? components: "),
        (("show", "verl-0.9.0-rocm10", "--set", "sglang.rev=x"), "(did you mean 'ref'? fields: "),
        (("render", "verl-0.9.0-rocm10", "--set", "patches=[sglang-rmsnrm]", "-o", "out"),
         "unknown patch sglang-rmsnrm: did you mean 'sglang-rmsnorm'? "),
        (("check", "verl-0.9.0-rocm10", "--offline", "--set", "patches=[sglang-rmsnrm]"),
         "unknown patch sglang-rmsnrm: did you mean 'sglang-rmsnorm'? no sglang-rmsnrm.yaml"),
    ],
)  # fmt: skip
def test_a_misspelt_name_gets_its_near_miss(cli, tmp_path, args, hint):
    r = cli(*args, cwd=tmp_path)
    assert r.code in (1, 2) and hint in r.err, r.err
    assert not (tmp_path / "out").exists()


def test_a_childs_misspelt_component_or_key_is_named_as_a_near_miss(cli, tmp_path):
    (tmp_path / "lab-verl.yaml").write_text(
        "name: lab-verl\nextends: verl-0.9.0-rocm10\ndescription: x\ndescripton: y\n"
        "publish: {repository: ghcr.io/acme/verl}\ncomponents:\n  sglnag: {ref: abc}\n  vllm: {rev: v1}\n"
    )
    r = cli("show", str(tmp_path / "lab-verl.yaml"))
    assert r.code == 2
    assert "components.sglnag.source: required field is missing (a new component needs source and layer; " \
        "did you mean 'sglang'?)" in r.err  # fmt: skip
    assert "descripton: unknown key (remove it or check the spelling) (did you mean 'description'?)" in r.err
    assert "components.vllm.rev: unknown key (remove it or check the spelling) (did you mean 'ref'?)" in r.err
