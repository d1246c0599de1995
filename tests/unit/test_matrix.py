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
    assert rows[1]["validate_runner"] == ["self-hosted", "linux", "rocm", "gfx950"]
    assert rows[1]["build_runner"] == list(M.DEFAULT_BUILD_RUNNER)
    assert rows[1]["staging_ref"] == "ghcr.io/acme/rocmstack/verl:r-" + rows[1]["render_hash"][:12]
    assert rows[1]["tags"].split() == [
        "ghcr.io/acme/rocmstack/verl:verl-0.9.0.amd0_rocm10.0_py3.12_vllm0.27.0_gfx950",
        rows[1]["staging_ref"],
        "ghcr.io/acme/rocmstack/verl:verl-0.9_gfx950",
    ]
    assert rows[0]["render_hash"] != rows[1]["render_hash"]


def test_collisions_are_refused():
    a = M.Entry(
        recipe="a",
        gpu_arch="gfx942",
        render_hash="1" * 64,
        build_runner=("x",),
        validate_runner=("y",),
        tags={"repository": "r", "content": "r-1", "refs": ["r:x", "r:r-1"], "immutable_refs": []},
    )
    b = M.Entry(
        recipe="b",
        gpu_arch="gfx950",
        render_hash="2" * 64,
        build_runner=("x",),
        validate_runner=("y",),
        tags={"repository": "r", "content": "r-2", "refs": ["r:x", "r:r-2"], "immutable_refs": []},
    )
    with pytest.raises(InputError, match="would both publish r:x"):
        M.check_unique([a, b])


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
    line = proc.out.strip()
    assert line.startswith("matrix=") and "\n" not in line
    include = json.loads(line.removeprefix("matrix="))["include"]
    assert include[0]["validate_runner"] == ["self-hosted", "mi355", "gfx950"]
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
    for name in ("build", "validate", "publish"):
        assert jobs[name]["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    build_run = " ".join(s.get("run", "") for s in jobs["build"]["steps"])
    assert "--push --push-tags content" in build_run  # only the staging tag before validation
    publish_run = " ".join(s.get("run", "") for s in jobs["publish"]["steps"])
    assert "--promote" in publish_run
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
    assert {"matrix", "build", "inspect", "tags", "validate", "diff"} <= set(uses)
    for command, flags in uses.items():
        help_text = cli(command, "--help").out
        for flag in flags:
            assert flag in help_text, f"rocmstack {command} has no {flag}"
