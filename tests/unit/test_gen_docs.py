"""ci/gen_docs.py: the docs' generated parts are current, and the package drawing they hold is the code's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "ci"))

import gen_docs  # noqa: E402  # a script of ci/, not a package


def test_the_generated_parts_of_the_docs_are_current():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "ci" / "gen_docs.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr


def test_the_command_layer_is_on_top_and_nothing_runs_up():
    edges = gen_docs.package_edges()
    height = gen_docs.layers(edges)  # raises on a cycle between packages
    assert max(height, key=height.__getitem__) == "commands"
    assert not any("commands" in imports for imports in edges.values())
    for package, imports in edges.items():
        assert all(height[q] < height[package] for q in imports), package


def test_a_cycle_between_packages_is_named():
    with pytest.raises(ValueError, match="render -> prepare -> render"):
        gen_docs.layers({"render": {"prepare"}, "prepare": {"render"}})


def test_a_stale_block_is_rewritten_and_a_missing_one_named():
    text = "intro\n<!-- package-drawing:begin -->\nold\n<!-- package-drawing:end -->\nafter\n"
    assert gen_docs.replaced(text, "package-drawing", "new") == (
        "intro\n<!-- package-drawing:begin -->\nnew\n<!-- package-drawing:end -->\nafter\n"
    )
    with pytest.raises(SystemExit, match="no <!-- options-table:begin -->"):
        gen_docs.replaced(text, "options-table", "x")
