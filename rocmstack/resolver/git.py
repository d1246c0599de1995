"""Git refs to commits (``git ls-remote``) and requirement files read at a locked commit.

A ref that already is a full commit needs no network. A branch or tag is looked up with ``git ls-remote``
(an annotated tag resolves to the commit it points at). An abbreviated hash cannot be looked up remotely:
it is expanded from a fetch of the repository.

A component's repository and a lock file are untrusted: every revision argument follows
``--end-of-options`` (a value starting with ``-`` is never read as an option), a commit read at must be 40
hex, and a requirements file may hold only plain PEP 508 requirements (no pip option, no URL or path, which
uv would fetch or build on this machine) and ``-r`` includes that stay inside the repository.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import subprocess
from pathlib import Path

from rocmstack.errors import InputError, NetworkError, printable, quoted
from rocmstack.recipe.model import plain_requirement
from rocmstack.resolver.uv import cache_dir

_FULL = re.compile(r"^[0-9a-f]{40}$")
_SHORT = re.compile(r"^[0-9a-f]{7,39}$")
_UNREACHABLE = re.compile(
    r"(Could not resolve host|unable to access|Connection refused|timed out|does not appear to be a git "
    r"repository|Could not read from remote|unable to connect|Network is unreachable)",
    re.IGNORECASE,
)


def _git(*args: str, cwd: Path | None = None, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/false"}
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        raise NetworkError(f"git {args[0]} timed out after {timeout}s") from None


def _fail(url: str, proc: subprocess.CompletedProcess[str]) -> NetworkError:
    last = printable(" ".join((proc.stderr.strip().splitlines() or ["no output"])[-1].split()))
    return NetworkError(f"git remote {url} unreachable: {last}", fix="check the network and retry")


def ls_remote(url: str, ref: str) -> str:
    """The commit ``ref`` (branch, tag or full commit) names at ``url`` now."""
    if _FULL.fullmatch(ref):
        return ref
    if _SHORT.fullmatch(ref):
        return expand_short(url, ref)
    proc = _git(
        "ls-remote",
        "--end-of-options",
        url,
        ref,
        f"refs/heads/{ref}",
        f"refs/tags/{ref}",
        f"refs/tags/{ref}^{{}}",
    )
    if proc.returncode != 0:
        raise _fail(url, proc)
    found: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        sha, _, name = line.partition("\t")
        found[name] = sha
    for name in (f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}", f"refs/heads/{ref}", ref):
        if name in found:
            return found[name]
    raise InputError(
        f"git ref {ref!r} not found at {url}", fix="name an existing branch, tag or a full 40-hex commit"
    )


def _mirror(url: str) -> Path:

    path = cache_dir().parent / "git" / hashlib.sha256(url.encode()).hexdigest()[:24]
    if not (path / "HEAD").is_file():
        path.mkdir(parents=True, exist_ok=True)
        _git("init", "-q", "--bare", str(path))
    return path


def expand_short(url: str, short: str) -> str:
    repo = _mirror(url)
    proc = _git(
        "fetch",
        "-q",
        "--filter=blob:none",
        "--end-of-options",
        url,
        "+refs/heads/*:refs/heads/*",
        cwd=repo,
        timeout=600,
    )
    if proc.returncode != 0:
        raise _fail(url, proc)
    out = _git("rev-parse", "--verify", "-q", "--end-of-options", f"{short}^{{commit}}", cwd=repo)
    if out.returncode != 0:
        raise InputError(f"git ref {short!r} matches no commit at {url}", fix="use a full 40-hex commit")
    return out.stdout.strip()


def read_at(url: str, commit: str, path: str) -> str:
    """The text of ``path`` at ``commit`` (fetched once into a cache; only the needed blobs)."""
    if not _FULL.fullmatch(commit):  # it comes from a lock file: never an option, a range or a ref name
        raise InputError(
            f"{url}: commit {quoted(commit)} is not a full 40-hex commit",
            fix="relock: `rocmstack lock --refresh`",
        )
    repo = _mirror(url)
    if _git("cat-file", "-e", "--end-of-options", f"{commit}^{{commit}}", cwd=repo).returncode != 0:
        proc = _git("fetch", "-q", "--depth", "1", "--end-of-options", url, commit, cwd=repo, timeout=600)
        if proc.returncode != 0:
            raise _fail(url, proc)
    out = _git("show", "--end-of-options", f"{commit}:{path}", cwd=repo)
    if out.returncode != 0:
        raise InputError(
            f"{url}@{commit[:12]}: no file {path!r}", fix="check the component's requirements path"
        )
    return out.stdout


_INCLUDE = re.compile(r"^(?:-r|--requirement)(?:\s+|\s*=\s*)?(\S+)$")
_COMMENT = re.compile(r"(?:^|\s)#.*$")  # pip's rule: '#' at the start or after whitespace


def requirement_lines(url: str, commit: str, path: str, *, component: str, _depth: int = 0) -> list[str]:
    """A requirements file at a commit, with ``-r other.txt`` includes inlined and comments dropped.

    Only plain PEP 508 requirements pass (the rule recipe requirements follow): an option line
    (``--index-url``, ``-f``, ``-e``, ``-c`` ...) or a direct reference (``pkg @ file://...``, ``git+...``, a
    path) is an InputError naming the component, file, line number and line. ``-r`` may include another
    file of the same repository, never one outside it."""
    if _depth > 8:
        raise InputError(f"component {component}: {path}: requirement files include each other too deeply")
    out: list[str] = []
    for number, raw in enumerate(read_at(url, commit, path).splitlines(), start=1):
        line = _COMMENT.sub("", raw).strip()
        if not line:
            continue
        where = f"component {component}: {path} line {number}: {quoted(raw.strip())}"
        m = _INCLUDE.match(line)
        if m:
            target = posixpath.normpath(posixpath.join(posixpath.dirname(path), m.group(1)))
            if m.group(1).startswith("/") or target == ".." or target.startswith("../"):
                raise InputError(
                    f"{where} includes a file outside the repository",
                    fix="include only files of the component's own repository",
                )
            out += requirement_lines(url, commit, target, component=component, _depth=_depth + 1)
            continue
        try:
            out.append(plain_requirement(line))
        except ValueError:
            raise InputError(
                f"{where} is not a plain requirement",
                fix="a git component's requirements file may hold only PEP 508 names, extras, versions and "
                "markers (no pip option, URL or path) and -r includes; point `requirements:` at such a "
                "file, or list the packages as recipe components",
            ) from None
    return out
