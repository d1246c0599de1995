"""A hostile git component through `rocmstack lock`, for real: its requirements file cannot steer uv or run
code on the machine that locks.

The component is a real local git repository (made here, `git init` + commits) that the recipe's https URL
is mapped to with git's url.<base>.insteadOf, as in test_resolver_closure.py. Its requirements file carries
what a pull request to that repository could add: pip options (another index, find-links, an editable or
constraints file) and direct references. `evil` is a real project whose setup.py writes a marker file: uv
would run it to read its metadata. Every such line is one exit-2 line naming the component, file, line
number and line, and the marker never appears; a plain requirements file with an include still locks.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from rocmstack.errors import RocmstackError
from rocmstack.resolver import uv
from tests.unit.test_resolver_closure import UPSTREAM, _recipe
from tests.unit.test_resolver_git import _git, commit


@pytest.fixture
def evil(tmp_path) -> tuple[Path, Path]:
    """(project folder, marker file): a real setuptools project whose setup.py, run anywhere, writes the marker."""
    project, marker = tmp_path / "evil", tmp_path / "setup-py-ran"
    project.mkdir()
    (project / "setup.py").write_text(
        textwrap.dedent(f"""\
            import pathlib
            pathlib.Path({str(marker)!r}).write_text("setup.py ran on the locking machine")
            from setuptools import setup
            setup(name="evil", version="1.0")
            """)
    )
    return project, marker


def _component(tmp_path: Path, files: dict[str, str]) -> dict[str, str]:
    """The environment that maps the recipe's component URL to a fresh local repository holding ``files``."""
    repo = tmp_path / "upstream"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    commit(repo, files, "component")
    return {
        "ROCMSTACK_CACHE": str(tmp_path / "cache"),
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"url.{repo.as_uri()}.insteadOf",
        "GIT_CONFIG_VALUE_0": UPSTREAM,
    }


def _refused(res, line_no: int, line: str, path: str = "requirements.txt") -> None:
    errors = [x for x in res.err.splitlines() if x.startswith("rocmstack:")]
    assert res.code == 2 and len(errors) == 1, res.err
    assert f"component helper: {path} line {line_no}: '{line}'" in errors[0], errors[0]
    assert "Traceback" not in res.err


def test_options_and_direct_references_are_refused_naming_the_line(cli, tmp_path, evil):
    project, marker = evil
    env = _component(
        tmp_path,
        {
            "requirements.txt": (
                "packaging==24.1\n"
                "--index-url http://127.0.0.1:9/simple\n"
                f"-f {tmp_path}\n"
                f"evil @ {project.as_uri()}\n"
            )
        },
    )
    recipe = _recipe(tmp_path)
    res = cli("lock", str(recipe), env=env)
    _refused(res, 2, "--index-url http://127.0.0.1:9/simple")
    assert "not a plain requirement" in res.err and "PEP 508" in res.err
    assert not marker.exists() and not (tmp_path / "tiny.lock.json").exists()


HOSTILE = [
    "--index-url http://127.0.0.1:9/simple",
    "--extra-index-url http://127.0.0.1:9/simple",
    "--trusted-host example.org",
    "-f {tmp}",
    "-e {project}",
    "-c constraints.txt",
    "evil @ {uri}",
    "git+https://example.org/evil.git#egg=evil",
    "{project}",
    "packaging==24.1 --hash=sha256:" + "0" * 64,
]


@pytest.mark.parametrize("line", HOSTILE)
def test_each_hostile_line_alone_is_refused_and_runs_nothing(cli, tmp_path, evil, line):
    project, marker = evil
    line = line.format(tmp=tmp_path, project=project, uri=project.as_uri())
    env = _component(tmp_path, {"requirements.txt": f"# upstream's pins\npackaging==24.1\n{line}\n"})
    res = cli("lock", str(_recipe(tmp_path)), env=env)
    _refused(res, 3, line)
    assert not marker.exists()


def test_an_include_may_not_leave_the_repository_and_its_lines_pass_the_same_filter(cli, tmp_path, evil):
    project, marker = evil
    env = _component(
        tmp_path,
        {
            "requirements.txt": "-r reqs/common.txt\n",
            "reqs/common.txt": f"packaging==24.1\nevil @ {project.as_uri()}\n",
            "reqs/escape.txt": "-r ../../outside.txt\n",
        },
    )
    res = cli("lock", str(_recipe(tmp_path)), env=env)
    _refused(res, 2, f"evil @ {project.as_uri()}", path="reqs/common.txt")
    recipe = _recipe(tmp_path)
    recipe.write_text(
        recipe.read_text().replace("requirements: requirements.txt", "requirements: reqs/escape.txt")
    )
    res = cli("lock", str(recipe), env=env)
    _refused(res, 1, "-r ../../outside.txt", path="reqs/escape.txt")
    assert "includes a file outside the repository" in res.err
    assert not marker.exists()


@pytest.mark.network
def test_a_plain_requirements_file_with_an_include_still_locks(cli, tmp_path):
    env = _component(
        tmp_path,
        {
            "requirements.txt": "-r reqs/common.txt\niniconfig>=2  # tests\n",
            "reqs/common.txt": "# pinned upstream\npackaging==24.1\ntomli>=2; python_version >= '3.8'\n",
        },
    )
    res = cli("lock", str(_recipe(tmp_path)), "--json", env=env)
    assert res.code == 0, res.err
    entry = next(iter(json.loads((tmp_path / "tiny.lock.json").read_text())["entries"].values()))
    assert {p["name"]: p["version"] for p in entry["packages"]}["packaging"] == "24.1"


def test_uv_never_builds_a_source_tree_while_locking(tmp_path, monkeypatch, evil):
    """Even a direct reference that reached uv (from anywhere) is not built: uv runs with --no-build."""
    project, marker = evil
    monkeypatch.setenv("ROCMSTACK_CACHE", str(tmp_path / "cache"))
    with pytest.raises(RocmstackError) as exc:
        uv.resolve(uv.Inputs(layers=(("app", (f"evil @ {project.as_uri()}",)),), python="3.11"))
    assert "build" in exc.value.message.lower()
    assert not marker.exists()
