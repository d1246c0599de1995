"""The full Python closure of an image's pip layers, resolved by uv for the image's platform.

Inputs, per pip layer in build order: the layer's PyPI pins and the requirement files of its git
components (read at their locked commits). The base's distributions (``base.provides``; torch at least)
are declared as installed: uv sees them through ``dependency-metadata`` and a stub wheel of each (so any
version, local labels included, resolves without touching the index for them) and never emits them, so
nothing replaces the base's torch and no CUDA wheel comes in through it. Conflicts a recipe accepts on
purpose become overrides with the recipe's own range.

One resolution covers all layers (one consistent set); each package is then assigned to the first layer
whose requirements reach it, so a layer installs exactly its packages with ``--no-deps --require-hashes``.
Results are cached by a hash of the inputs and the uv version.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from rocmstack.errors import InputError, NetworkError, RocmstackError, RuleFailure

# uv's messages when it could not talk to the index (as opposed to a resolution failure).
_NETWORK = re.compile(
    r"(dns error|failed to lookup address|Could not connect|error sending request|Connection refused|"
    r"tcp connect error|Network is unreachable|timed out|operation timed out|Failed to fetch)",
    re.IGNORECASE,
)


class ResolutionError(RuleFailure):
    """The pip layers cannot all be installed together (exit 1); the full explanation is the detail."""


@dataclass(frozen=True, kw_only=True)
class LockedPackage:
    name: str
    version: str
    hashes: tuple[str, ...]
    layer: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "hashes": list(self.hashes), "layer": self.layer}


@dataclass(frozen=True, kw_only=True)
class ProvidedDist:
    name: str
    version: str
    requires: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Inputs:
    """Everything a resolution depends on; its ``key`` names the cache entry."""

    layers: tuple[tuple[str, tuple[str, ...]], ...]  # (layer, requirement lines), in build order
    provided: tuple[ProvidedDist, ...] = ()
    no_emit: tuple[str, ...] = ()  # installed by other means (git components, frozen base packages)
    overrides: tuple[str, ...] = ()
    python: str = "3.12"
    platform: str = "x86_64-manylinux_2_28"
    indexes: tuple[str, ...] = field(default_factory=tuple)
    # name==version of the current lock: uv keeps them while they still fit (no silent upgrades).
    preferences: tuple[str, ...] = ()
    upgrade: tuple[str, ...] | bool = ()  # True: everything; names: those packages only

    def key(self, uv_version: str) -> str:
        doc = json.dumps(
            {
                "layers": self.layers,
                "provided": [[p.name, p.version, list(p.requires)] for p in self.provided],
                "no_emit": self.no_emit,
                "overrides": self.overrides,
                "python": self.python,
                "platform": self.platform,
                "indexes": self.indexes,
                "preferences": self.preferences,
                "upgrade": self.upgrade,
                "uv": uv_version,
                # The cache holds packages with their layers: a change of how layers are assigned is a new key.
                "layering": 2,
            },
            sort_keys=True,
        )
        return hashlib.sha256(doc.encode()).hexdigest()


def uv_bin() -> str:
    from uv import find_uv_bin

    return find_uv_bin()


def _env() -> dict[str, str]:
    # Never download a Python: the target interpreter is described by --python-version/--python-platform.
    return {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1", "NO_COLOR": "1"}


@functools.lru_cache(maxsize=1)
def uv_version() -> str:
    out = subprocess.run(
        [uv_bin(), "--version"], capture_output=True, text=True, timeout=30, env=_env(), check=False
    )
    return out.stdout.strip() or "uv unknown"


def cache_dir() -> Path:
    root = os.environ.get("ROCMSTACK_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rocmstack"
    )
    return Path(root) / "resolve"


def public_version(version: str) -> str:
    return Version(version).public


def _stub_wheel(folder: Path, dist: ProvidedDist) -> None:
    """A metadata-only wheel standing for what the base has installed; never emitted, never installed."""
    name = re.sub(r"[-_.]+", "_", dist.name)
    version = public_version(dist.version)
    info = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {dist.name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in dist.requires
    )
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as whl:
        whl.writestr(f"{info}/METADATA", meta)
        whl.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        whl.writestr(f"{info}/RECORD", "")


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string for these characters


def _write_inputs(work: Path, inputs: Inputs) -> list[str]:
    stubs = work / "provided"
    stubs.mkdir()
    config = []
    for dist in inputs.provided:
        _stub_wheel(stubs, dist)
        reqs = ", ".join(_toml_str(r) for r in dist.requires)
        config.append(
            f"[[dependency-metadata]]\nname = {_toml_str(dist.name)}\n"
            f"version = {_toml_str(public_version(dist.version))}\nrequires-dist = [{reqs}]\n"
        )
    (work / "uv.toml").write_text("\n".join(config), encoding="utf-8")
    (work / "provided.txt").write_text(
        "".join(f"{d.name}=={public_version(d.version)}\n" for d in inputs.provided), encoding="utf-8"
    )
    (work / "out.txt").write_text("".join(f"{p}\n" for p in inputs.preferences), encoding="utf-8")
    (work / "overrides.txt").write_text("".join(f"{o}\n" for o in inputs.overrides), encoding="utf-8")
    files = []
    for layer, lines in inputs.layers:
        (work / f"{layer}.in").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        files.append(f"{layer}.in")
    return files


def compile_argv(inputs: Inputs, files: Sequence[str]) -> list[str]:
    argv = [
        uv_bin(),
        # No configuration but ours (a uv.toml or pyproject.toml around could add indexes or sources), and
        # no source distribution is ever built while locking: building one runs its setup code here.
        "--no-config",
        "pip",
        "compile",
        *files,
        "--no-build",
        "--config-file",
        "uv.toml",
        "--constraint",
        "provided.txt",
        "--override",
        "overrides.txt",
        "--find-links",
        "provided",
        "--python-version",
        inputs.python,
        "--python-platform",
        inputs.platform,
        "--generate-hashes",
        "--annotation-style",
        "line",
        "--no-header",
        "--quiet",
        "--output-file",
        "out.txt",
    ]
    for index in inputs.indexes:
        argv += ["--extra-index-url", index]
    for name in sorted({*(d.name for d in inputs.provided), *inputs.no_emit}):
        argv += ["--no-emit-package", name]
    if inputs.upgrade is True:
        argv.append("--upgrade")
    elif inputs.upgrade:
        for name in inputs.upgrade:
            argv += ["--upgrade-package", name]
    return argv


@dataclass(frozen=True, kw_only=True)
class _Entry:
    name: str
    version: str
    hashes: tuple[str, ...]
    via: tuple[str, ...]


def parse_compiled(text: str) -> list[_Entry]:
    """``name==version \\ --hash=... # via a, -r layer.in`` blocks of ``uv pip compile`` output."""
    entries: list[_Entry] = []
    joined = re.sub(r"\\\n\s*", " ", text)
    for raw in joined.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "-")):
            if line.startswith("# via") and entries:
                last = entries[-1]
                vias = tuple(v.strip() for v in line[len("# via") :].split(",") if v.strip())
                entries[-1] = _Entry(name=last.name, version=last.version, hashes=last.hashes, via=vias)
            continue
        spec, _, comment = line.partition("#")
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(\S+)", spec)
        if not m:
            continue
        hashes = tuple(h for h in re.findall(r"--hash=(\S+)", spec))
        via: tuple[str, ...] = ()
        if comment.strip().startswith("via"):
            via = tuple(v.strip() for v in comment.strip()[3:].split(",") if v.strip())
        entries.append(_Entry(name=canonicalize_name(m.group(1)), version=m.group(2), hashes=hashes, via=via))
    return entries


def assign_layers(
    entries: Sequence[_Entry], layers: Sequence[str], declared: Mapping[str, Sequence[str]] | None = None
) -> list[LockedPackage]:
    """Each package goes to the first layer (in build order) whose requirements reach it. ``declared``:
    layer -> the requirement lines it gave; a requirement that is not emitted (a published release standing
    in for a git component's requirements) still roots what it pulls in at its layer."""
    children: dict[str, set[str]] = {}
    roots: dict[str, set[str]] = {layer: set() for layer in layers}
    for layer, lines in (declared or {}).items():
        for line in lines:
            try:
                roots.setdefault(layer, set()).add(canonicalize_name(Requirement(line).name))
            except InvalidRequirement:
                continue
    for e in entries:
        for via in e.via:
            if via.startswith("-r "):
                layer = Path(via[3:].strip()).name.removesuffix(".in")
                roots.setdefault(layer, set()).add(e.name)
            elif not via.startswith("-"):
                children.setdefault(canonicalize_name(via), set()).add(e.name)
    home: dict[str, str] = {}
    for layer in layers:
        todo = [n for n in sorted(roots.get(layer, ())) if n not in home]
        seen: set[str] = set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            home.setdefault(name, layer)
            todo.extend(sorted(children.get(name, set()) - seen))
    order = {layer: i for i, layer in enumerate(layers)}
    out = [
        LockedPackage(
            name=e.name, version=e.version, hashes=tuple(sorted(e.hashes)), layer=home.get(e.name, layers[0])
        )
        for e in entries
    ]
    return sorted(out, key=lambda p: (order.get(p.layer, len(order)), p.name))


class MissingRelease(InputError):
    """A pin names a version the package index does not have (exit 2): nothing to accept as a conflict."""


# uv: "Because there is no version of torchao==0.99.0 and you require torchao==0.99.0, ..."
_NO_VERSION = re.compile(r"there is no version of ([A-Za-z0-9._-]+)==([^\s,]+?),? and you require \1==\2\b")


def _missing_release(stderr: str) -> tuple[str, str] | None:
    """(name, version) when uv's explanation is a pin of the recipe's to a version that does not exist."""
    m = _NO_VERSION.search(" ".join(stderr.split()))
    return (m.group(1), m.group(2)) if m else None


def nearest_releases(inputs: Inputs, name: str, version: str, *, timeout: int = 120) -> list[str]:
    """The releases just below and just above ``version`` on the same index, for the same Python and
    platform (uv, each side its own resolve of that one package); those that exist, lowest first."""
    found = []
    for spec, pick in ((f"{name}<{version}", "highest"), (f"{name}>{version}", "lowest")):
        with tempfile.TemporaryDirectory(prefix="rocmstack-nearest.") as tmp:
            (Path(tmp) / "one.in").write_text(spec + "\n", encoding="utf-8")
            argv = [
                uv_bin(), "--no-config", "pip", "compile", "one.in", "--no-deps", "--no-build",
                "--python-version", inputs.python, "--python-platform", inputs.platform,
                "--no-header", "--no-annotate", "--quiet", "--resolution", pick,
            ]  # fmt: skip
            for index in inputs.indexes:
                argv += ["--extra-index-url", index]
            try:
                proc = subprocess.run(
                    argv, cwd=tmp, capture_output=True, text=True, timeout=timeout, env=_env(), check=False
                )
            except subprocess.TimeoutExpired:
                continue
            pins = re.findall(rf"^{re.escape(name)}==(\S+)", proc.stdout, re.MULTILINE | re.IGNORECASE)
            found += pins[:1] if proc.returncode == 0 else []
    return found


def _nearest_text(inputs: Inputs, name: str, version: str, *, timeout: int) -> str:
    near = nearest_releases(inputs, name, version, timeout=min(timeout, 120))
    if not near:
        return (
            f"no release of {name} resolves for Python {inputs.python} on {inputs.platform}; check the name"
        )
    return f"nearest releases: {', '.join(near)}; pin one of them"


def conflict_chain(stderr: str) -> tuple[str, str]:
    """(one line naming both sides, the full explanation) from uv's "No solution found" message."""
    text = stderr.strip()
    cause = text.split("cause:", 1)[1] if "cause:" in text else text.split("╰─▶", 1)[-1]
    flat = " ".join(cause.replace("╰─▶", " ").split())
    # What uv concludes restates its premises: keep the premises only.
    flat = re.sub(r",? we can conclude that .*?(?=And because|$)", " ", flat)
    # "depends on one of: a b" -> "depends on a or b" (uv prints one requirement per line)
    flat = re.sub(
        r"one of: ((?:\S+ )+?)(?=and |And |$)", lambda m: " or ".join(m.group(1).split()) + " ", flat + " "
    )
    depends = list(dict.fromkeys(re.findall(r"(\S+ depends on .+?)(?= and | And |\s*$)", flat)))
    required = list(dict.fromkeys(re.findall(r"you require (\S+?),?(?=\s|$)", flat)))
    parts = [*depends, f"you require {' and '.join(required)}" if required else ""]
    line = "; ".join(p.strip() for p in parts if p.strip())
    return line or " ".join(text.split())[:400], text


def resolve(inputs: Inputs, *, refresh: bool = False, timeout: int = 600) -> list[LockedPackage]:
    """Resolve (or take from the cache) the closure; NetworkError when the index is out of reach."""
    version = uv_version()
    key = inputs.key(version)
    cached = cache_dir() / f"{key}.json"
    if not refresh and cached.is_file():
        try:
            data = json.loads(cached.read_text(encoding="utf-8"))
            return [
                LockedPackage(
                    name=p["name"], version=p["version"], hashes=tuple(p["hashes"]), layer=p["layer"]
                )
                for p in data["packages"]
            ]
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a damaged cache entry is recomputed
    layer_names = [layer for layer, _ in inputs.layers]
    if not any(lines for _, lines in inputs.layers):
        return []
    with tempfile.TemporaryDirectory(prefix="rocmstack-resolve.") as tmp:
        work = Path(tmp)
        files = _write_inputs(work, inputs)
        argv = compile_argv(inputs, files)
        if refresh:
            argv.append("--refresh")
        try:
            proc = subprocess.run(
                argv, cwd=work, capture_output=True, text=True, timeout=timeout, env=_env(), check=False
            )
        except subprocess.TimeoutExpired:
            raise NetworkError(
                f"uv did not finish resolving within {timeout}s (package index slow or out of reach)"
            ) from None
        if proc.returncode != 0:
            err = proc.stderr.strip()
            if "No solution found" in err:
                missing = _missing_release(err)
                if missing is not None:  # a pin to a release the index does not have: the input is wrong
                    raise MissingRelease(
                        f"{missing[0]}=={missing[1]} is not a release on the package index",
                        fix=_nearest_text(inputs, *missing, timeout=timeout),
                        detail=err,
                    )
                line, full = conflict_chain(err)
                raise ResolutionError(f"unsatisfiable: {line}", detail=full)
            if _NETWORK.search(err):
                last = " ".join(err.splitlines()[-1].split()).removeprefix("cause: ") if err else "no output"
                raise NetworkError(
                    f"package index unreachable: {last}", fix="check the network or proxy and retry"
                )
            first = " ".join(err.split())[:600] or f"exit {proc.returncode}"
            raise RocmstackError(f"uv pip compile failed: {first}", detail=err)
        text = (work / "out.txt").read_text(encoding="utf-8")
    packages = assign_layers(parse_compiled(text), layer_names, dict(inputs.layers))
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp_path = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp_path.write_text(json.dumps({"packages": [p.to_json() for p in packages]}), encoding="utf-8")
        os.replace(tmp_path, cached)
    except OSError:
        pass  # the cache is an optimisation; a read-only home still resolves
    return packages


def provided_dists(provides: Sequence[Any], torch: str) -> tuple[ProvidedDist, ...]:
    """``base.provides`` as ProvidedDist, with the base's torch (at ``base.torch``) declared even where provides
    omits it."""
    out: dict[str, ProvidedDist] = {
        str(canonicalize_name(p.name)): ProvidedDist(
            name=p.name, version=p.version, requires=tuple(p.requires)
        )
        for p in provides
    }
    # base.torch is the truth for torch's version (`--set base.torch=...` moves it); provides gives its requires.
    out["torch"] = ProvidedDist(
        name="torch", version=torch, requires=out["torch"].requires if "torch" in out else ()
    )
    return tuple(out[k] for k in sorted(out))


def by_layer(packages: Sequence[LockedPackage]) -> Mapping[str, list[LockedPackage]]:
    out: dict[str, list[LockedPackage]] = {}
    for p in packages:
        out.setdefault(p.layer, []).append(p)
    return out
