"""Git refs become commits (``git ls-remote``) and requirement files are read at a commit: real git, on
local repositories reached through file:// URLs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rocmstack.errors import ExitCode, InputError, NetworkError
from rocmstack.resolver import git


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
        "HOME": str(repo.parent),
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env
    ).stdout.strip()


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("ROCMSTACK_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "upstream"
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    return path


def test_branch_tag_and_commit_resolve_to_full_commits(repo):
    first = commit(repo, {"requirements/common.txt": "tomli==2.0.1\n"}, "one")
    _git(repo, "tag", "-a", "v1.0", "-m", "release")  # annotated: must resolve to the commit, not the tag
    _git(repo, "branch", "release/1.0")
    second = commit(repo, {"README": "x"}, "two")
    url = repo.as_uri()
    assert git.ls_remote(url, "main") == second
    assert git.ls_remote(url, "v1.0") == first
    assert git.ls_remote(url, "release/1.0") == first
    assert git.ls_remote(url, first) == first  # a full commit needs no remote at all
    assert git.ls_remote("file:///nonexistent", first) == first
    assert git.ls_remote(url, first[:9]) == first  # abbreviated: expanded from a fetch


def test_unknown_ref_is_input_error_and_unreachable_remote_is_exit_4(repo, tmp_path):
    commit(repo, {"a": "1"}, "one")
    with pytest.raises(InputError, match="'no-such-branch' not found"):
        git.ls_remote(repo.as_uri(), "no-such-branch")
    with pytest.raises(NetworkError) as exc:
        git.ls_remote((tmp_path / "gone").as_uri(), "main")
    assert exc.value.exit_code == ExitCode.ENGINE and "\n" not in exc.value.one_line()


def test_requirement_files_are_read_at_the_commit_with_includes(repo):
    old = commit(
        repo,
        {
            "requirements/common.txt": "# shared\ntomli==2.0.1  # pinned\n",
            "requirements/rocm.txt": "-r common.txt\niniconfig>=2\t# tabbed comment\n",
            "requirements/bad.txt": "tomli==2.0.1\n-c constraints.txt\n",
        },
        "one",
    )
    commit(repo, {"requirements/common.txt": "tomli==2.2.1\n"}, "two")
    assert git.requirement_lines(repo.as_uri(), old, "requirements/rocm.txt", component="c") == [
        "tomli==2.0.1",
        "iniconfig>=2",
    ]
    with pytest.raises(InputError, match=r"no file .requirements/missing\.txt."):
        git.requirement_lines(repo.as_uri(), old, "requirements/missing.txt", component="c")
    # A constraints file used to be skipped without a word: now it is refused like every option line.
    with pytest.raises(InputError, match=r"component c: requirements/bad.txt line 2: '-c constraints.txt'"):
        git.requirement_lines(repo.as_uri(), old, "requirements/bad.txt", component="c")


def test_a_commit_from_a_lock_is_40_hex_and_never_an_option(repo, tmp_path):
    """A lock's commit reaches `git fetch`: `--upload-pack=CMD` there runs CMD (for a local or file:// remote)."""
    good = commit(repo, {"requirements.txt": "tomli==2.0.1\n"}, "one")
    marker = tmp_path / "upload-pack-ran"
    for hostile in (f"--upload-pack=touch {marker}", good[:12], good + "\n", "HEAD", "main"):
        with pytest.raises(InputError, match="is not a full 40-hex commit") as exc:
            git.read_at(repo.as_uri(), hostile, "requirements.txt")
        assert exc.value.exit_code == ExitCode.USAGE and "\n" not in exc.value.one_line()
    assert not marker.exists()
    assert git.read_at(repo.as_uri(), good, "requirements.txt") == "tomli==2.0.1\n"
