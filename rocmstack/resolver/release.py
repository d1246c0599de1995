"""A published release's own requirements, read from the index, for a component the base provides.

A base image's distributions are declared, not installed, by rocmstack, so uv never sees what they
require. Where the recipe names the published release whose metadata stands in for a base component's
requirements (``requirements_from: verl==0.7.1``), those requirements (the index's ``requires_dist``, the
wheel's own ``Requires-Dist``) are held against the versions the recipe declares for the other packages of
the image: a declared version outside a range the release requires is a conflict, as uv would report it.
"""

from __future__ import annotations

import email.parser
import hashlib
import io
import json
import os
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterable, Mapping

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from rocmstack.errors import InputError, NetworkError
from rocmstack.resolver.uv import cache_dir

PYPI_JSON = "https://pypi.org/pypi"


def index_json_url() -> str:
    """The index's JSON API (``$ROCMSTACK_PYPI_JSON`` points elsewhere, e.g. a mirror)."""
    return os.environ.get("ROCMSTACK_PYPI_JSON", PYPI_JSON).rstrip("/")


def index_json(url: str, timeout: float) -> dict | None:
    """The package index's JSON document at ``url`` (None: 404); an unreachable index is a NetworkError."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            data = json.load(resp)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise NetworkError(
            f"package index: {url}: HTTP {exc.code}", fix="check the index and retry"
        ) from None
    except (urllib.error.URLError, TimeoutError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise NetworkError(
            f"package index unreachable: {url}: {reason}", fix="check the network and retry"
        ) from None
    return data if isinstance(data, dict) else None


def _from_wheel(url: str, files: list, release: str, timeout: float) -> tuple[str, ...]:
    """Requires-Dist of the release's wheel, downloaded and checked against the index's sha256 (an index
    whose JSON API has no per-version documents still lists every file)."""
    wheels = [f for f in files if str(f.get("filename", "")).endswith(".whl") and not f.get("yanked")]
    wheels.sort(key=lambda f: not str(f["filename"]).endswith("-py3-none-any.whl"))
    if not wheels:
        raise InputError(
            f"requirements_from {release}: the release has no wheel on the index to read its metadata from",
            fix="name a release that publishes a wheel",
        )
    chosen = wheels[0]
    where = urllib.parse.urljoin(url, str(chosen["url"]))
    try:
        with urllib.request.urlopen(where, timeout=timeout) as resp:
            blob = resp.read()
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise NetworkError(
            f"package index unreachable: {where}: {reason}", fix="check the network and retry"
        ) from None
    want = (chosen.get("digests") or {}).get("sha256")
    if not want or hashlib.sha256(blob).hexdigest() != want:
        raise NetworkError(
            f"{chosen['filename']}: the download does not match the index's sha256", fix="retry"
        )
    with zipfile.ZipFile(io.BytesIO(blob)) as whl:
        meta = next(
            (n for n in whl.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1), None
        )
        if meta is None:
            raise InputError(f"requirements_from {release}: {chosen['filename']} has no METADATA")
        text = whl.read(meta).decode("utf-8", errors="replace")
    return tuple(email.parser.Parser().parsestr(text, headersonly=True).get_all("Requires-Dist") or ())


def release_requires(release: str, *, timeout: float = 60) -> tuple[str, ...]:
    """The ``Requires-Dist`` lines of ``name==version`` as the index publishes them (cached on disk)."""

    name, _, version = release.partition("==")
    cached = cache_dir().parent / "releases" / f"{canonicalize_name(name)}-{version}.json"
    try:
        return tuple(json.loads(cached.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        pass
    url = f"{index_json_url()}/{name}/{version}/json"
    data = index_json(url, timeout)
    if data is not None:
        requires = tuple(str(r) for r in (data.get("info") or {}).get("requires_dist") or ())
    else:
        url = f"{index_json_url()}/{name}/json"
        project = index_json(url, timeout)
        files = ((project or {}).get("releases") or {}).get(version)
        if not files:
            raise InputError(
                f"requirements_from {release}: no such release on the index ({url})",
                fix="name a published release, NAME==VERSION",
            )
        requires = _from_wheel(url, files, release, timeout)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps(list(requires)), encoding="utf-8")
    except OSError:
        pass  # the cache is an optimisation
    return requires


def conflicts(
    release: str, requires: Iterable[str], declared: Mapping[str, str], *, python: str
) -> list[str]:
    """Each requirement of ``release`` (extras-only ones and those whose marker is false for the image left
    out) that a declared version (canonical name -> version) does not satisfy, as one line each."""
    env: dict[str, str] = {
        **{k: str(v) for k, v in default_environment().items()},
        "python_version": python,
        "python_full_version": f"{python}.0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }
    out = []
    for line in requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        have = declared.get(canonicalize_name(req.name))
        if have is None or not req.specifier:
            continue
        try:
            ok = req.specifier.contains(Version(have), prereleases=True)
        except InvalidVersion:
            continue
        if not ok:
            out.append(f"{release} depends on {req}; the recipe declares {req.name} {have}")
    return out
