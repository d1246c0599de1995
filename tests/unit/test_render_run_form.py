"""Every RUN of a rendered Dockerfile in exec form through bash -o pipefail (rocmstack.render.run_form).

Each shipped recipe's Dockerfile is read as the Dockerfile parser reads it (a line ending in ``\\`` joined
with the next, then the JSON array): every RUN runs bash with pipefail, and the command bash gets is the
shell text the templates wrote (tests.conftest.shell_view reads it back), but for the indent of a command
that starts on a line below its flags.
"""

from __future__ import annotations

import json
import re

import pytest

from rocmstack.recipe.load import load_recipe
from rocmstack.recipe.resolve import resolve
from rocmstack.render.context import render
from rocmstack.render.run_form import SHELL, exec_form
from tests.conftest import shell_view

SHIPPED = [
    ("verl-0.9.0-rocm10", "gfx950"),
    ("verl-0.7.1-rocm7.0.2", "gfx942;gfx950"),
    ("vime-megatron-vllm-rocm7.14", "gfx942"),
    ("slime-rocm", "gfx950"),
]
_RUN = re.compile(r"^RUN ((?:--\S+ )*)(.*)$", re.S)


def instructions(dockerfile: str) -> list[str]:
    """The Dockerfile's instructions as its parser sees them: continuation lines joined, comments out."""
    logical, out = "", []
    for line in dockerfile.split("\n"):
        if not logical and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            logical += line.rstrip()[:-1]
            continue
        out.append(logical + line)
        logical = ""
    return out


@pytest.mark.parametrize(("name", "arch"), SHIPPED)
def test_every_run_is_bash_with_pipefail_running_the_templates_command(name, arch):
    text = render(resolve(*load_recipe(name), arch), revision=("0" * 40, "2026-12-06T00:00:00Z")).dockerfile
    assert not re.search(r"^SHELL ", text, re.M)  # the OCI format has none: each RUN names its shell
    runs = [i for i in instructions(text) if i.startswith("RUN ")]
    shell_runs = [i for i in instructions(shell_view(text)) if i.startswith("RUN ")]
    assert len(runs) == len(shell_runs) >= 5
    for run, shell in zip(runs, shell_runs, strict=True):
        flags, array = _RUN.match(run).groups()  # type: ignore[union-attr]
        words = json.loads(array)
        assert words[:4] == list(SHELL) and len(words) == 5, run
        shell_flags, command = _RUN.match(shell).groups()  # type: ignore[union-attr]
        assert flags == shell_flags and words[4] == command.lstrip(" ")  # the indent of the flags' own line
    assert exec_form(text) == text  # an exec-form RUN is left as it is


def test_quotes_backslashes_and_expansions_reach_bash_as_written():
    shell = (
        "RUN --mount=type=cache,target=/root/.cache/pip \\\n"
        'MAX_JOBS="${MAX_JOBS}" python3 -c "print(\'a\\\\n\')" \\\n'
        " && printf '#!/bin/sh\\nexec x \"$@\"\\n' > /x\n"
        "RUN true"
    )
    text = exec_form(shell)
    assert shell_view(text) == shell
    first, second = instructions(text)
    assert json.loads(_RUN.match(first)[2])[4] == (  # type: ignore[index]
        'MAX_JOBS="${MAX_JOBS}" python3 -c "print(\'a\\\\n\')"  && printf \'#!/bin/sh\\nexec x "$@"\\n\' > /x'
    )
    assert json.loads(_RUN.match(second)[2]) == [*SHELL, "true"]  # type: ignore[index]
