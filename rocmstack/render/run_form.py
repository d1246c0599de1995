"""Every RUN of a rendered Dockerfile in exec form, through ``bash -o pipefail -c``.

The image is built in the OCI format: its config holds no build container id or hostname, so two builds of
one render under a fixed ``--timestamp`` give one image id (the docker format records both, at random, in
buildah before 1.41). The OCI format has no SHELL, so each RUN names its shell itself; a failing command
on the left of a pipe still fails the step, and docker's BuildKit reads the same form.

The command keeps its lines: the Dockerfile joins a line that ends in ``\\`` with the next before it reads
the JSON array, so each line's text is escaped on its own and the continuations stay outside the escapes.
"""

from __future__ import annotations

import json
import re

SHELL = ("/bin/bash", "-o", "pipefail", "-c")
_FLAG = re.compile(r"--[a-z-]+=\S+")


def _escaped(text: str) -> str:
    return json.dumps(text)[1:-1]


def _one(lines: list[str]) -> list[str]:
    """One RUN instruction (its physical lines) in exec form; a RUN already in exec form stays as it is."""
    first = lines[0].removeprefix("RUN ")
    flags = []
    while m := _FLAG.match(first):
        flags.append(m[0])
        first = first[m.end() :].lstrip(" ")
    if first.startswith("["):
        return lines
    lead = "RUN " + "".join(f"{flag} " for flag in flags)
    out: list[str] = []
    body = [first, *lines[1:]]
    if first.strip() == "\\" and len(lines) > 1:  # the flags have a line of their own: the array starts below
        text = lines[1]
        if text.lstrip().startswith("["):
            return lines
        out.append(lead.rstrip() + " \\")
        lead = text[: len(text) - len(text.lstrip())]
        body = [text.lstrip(), *lines[2:]]
    pieces = [_escaped(line.rstrip().removesuffix("\\")) for line in body]
    opening = "[" + ", ".join(json.dumps(word) for word in SHELL) + ', "'
    for i, piece in enumerate(pieces):
        text = (lead + opening if i == 0 else "") + piece
        out.append(text + ("\\" if i < len(pieces) - 1 else '"]'))
    return out


def exec_form(dockerfile: str) -> str:
    """The Dockerfile with each shell-form RUN in exec form; every other line as it was."""
    lines = dockerfile.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("RUN "):
            out.append(lines[i])
            i += 1
            continue
        end = i
        while lines[end].rstrip().endswith("\\") and end + 1 < len(lines):
            end += 1
        out.extend(_one(lines[i : end + 1]))
        i = end + 1
    return "\n".join(out)
