"""`rocmstack matrix` and the shipped workflow ci/github/build.yml.

The workflow is validated with check-jsonschema's vendored GitHub workflow schema (PyPI, test extra; no
network), and its job graph and every rocmstack flag it uses are checked against the real CLI.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rocmstack.build import matrix as M
from rocmstack.errors import InputError
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "ci" / "github" / "build.yml"
pytestmark = pytest.mark.timeout(300)


def cli(*args):
    # rich help: no wrapping of option names
    return run_cli(*args, env={"COLUMNS": "250", "TERM": "dumb"}, timeout=240)


def test_expand_one_recipe_two_arch_sets():
    entries = M.expand(["verl-0.9.0-rocm10"], ["gfx942", "gfx950"], registry="ghcr.io/acme")
    rows = [e.as_dict() for e in entries]
    assert [r["gpu_arch"] for r in rows] == ["gfx942", "gfx950"]
    assert entries[1].legs()[0]["validate_runner"] == ["self-hosted", "linux", "rocm", "gfx950"]
    assert rows[1]["build_runner"] == list(M.DEFAULT_BUILD_RUNNER)
    assert rows[1]["staging_ref"] == "ghcr.io/acme/rocmstack/verl:r-" + rows[1]["render_hash"][:12]
    assert rows[1]["tags"].split() == [
        "ghcr.io/acme/rocmstack/verl:verl-0.9.0.amd0_rocm10.0_py3.12_vllm0.27.0_gfx950",
        rows[1]["staging_ref"],
        "ghcr.io/acme/rocmstack/verl:verl-0.9_gfx950",
    ]
    assert rows[0]["render_hash"] != rows[1]["render_hash"]


def test_a_repository_that_names_the_registry_is_not_prefixed_again(tmp_path):
    """The shipped workflow's --registry ghcr.io/<owner> on a lab's repository ghcr.io/acme/verl
    planned ghcr.io/acme/ghcr.io/acme/verl."""
    recipe = tmp_path / "lab-verl.yaml"
    recipe.write_text(
        "extends: verl-0.9.0-rocm10\nname: lab-verl\npublish:\n  repository: ghcr.io/acme/verl\n"
        "  tag: 'lab-{components.verl.version}_{arch}'\n  aliases: []\n"
    )
    (entry,) = M.expand([str(recipe)], ["gfx950"], registry="ghcr.io/acme")
    row = entry.as_dict()
    assert row["staging_ref"] == "ghcr.io/acme/verl:r-" + row["render_hash"][:12]
    assert row["tags"].split() == ["ghcr.io/acme/verl:lab-0.9.0_gfx950", row["staging_ref"]]
    with pytest.raises(
        InputError, match=r"'ghcr.io/acme/verl' already names a registry.*--registry 'quay.io/x'"
    ):
        M.expand([str(recipe)], ["gfx950"], registry="quay.io/x")


def test_a_two_arch_image_gets_one_validation_leg_per_arch():
    """The issue: a gfx942;gfx950 image had one leg, on a gfx942 runner, and was published for both."""
    entries = M.expand(["verl-0.9.0-rocm10"], ["gfx942;gfx950", "gfx950"], expect_gpus=4)
    both, single = entries
    assert both.as_dict()["archs"] == ["gfx942", "gfx950"]
    legs = both.legs()
    assert [(leg["arch"], leg["validate_runner"][-1]) for leg in legs] == [
        ("gfx942", "gfx942"),
        ("gfx950", "gfx950"),
    ]
    assert {leg["staging_ref"] for leg in legs} == {both.as_dict()["staging_ref"]}  # the same image on both
    assert all(leg["gpu_arch"] == "gfx942;gfx950" and leg["expect_gpus"] == 4 for leg in legs)
    h = both.render_hash
    assert [leg["report"] for leg in legs] == [f"validation-{h}-gfx942", f"validation-{h}-gfx950"]
    # The image's publish downloads exactly its own legs' reports, never another image's.
    assert both.as_dict()["reports"] == f"validation-{h}-*"
    assert [leg["arch"] for leg in single.legs()] == ["gfx950"] and single.render_hash != h
    data = M.as_json(entries)
    assert len(data["include"]) == 2 and len(data["legs"]["include"]) == 3
    out = M.github_output(entries).splitlines()
    assert [line.split("=", 1)[0] for line in out] == ["matrix", "legs"]
    assert json.loads(out[1].split("=", 1)[1]) == data["legs"]


def test_no_gpu_leg_without_gpus():
    with pytest.raises(InputError, match="--expect-gpus 0"):
        M.expand(["verl-0.9.0-rocm10"], ["gfx950"], expect_gpus=0)


def test_collisions_are_refused():
    a = M.Entry(
        recipe="a",
        gpu_arch="gfx942",
        render_hash="1" * 64,
        build_runner=("x",),
        tags={"repository": "r", "content": "r-1", "refs": ["r:x", "r:r-1"], "immutable_refs": []},
    )
    b = M.Entry(
        recipe="b",
        gpu_arch="gfx950",
        render_hash="2" * 64,
        build_runner=("x",),
        tags={"repository": "r", "content": "r-2", "refs": ["r:x", "r:r-2"], "immutable_refs": []},
    )
    with pytest.raises(InputError, match="would both publish r:x"):
        M.check_unique([a, b])


def _entry(recipe: str, arch: str, descriptive: str, aliases: tuple[str, ...] = ()) -> M.Entry:
    content = f"r-{recipe}-{arch}"
    tags = [descriptive, content, *aliases]
    return M.Entry(
        recipe=recipe,
        gpu_arch=arch,
        render_hash=arch.ljust(64, "0"),
        build_runner=("x",),
        gpu_runner_prefix=("y",),
        tags={
            "repository": "r",
            "content": content,
            "aliases": list(aliases),
            "refs": [f"r:{t}" for t in tags],
            "immutable_refs": [f"r:{descriptive}", f"r:{content}"],
        },
    )


@pytest.mark.parametrize(
    ("a", "b", "fix"),
    [
        # One recipe, two arch sets, a tag without {arch}: the only case {arch} fixes.
        (_entry("a", "gfx942", "x"), _entry("a", "gfx950", "x"), "put {arch} in publish.tag"),
        # Two recipes whose tags already hold {arch}: {arch} is no help, their identities collide.
        (
            _entry("a", "gfx950", "x_gfx950"),
            _entry("b", "gfx950", "x_gfx950"),
            "own publish.tag or publish.repository",
        ),
        (
            _entry("a", "gfx950", "a_gfx950", ("latest",)),
            _entry("b", "gfx950", "b_gfx950", ("latest",)),
            "own publish.aliases",
        ),
    ],
)
def test_collision_hint_names_what_collides(a, b, fix):
    with pytest.raises(InputError) as err:
        M.check_unique([a, b])
    assert fix in (err.value.fix or "")
    if "{arch}" not in fix:
        assert "{arch}" not in (err.value.fix or "")


def test_parse_labels():
    assert M.parse_labels(None, ("a",), "--x") == ("a",)
    assert M.parse_labels("self-hosted, gpu ,mi300", (), "--x") == ("self-hosted", "gpu", "mi300")
    with pytest.raises(InputError):
        M.parse_labels(" , ", (), "--x")


def test_matrix_command_github_and_json():
    proc = cli(
        "matrix", "--recipe", "verl-0.9.0-rocm10", "--gpu-arch", "gfx950", "--gpu-runner", "self-hosted,mi355"
    )
    assert proc.code == 0, proc.err
    lines = proc.out.strip().splitlines()
    assert [line.split("=", 1)[0] for line in lines] == ["matrix", "legs"]
    legs = json.loads(lines[1].removeprefix("legs="))["include"]
    assert legs[0]["validate_runner"] == ["self-hosted", "mi355", "gfx950"]
    every = cli("matrix", "--format", "json")
    assert every.code == 0, every.err
    recipes = {e["recipe"] for e in json.loads(every.out)["include"]}
    assert "verl-0.9.0-rocm10" in recipes and len(recipes) >= 2
    bad = cli("matrix", "--format", "yaml")
    assert bad.code == 2 and "--format 'yaml'" in bad.err


def check_jsonschema():
    exe = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent)) or shutil.which(
        "check-jsonschema"
    )
    assert exe, "check-jsonschema is part of the test extra"
    return exe


def test_workflow_passes_the_github_workflow_schema():
    proc = subprocess.run(
        [check_jsonschema(), "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_schema_check_catches_a_broken_workflow(tmp_path):
    broken = yaml.safe_load(WORKFLOW.read_text())
    del broken["jobs"]["build"]["runs-on"]
    broken["jobs"]["publish"]["need"] = broken["jobs"]["publish"].pop("needs")
    path = tmp_path / "broken.yml"
    path.write_text(yaml.safe_dump(broken))
    proc = subprocess.run(
        [check_jsonschema(), "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0


def test_workflow_gates_publish_on_validation():
    wf = yaml.safe_load(WORKFLOW.read_text())
    jobs = wf["jobs"]
    assert jobs["build"]["needs"] == "plan"
    assert set(jobs["validate"]["needs"]) == {"plan", "build"}
    assert set(jobs["publish"]["needs"]) == {"plan", "validate"}
    assert jobs["validate"]["runs-on"] == "${{ matrix.validate_runner }}"
    assert jobs["build"]["runs-on"] == "${{ matrix.build_runner }}"
    for name in ("build", "publish"):  # one per image
        assert jobs[name]["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    # one per (image, arch): each leg on a runner of its arch, its report uploaded under its own name
    assert jobs["validate"]["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.legs) }}"
    assert jobs["plan"]["outputs"]["legs"] == "${{ steps.matrix.outputs.legs }}"
    upload = next(s for s in jobs["validate"]["steps"] if "upload-artifact" in s.get("uses", ""))
    assert upload["with"]["name"] == "${{ matrix.report }}"
    download = next(s for s in jobs["publish"]["steps"] if "download-artifact" in s.get("uses", ""))
    assert download["with"] == {"pattern": "${{ matrix.reports }}", "path": "report"}
    validate_run = " ".join(s.get("run", "") for s in jobs["validate"]["steps"])
    assert '--expect-gpus "$GPUS"' in validate_run
    # A failed build or leg of one image must not skip another image's legs or publish (a matrix job's
    # `needs` fails as a whole): both run unless cancelled, and the publish gate decides per image.
    for name in ("validate", "publish"):
        assert jobs[name]["if"].startswith("${{ !cancelled() && "), jobs[name]["if"]
    build_run = " ".join(s.get("run", "") for s in jobs["build"]["steps"])
    assert "--push --push-tags content" in build_run  # only the staging tag before validation
    publish_run = " ".join(s.get("run", "") for s in jobs["publish"]["steps"])
    assert "--promote" in publish_run and "rocmstack publish" in publish_run
    # Untrusted inputs reach the scripts through env, never spliced into the script text.
    for job in jobs.values():
        for step in job["steps"]:
            assert "${{" not in step.get("run", ""), step.get("run")


def test_a_pr_that_changes_a_recipe_or_lock_gets_the_diff_as_a_comment():
    wf = yaml.safe_load(WORKFLOW.read_text())
    job = wf["jobs"]["lock-diff"]
    assert job["if"] == "github.event_name == 'pull_request'"
    assert job["permissions"] == {"contents": "read", "pull-requests": "write"}
    run = " ".join(s.get("run", "") for s in job["steps"])
    assert "'recipes/*.yaml' 'recipes/*.lock.json'" in run and "rocmstack diff" in run and "--markdown" in run
    assert "gh pr comment" in run
    assert "recipes/**" in wf[True]["pull_request"]["paths"]  # YAML 1.1 reads the key `on` as True


def test_every_rocmstack_flag_in_the_workflow_exists():
    wf = yaml.safe_load(WORKFLOW.read_text())
    scripts = [s["run"] for j in wf["jobs"].values() for s in j["steps"] if "run" in s]
    uses: dict[str, set[str]] = {}
    for script in scripts:
        text = script.replace("\\\n", " ")
        for m in re.finditer(r"rocmstack (\w+)([^\n]*)", text):
            uses.setdefault(m[1], set()).update(re.findall(r"(--[a-z][a-z-]*)", m[2]))
        if "args=(build" in text:  # the build command is assembled in an array
            uses.setdefault("build", set()).update(re.findall(r"(--[a-z][a-z-]*)", text))
    assert {"matrix", "build", "inspect", "publish", "validate", "diff"} <= set(uses)
    for command, flags in uses.items():
        help_text = cli(command, "--help").out
        for flag in flags:
            assert flag in help_text, f"rocmstack {command} has no {flag}"
