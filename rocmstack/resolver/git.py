"""Git refs to commits (``git ls-remote``) and requirement files read at a locked commit.

A ref that already is a full commit needs no network. A branch or tag is looked up with ``git ls-remote``
(an annotated tag resolves to the commit it points at). An abbreviated hash cannot be looked up remotely:
it is expanded from a fetch of the repository.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

from rocmstack.errors import InputError, NetworkError, printable

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
    proc = _git("ls-remote", "--", url, ref, f"refs/heads/{ref}", f"refs/tags/{ref}", f"refs/tags/{ref}^{{}}")
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
    from rocmstack.resolver.uv import cache_dir

    path = cache_dir().parent / "git" / hashlib.sha256(url.encode()).hexdigest()[:24]
    if not (path / "HEAD").is_file():
        path.mkdir(parents=True, exist_ok=True)
        _git("init", "-q", "--bare", str(path))
    return path


def expand_short(url: str, short: str) -> str:
    repo = _mirror(url)
    proc = _git("fetch", "-q", "--filter=blob:none", url, "+refs/heads/*:refs/heads/*", cwd=repo, timeout=600)
    if proc.returncode != 0:
        raise _fail(url, proc)
    out = _git("rev-parse", "--verify", "-q", f"{short}^{{commit}}", cwd=repo)
    if out.returncode != 0:
        raise InputError(f"git ref {short!r} matches no commit at {url}", fix="use a full 40-hex commit")
    return out.stdout.strip()


def read_at(url: str, commit: str, path: str) -> str:
    """The text of ``path`` at ``commit`` (fetched once into a cache; only the needed blobs)."""
    repo = _mirror(url)
    if _git("cat-file", "-e", f"{commit}^{{commit}}", cwd=repo).returncode != 0:
        proc = _git("fetch", "-q", "--depth", "1", url, commit, cwd=repo, timeout=600)
        if proc.returncode != 0:
            raise _fail(url, proc)
    out = _git("show", f"{commit}:{path}", cwd=repo)
    if out.returncode != 0:
        raise InputError(
            f"{url}@{commit[:12]}: no file {path!r}", fix="check the component's requirements path"
        )
    return out.stdout


def requirement_lines(url: str, commit: str, path: str, _depth: int = 0) -> list[str]:
    """A requirements file at a commit, with ``-r other.txt`` includes inlined and comments dropped."""
    if _depth > 8:
        raise InputError(f"{url}: {path}: requirement files include each other too deeply")
    out: list[str] = []
    base = Path(path).parent
    for raw in read_at(url, commit, path).splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^(?:-r|--requirement)\s*=?\s*(\S+)$", line)
        if m:
            out += requirement_lines(url, commit, (base / m.group(1)).as_posix(), _depth + 1)
        elif line.startswith(("-c", "--constraint", "-e", "--editable")):
            continue  # paths inside that repository: meaningless outside a checkout of it
        else:
            out.append(line)
    return out
