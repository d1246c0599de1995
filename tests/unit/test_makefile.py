"""The Makefile's recipes reach rocmstack as the words a user typed: an arch set's ';' is data, not a shell
command separator, and the render folder is named as `rocmstack build` names its own."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")


def _commands(target: str, *variables: str) -> list[list[str]]:
    """What ``make -n TARGET`` would run, split as the shell splits it (';' and '&&' as their own tokens)."""
    run = subprocess.run(
        ["make", "--no-print-directory", "-n", target, *variables],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    lines = []
    for line in run.stdout.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        lines.append(list(lexer))
    return [words for words in lines if "rocmstack" in " ".join(words[:1])]


@pytest.mark.parametrize("archs", ["gfx950", "gfx942;gfx950"])
def test_render_passes_an_arch_set_as_one_argument(archs):
    (words,) = _commands("render", f"GPU_ARCH={archs}")
    assert ";" not in words, words  # the shell would have run what follows as a command of its own
    assert words[words.index("--gpu-arch") + 1] == archs
    assert words[words.index("-o") + 1] == "rendered/verl-0.9.0-rocm10-" + archs.replace(";", "-")


def test_build_passes_an_arch_set_as_one_argument():
    (words,) = _commands("build", "GPU_ARCH=gfx942;gfx950", "RECIPE=vime-megatron-vllm-rocm7.14")
    assert ";" not in words, words
    assert words[1:5] == ["build", "vime-megatron-vllm-rocm7.14", "--gpu-arch", "gfx942;gfx950"]


def _dry_run(target: str, *variables: str) -> str:
    return subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", target, *variables],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_the_vllm_venv_is_made_by_make_test_as_the_readme_says(tmp_path):
    vllm = str(tmp_path / "vv")  # a folder no target has made: make plans to create it
    assert f"-m venv {vllm}" in _dry_run("test", f"VLLM_VENV={vllm}")
    assert f"-m venv {vllm}" in _dry_run("vllm-venv", f"VLLM_VENV={vllm}")
    assert vllm not in _dry_run("build", f"VLLM_VENV={vllm}")
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "`make test` also makes `.venv-vllm`" in readme
    assert "`make vllm-venv` makes only that" in readme
