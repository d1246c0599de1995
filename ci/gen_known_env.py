"""Regenerate rocmstack/doctor/known_env.json: every environment variable name with a linted prefix that the
real packages read or mention.

    python ci/gen_known_env.py PACKAGE_OR_WHEEL_OR_TREE... > rocmstack/doctor/known_env.json

Each argument is one of:
- an installed package name (its directory is scanned: ray, torch) or a wheel file (unzipped in memory:
  nvidia_nccl_cu12-*.whl, vllm-*.whl, sglang-*.whl). Compiled code cannot be parsed, so these are grepped for
  every prefixed token (Python sources for string literals, shared libraries for their embedded strings).
- git:PATH[@REF]=URL, a git clone of URL at PATH (a bare one will do): the files at REF (default HEAD; hipcc's
  sources live on the `develop` branch of ROCm/HIPCC, whose default branch is now only a README) are parsed for
  the names that are actually read (see reads_in_c / reads_in_python / reads_in_cmake), so enum constants and
  macros that share a prefix are left out. Used for the ROCm projects that ship outside PyPI (rccl, clr,
  ROCR-Runtime, aiter, HIPCC): re-run against clones at the commits recorded in "sources".

The output records what was scanned: versions, and for trees the URL, full commit and commit date.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

# The package that owns a prefix: its list is complete enough to judge a name as unknown. A tree is matched by
# the last part of its URL. clr's HSA_ reads and rccl's NCCL_ reads are added to the names, but ROCR-Runtime and
# NCCL own those prefixes.
OWNERS = {
    "nvidia_nccl": ("NCCL_",),
    "ray": ("RAY_",),
    "vllm": ("VLLM_",),
    "sglang": ("SGLANG_",),
    "torch": ("TORCH_", "PYTORCH_"),
    "rccl": ("RCCL_",),
    "clr": ("HIP_",),
    "ROCR-Runtime": ("HSA_",),
    "aiter": ("AITER_",),
}
# Read by code that cannot be scanned here, cited instead.
CITED = {
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "https://github.com/pytorch/pytorch/tree/main/torch/csrc/distributed/c10d/symm_mem"
    " (CUDA builds of torch only; seen read by torch 2.11.0+cu130, docs/evidence/doctor-levels-h200x2-2026-11-30)",
}
PREFIXES = ("NCCL_", "RCCL_", "HSA_", "HIP_", "RAY_", "VLLM_", "SGLANG_", "AITER_", "TORCH_", "PYTORCH_")
NAME = re.compile(
    rb"(?<![A-Za-z0-9_])((?:" + b"|".join(p.encode() for p in PREFIXES) + rb")[A-Za-z0-9_]*[A-Za-z0-9])"
)
FULL_NAME = re.compile("(?:" + "|".join(PREFIXES) + ")[A-Za-z0-9_]*[A-Za-z0-9]")


def names_in(data: bytes) -> set[str]:
    return {m.decode() for m in NAME.findall(data)}


def scan_files(items: Iterable[tuple[str, bytes]]) -> set[str]:
    out: set[str] = set()
    for name, data in items:
        if name.endswith((".py", ".so", ".pyi")) or ".so." in name:
            out |= names_in(data)
    return out


def scan_package(name: str) -> tuple[str, set[str]]:
    spec = importlib.util.find_spec(name)
    assert spec and spec.origin, f"{name} is not installed"
    root = Path(spec.origin).parent
    version = importlib.metadata.version(name)
    found = scan_files((str(p), p.read_bytes()) for p in root.rglob("*") if p.is_file())
    return f"{name}=={version} (installed package files)", found


def scan_wheel(path: Path) -> tuple[str, set[str]]:
    with zipfile.ZipFile(path) as zf:
        found = scan_files((i.filename, zf.read(i)) for i in zf.infolist() if not i.is_dir())
    return f"{path.name} (wheel from PyPI)", found


# --- C, C++, HIP and CUDA sources -------------------------------------------------------------------------

C_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".cu", ".cuh", ".hip", ".inc", ".def")
# Functions whose string arguments are variable names, each checked in its tree:
#   getenv/secure_getenv/__secure_getenv (libc, std::getenv); ncclGetEnv (rccl src/misc/param.cc, a getenv after
#   the optional ~/.nccl.conf is loaded); ncclGetLevel(&level, "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL") (rccl
#   src/graph/paths.cc, passes both to ncclGetEnv); os::GetEnvVar (ROCR-Runtime core/util/os.h) and GetEnv
#   (ROCR-Runtime samples, rccl tests); amd::Os::getEnvironment (clr rocclr/os/os.hpp).
C_READERS = ("getenv", "secure_getenv", "__secure_getenv", "ncclGetEnv", "ncclGetLevel", "GetEnvVar", "GetEnv",
             "getEnvironment")  # fmt: skip
C_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|//[^\n]*|/\*.*?\*/', re.S)
C_CALL = re.compile(r"(?<![\w.])(?:[A-Za-z_]\w*::)*(" + "|".join(C_READERS) + r")\s*\(")
C_STRINGS = re.compile(r'^(?:\s*"((?:[^"\\\n]|\\.)*)")+\s*$')
C_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
# static const char* mscclAlgoDirEnv = "MSCCL_ALGO_DIR"; / #define ENV_NAME "X": names passed by a constant
C_CONSTANT = re.compile(
    r'(?:#[ \t]*define[ \t]+(\w+)[ \t]+|\b(\w+)\s*(?:\[\s*\])?\s*=\s*)((?:"(?:[^"\\\n]|\\.)*"\s*)+)'
)
# ROCR-Runtime libhsakmt/src/topology.c: snprintf(buf, n, "HSA_OVERRIDE_GFX_VERSION_%d", node); getenv(buf)
C_FORMAT = re.compile(r"\bs(?:n)?printf\s*\(\s*(\w+)\s*,")
C_CONVERSION = re.compile(r"%[-+ #0]*[0-9]*(?:\.[0-9]+)?(?:hh|h|ll|l|z|j|t)?([diuxXs])")
# rccl src/include/param.h: NCCL_PARAM(name, env, deftVal) loads "NCCL_" env, RCCL_PARAM loads "RCCL_" env
C_PARAM = re.compile(r'\b(NCCL|RCCL)_PARAM\s*\(\s*\w+\s*,\s*"(\w+)"')
# clr rocclr/utils/flags.hpp: RUNTIME_FLAGS(debug, release, release_on_stg) lists flags whose names are the
# variables Flag::init() looks up in the environment (debug flags are read by debug builds only).
FLAG_TABLE = re.compile(r"#define\s+RUNTIME_FLAGS\s*\(")
FLAG_ENTRY = re.compile(r"\b(?:release|debug|release_on_stg)\s*\(\s*\w+\s*,\s*(\w+)\s*,")


def strip_c_comments(text: str) -> str:
    return C_TOKEN.sub(lambda m: m.group(0) if m.group(0)[0] in "\"'" else " ", text)


def call_arguments(text: str, start: int) -> list[str]:
    """The top-level arguments of the call whose '(' is just before start."""
    args, depth, begin, i = [], 0, start, start
    while i < len(text):
        c = text[i]
        if c in "\"'":
            m = C_TOKEN.match(text, i)
            i = m.end() if m else i + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                args.append(text[begin:i])
                return args
            depth -= 1
        elif c == "," and depth == 0:
            args.append(text[begin:i])
            begin = i + 1
        i += 1
    return args


def c_string_value(arg: str) -> str | None:
    if not C_STRINGS.match(arg):
        return None
    return "".join(C_STRING.findall(arg))


def format_pattern(fmt: str) -> str | None:
    """A regular expression for the names a printf format makes: HSA_OVERRIDE_GFX_VERSION_%d."""
    parts = C_CONVERSION.split(fmt)
    if len(parts) == 1 or not FULL_NAME.match(parts[0]):
        return None
    out = [re.escape(parts[0])]
    for conversion, literal in zip(parts[1::2], parts[2::2], strict=True):
        out += [
            "[0-9]+" if conversion in "diu" else "[0-9A-Fa-f]+" if conversion in "xX" else "[A-Za-z0-9_]+"
        ]
        out += [re.escape(literal)]
    return "".join(out)


def reads_in_c(text: str) -> tuple[set[str], set[str]]:
    """(names, patterns of names built at run time) that the C/C++ text reads from the environment."""
    text = strip_c_comments(text)
    constants, formats = {}, {}
    for m in C_CONSTANT.finditer(text):
        value = c_string_value(m.group(3))
        if value is not None:
            constants[m.group(1) or m.group(2)] = value
    for m in C_FORMAT.finditer(text):
        args = call_arguments(text, text.index("(", m.start()) + 1)
        fmt = next((v for v in map(c_string_value, args[1:3]) if v is not None), None)
        if fmt is not None:
            formats[m.group(1)] = fmt
    found, patterns = set(), set()
    for m in C_CALL.finditer(text):
        for arg in call_arguments(text, m.end()):
            value = c_string_value(arg)
            found.add(value if value is not None else constants.get(arg.strip(), ""))
            pattern = format_pattern(formats.get(arg.strip(), ""))
            if pattern:
                patterns.add(pattern)
    found |= {f"{prefix}_{suffix}" for prefix, suffix in C_PARAM.findall(text)}
    table = FLAG_TABLE.search(text)
    if table:
        found |= set(FLAG_ENTRY.findall(text, table.end()))
    return {n for n in found if FULL_NAME.fullmatch(n)}, patterns


# --- Python -----------------------------------------------------------------------------------------------


ENV_KEYWORDS = ("env_var", "env_name", "envvar")


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def _env_keys(tree: ast.AST) -> Iterator[tuple[ast.expr, ast.AST]]:
    """(key expression, enclosing node) for every read of os.environ / os.getenv in tree."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            f = node.func
            getenv = (isinstance(f, ast.Attribute) and f.attr == "getenv") or (
                isinstance(f, ast.Name) and f.id == "getenv"
            )
            method = (
                isinstance(f, ast.Attribute)
                and f.attr in ("get", "setdefault", "pop")
                and _is_environ(f.value)
            )
            if getenv or method:
                yield node.args[0], node
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            yield node.slice, node
        elif (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], (ast.In, ast.NotIn))
            and _is_environ(node.comparators[0])
        ):
            yield node.left, node


def _strings(node: ast.AST) -> list[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List)) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
    ):
        return [e.value for e in node.elts]  # type: ignore[attr-defined]
    return None


def _string_constants(tree: ast.Module) -> dict[str, list[str]]:
    """NAME = "X" and the loop variable of for NAME in ("X", "Y"): the names a bare NAME key can hold."""
    out: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            values = _strings(node.value)
            if values and len(values) == 1:
                out.setdefault(node.targets[0].id, []).extend(values)
        elif isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name):
            values = _strings(node.iter)
            if values:
                out.setdefault(node.target.id, []).extend(values)
    return out


def _python_wrappers(tree: ast.Module) -> dict[str, tuple[int, str]]:
    """Functions that read the variable named by one of their parameters: def _env_flag(name): os.environ.get(name)."""
    out = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
            for key, _ in _env_keys(fn):
                if isinstance(key, ast.Name) and key.id in params:
                    out[fn.name] = (
                        params.index(key.id) - (1 if params[:1] in (["self"], ["cls"]) else 0),
                        key.id,
                    )
    return out


def _key_values(node: ast.AST, constants: dict[str, list[str]]) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    return constants.get(node.id, []) if isinstance(node, ast.Name) else []


def reads_in_python(trees: Iterable[ast.Module]) -> set[str]:
    trees = list(trees)
    wrappers: dict[str, tuple[int, str]] = {}
    for tree in trees:
        wrappers.update(_python_wrappers(tree))
    found: set[str] = set()
    for tree in trees:
        constants = _string_constants(tree)
        values = functools.partial(_key_values, constants=constants)
        for key, _ in _env_keys(tree):
            found.update(values(key))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            # flydsl's OptBool(False, env_var="AITER_MLA_REDUCE_FLYDSL") and the like: the keyword says it
            for k in node.keywords:
                if k.arg in ENV_KEYWORDS:
                    found.update(values(k.value))
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name in wrappers:
                index, param = wrappers[name]
                for a in node.args[index : index + 1] + [k.value for k in node.keywords if k.arg == param]:
                    found.update(values(a))
    return {n for n in found if FULL_NAME.fullmatch(n)}


# --- CMake ------------------------------------------------------------------------------------------------

CMAKE_READ = re.compile(r"\$ENV\{(\w+)\}|\bDEFINED\s+ENV\{(\w+)\}")


def reads_in_cmake(text: str) -> set[str]:
    return {a or b for a, b in CMAKE_READ.findall(text)} & set(FULL_NAME.findall(text))


# --- git trees --------------------------------------------------------------------------------------------


def git(path: str, *args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(["git", "-C", path, *args], input=data, capture_output=True, check=True).stdout


def tree_files(path: str, ref: str = "HEAD") -> Iterator[tuple[str, bytes]]:
    """(path, content) of the C/C++/Python/CMake files at ``ref``."""
    wanted = []
    for entry in git(path, "ls-tree", "-r", "-z", ref).split(b"\0"):
        if not entry:
            continue
        meta, name = entry.decode("utf-8", "replace").split("\t", 1)
        mode, kind, sha = meta.split()
        base = name.rsplit("/", 1)[-1]
        if (
            kind == "blob"
            and mode != "120000"
            and (base.endswith((*C_SUFFIXES, ".py", ".cmake")) or base == "CMakeLists.txt")
        ):
            wanted.append((name, sha))
    out = git(path, "cat-file", "--batch", data="".join(f"{sha}\n" for _, sha in wanted).encode())
    pos = 0
    for name, _ in wanted:
        header_end = out.index(b"\n", pos)
        size = int(out[pos:header_end].split()[2])
        yield name, out[header_end + 1 : header_end + 1 + size]
        pos = header_end + 1 + size + 1


def scan_tree(spec: str) -> tuple[str, str, set[str], set[str]]:
    where, _, url = spec.partition("=")
    path, _, ref = where.rpartition("@") if "@" in where else (where, "", "HEAD")
    commit = git(path, "rev-parse", f"{ref}^{{commit}}").decode().strip()
    date = git(path, "log", "-1", "--format=%cI", commit).decode().strip()
    found: set[str] = set()
    patterns: set[str] = set()
    python = []
    for name, data in tree_files(path, commit):
        text = data.decode("utf-8", "replace")
        if name.endswith(".py"):
            try:
                python.append(ast.parse(text))
            except (SyntaxError, ValueError):  # templates and Python 2 files; nothing we can tell is read
                print(f"skipped (not Python 3): {url} {name}", file=sys.stderr)
        elif name.endswith((".cmake", "CMakeLists.txt")):
            found |= reads_in_cmake(text)
        else:
            names, made = reads_in_c(text)
            found |= names
            patterns |= made
    found |= reads_in_python(python)
    repo = url.rstrip("/").rsplit("/", 1)[-1]
    branch = f", {ref}" if ref != "HEAD" else ""
    return repo, f"{url} at {commit} ({date}{branch}) (source tree, reads parsed)", found, patterns


def main(args: list[str]) -> None:
    sources, names, owners, patterns = [], set(), [], set()
    for arg in args:
        if arg.startswith("git:"):
            owner, label, found, made = scan_tree(arg[4:])
            patterns |= made
        elif arg.endswith(".whl"):
            owner, (label, found) = Path(arg).name, scan_wheel(Path(arg))
        else:
            owner, (label, found) = arg, scan_package(arg)
        sources.append(label)
        names |= found
        owners.append(owner)
    covered = sorted(
        {p for owner in owners for key, ps in OWNERS.items() if owner.startswith(key) for p in ps}
    )
    json.dump(
        {
            "generated_by": "ci/gen_known_env.py",
            "sources": sources,
            "prefixes_judged": covered,
            "cited": CITED,
            "name_patterns": sorted(patterns),
            "names": sorted(names),
        },
        sys.stdout,
        indent=1,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
