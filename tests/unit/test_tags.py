"""Tags: template expansion from the resolved recipe, content tag, aliases, OCI grammar, immutability."""

from __future__ import annotations

import json

import pytest

from rocmstack.build import tags as T
from rocmstack.errors import CheckFailed, InputError
from rocmstack.recipe.load import load_recipe
from rocmstack.recipe.resolve import resolve
from tests.conftest import run_cli

HASH = "4013a5777947abcd59f787756b834458816e835d1c1fe6fe152b1ebba27c972c"


def resolved(name="verl-0.9.0-rocm10", arch="gfx950", overrides=()):
    recipe, path = load_recipe(name, overrides)
    return resolve(recipe, path, arch, tuple(overrides))


def test_descriptive_tag_follows_upstream_style():
    tags = T.tag_set(resolved(), HASH)
    assert tags.descriptive == "verl-0.9.0.amd0_rocm10.0_py3.12_vllm0.27.0_gfx950"
    assert tags.content == "r-4013a5777947"
    assert tags.repository == "rocmstack/verl"
    # gfx950 alone is not the recipe's default arch set: the floating alias names the arch.
    assert tags.aliases == ("verl-0.9_gfx950",)
    assert tags.immutable == (tags.descriptive, tags.content)


def test_default_arch_set_gets_plain_aliases_and_joined_arch():
    tags = T.tag_set(resolved(arch="gfx942;gfx950"), HASH, extra_aliases=("latest",))
    assert tags.descriptive.endswith("_gfx942-gfx950")
    assert tags.aliases == ("verl-0.9", "latest")


def test_registry_prefix_and_refs():
    tags = T.tag_set(resolved(), HASH, registry="ghcr.io/acme/")
    assert tags.refs()[0] == "ghcr.io/acme/rocmstack/verl:verl-0.9.0.amd0_rocm10.0_py3.12_vllm0.27.0_gfx950"
    with pytest.raises(InputError, match="not valid in the OCI reference grammar") as err:
        T.tag_set(resolved(), HASH, registry="ghcr.io/Acme")
    assert "--registry" in err.value.fix


@pytest.mark.parametrize(
    ("publish_repo", "registry", "expected"),
    [
        ("rocmstack/verl", "ghcr.io/acme", "ghcr.io/acme/rocmstack/verl"),  # a path: prefixed
        # Before, this was ghcr.io/acme/ghcr.io/acme/verl.
        ("ghcr.io/acme/verl", "ghcr.io/acme", "ghcr.io/acme/verl"),
        ("ghcr.io/acme/verl", "ghcr.io/acme/", "ghcr.io/acme/verl"),
        ("ghcr.io/acme/verl", "ghcr.io", "ghcr.io/acme/verl"),
        ("ghcr.io/acme/verl", "GHCR.io/acme", "ghcr.io/acme/verl"),  # host names are case-insensitive
        ("ghcr.io/acme/verl", "ghcr.io/acme/verl", "ghcr.io/acme/verl"),
        ("localhost:5000/verl", "localhost:5000", "localhost:5000/verl"),
        ("localhost/verl", "localhost", "localhost/verl"),
        # podman's local namespace: pushed below the registry, as before
        ("localhost/acme/verl", "127.0.0.1:5000", "127.0.0.1:5000/localhost/acme/verl"),
        ("ghcr.io/acme/verl", None, "ghcr.io/acme/verl"),
    ],
)
def test_a_repository_under_the_registry_is_not_prefixed_again(publish_repo, registry, expected):
    assert T.repository(publish_repo, registry) == expected


@pytest.mark.parametrize(
    ("publish_repo", "registry"),
    [
        ("quay.io/acme/verl", "ghcr.io/acme"),
        ("ghcr.io/other/verl", "ghcr.io/acme"),
        ("ghcr.io/acme-labs/verl", "ghcr.io/acme"),  # a prefix of the name, not of the path
        ("localhost:5000/verl", "localhost:5001"),
        ("ghcr.io/acme/verl", "acme"),
    ],
)
def test_a_repository_naming_another_registry_is_refused_naming_both(publish_repo, registry):
    with pytest.raises(InputError) as err:
        T.repository(publish_repo, registry)
    assert f"'{publish_repo}'" in err.value.message and f"--registry '{registry}'" in err.value.message


def lab_recipe(tmp_path, repository="ghcr.io/acme/verl"):
    """A lab's own recipe whose repository names its registry, as a workflow's --registry does too."""
    path = tmp_path / "lab-verl.yaml"
    path.write_text(
        "extends: verl-0.9.0-rocm10\nname: lab-verl\npublish:\n"
        f"  repository: {repository}\n  tag: 'lab-{{components.verl.version}}_{{arch}}'\n  aliases: []\n"
    )
    return path


def test_tags_and_build_dry_run_do_not_double_the_registry(tmp_path):
    """`--registry ghcr.io/acme` on repository ghcr.io/acme/verl gave ghcr.io/acme/ghcr.io/acme/verl."""
    recipe = str(lab_recipe(tmp_path))
    proc = run_cli("tags", recipe, "--gpu-arch", "gfx950", "--registry", "ghcr.io/acme", "--json")
    assert proc.code == 0, proc.err
    refs = json.loads(proc.out)["refs"]
    assert refs[0] == "ghcr.io/acme/verl:lab-0.9.0_gfx950" and all(
        r.startswith("ghcr.io/acme/verl:") for r in refs
    )
    dry = run_cli(
        "build", recipe, "--gpu-arch", "gfx950", "--registry", "ghcr.io/acme", "--dry-run",
        "--output", str(tmp_path / "out"),
    )  # fmt: skip
    assert dry.code == 0, dry.err
    tag_lines = [line.split()[1] for line in dry.out.splitlines() if line.strip().startswith("tag ")]
    assert tag_lines and all(t.startswith("ghcr.io/acme/verl:") for t in tag_lines), dry.out


def test_tags_with_another_registry_is_exit_2_naming_both(tmp_path):
    proc = run_cli("tags", str(lab_recipe(tmp_path)), "--gpu-arch", "gfx950", "--registry", "quay.io/acme")
    assert proc.code == 2
    last = proc.err.strip().splitlines()[-1]
    assert "publish.repository 'ghcr.io/acme/verl'" in last and "--registry 'quay.io/acme'" in last
    assert "lab-verl.yaml" in last and "Traceback" not in proc.err


def test_template_field_errors_name_the_field():
    tree = {
        "components": {"transformers": {"version": ">=5.12"}, "x": {"version": None}},
        "base": {"rocm": "10.0"},
    }
    with pytest.raises(InputError, match=r"\{components.nope.version\} does not exist"):
        T.expand_template("a-{components.nope.version}", tree, ("gfx950",))
    with pytest.raises(InputError, match=r"\{components.x.version\} is None"):
        T.expand_template("a-{components.x.version}", tree, ("gfx950",))
    with pytest.raises(InputError, match="not a valid image tag"):
        T.expand_template("tf{components.transformers.version}", tree, ("gfx950",))
    with pytest.raises(InputError, match="unbalanced"):
        T.expand_template("rocm{base.rocm", tree, ("gfx950",))
    assert T.expand_template("rocm{base.rocm}_{arch}", tree, ("gfx942", "gfx950")) == "rocm10.0_gfx942-gfx950"


def test_overrides_flow_into_the_tag():
    tags = T.tag_set(resolved(overrides=("vllm.version=0.27.1",)), HASH)
    assert "_vllm0.27.1_" in tags.descriptive


def test_bad_alias_and_alias_clash():
    with pytest.raises(InputError, match="alias"):
        T.tag_set(resolved(), HASH, extra_aliases=("no spaces",))
    with pytest.raises(InputError, match="equals an immutable tag"):
        T.tag_set(resolved(arch="gfx942;gfx950"), HASH, extra_aliases=("r-4013a5777947",))


def test_content_tag_needs_a_full_hash():
    with pytest.raises(InputError):
        T.content_tag("abc")


def test_immutability_verdicts():
    assert T.immutability_verdict("r/x:t", None, HASH, exists=False) == "push"
    assert T.immutability_verdict("r/x:t", HASH, HASH, exists=True) == "skip"
    with pytest.raises(CheckFailed, match=r"refusing to push r/x:t.*render hash 111111111111"):
        T.immutability_verdict("r/x:t", "1" * 64, HASH, exists=True)
    with pytest.raises(CheckFailed, match="no rocmstack render-hash label"):
        T.immutability_verdict("r/x:t", None, HASH, exists=True)


def test_tags_command():
    proc = run_cli("tags", "verl-0.9.0-rocm10", "--gpu-arch", "gfx950", "--alias", "latest", "--json")
    assert proc.code == 0, proc.err
    data = json.loads(proc.out)
    assert data["refs"][0] == "rocmstack/verl:verl-0.9.0.amd0_rocm10.0_py3.12_vllm0.27.0_gfx950"
    assert data["content"] == "r-" + data["render_hash"][:12]
    assert data["aliases"] == ["verl-0.9_gfx950", "latest_gfx950"]
    plain = run_cli("tags", "verl-0.9.0-rocm10", "--gpu-arch", "gfx950")
    assert plain.out.splitlines()[0].endswith("_gfx950\timmutable")


def test_tags_command_bad_registry_is_one_line():
    proc = run_cli("tags", "verl-0.9.0-rocm10", "--gpu-arch", "gfx950", "--registry", "Bad Host")
    assert proc.code == 2
    last = proc.err.strip().splitlines()[-1]
    assert (
        last.startswith("rocmstack: error: image repository 'Bad Host/rocmstack/verl'")
        and "Traceback" not in proc.err
    )
