"""What GPUs this process sees, written down by the process itself: imported by Python's ``site`` at the start
of every interpreter of a job whose PYTHONPATH starts with this folder (the launcher, Ray's workers, an
engine's multiprocessing workers, torchrun's ranks), or installed by Ray's worker_process_setup_hook
(rocmstack.gpu.worker_masks.ray_setup_hook) where the workers' PYTHONPATH cannot be changed.

With ROCMSTACK_MASKS_DIR set, each process writes one JSON file there (``<node>-<pid>-<start ns>.json``,
written to a temporary and renamed, so a reader never sees half of one), rewritten when something changes:

- at start: pid, parent, the chain of ancestors (up to the raylet, whose workers are not each other's
  relatives), the command line, the masks and the Ray / torchrun variables of ``ENV_VARS``;
- when torch has been imported: its build; a CPU build counts no GPU, and that is recorded as 0;
- when torch starts its GPU runtime (a call queued with ``torch.cuda._lazy_call``, which torch runs at the
  end of ``_lazy_init``): the device count, the masks the runtime started with, the current device and its
  PCI address and UUID;
- when the process picks a device (``torch.cuda.set_device``, ``torch.accelerator.set_device_index``, wrapped
  once torch is imported) and the device changed;
- at exit, if anything changed; and a forked child at once, as a process of its own.

A Ray actor's name, class and GPU ids come from ``ray.get_runtime_context()`` when ``ray`` is already imported
and connected; before that Ray's process title (``ray::Class.method``) is what is known.

Rules kept here: the standard library only; torch is never imported (a process that does not import it stays
free of it: the hook waits for the process's own ``import torch``); nothing raises into the process (a
folder that cannot be written is given up after a few tries); a process start pays a few system calls.
Without ROCMSTACK_MASKS_DIR nothing is recorded. Either way the next ``sitecustomize`` on sys.path (an
image's own) is run after this one, and its errors are reported as Python reports a failing sitecustomize.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing itself would load re, collections, functools... at every process start
if TYPE_CHECKING:
    from typing import Any

DIR_ENV = "ROCMSTACK_MASKS_DIR"
# Recorded when set: the masks, Ray's switches that decide who sets them, the launchers' ranks, the mark a
# launcher gives processes that may share a GPU.
ENV_VARS = (
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES",
    "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES",
    "RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES",
    "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "RAY_JOB_ID",
    "RAY_RAYLET_PID",
    "ROCMSTACK_COLOCATE_GROUP",
)
# sys.modules key of the module whose recorder runs in this process: this file may be loaded twice (as
# ``sitecustomize`` and as rocmstack.gpu.maskhook.sitecustomize), one recorder per process.
ACTIVE = "_rocmstack_maskhook_active"
MAX_ARGS = 8
MAX_ARG_CHARS = 160
MAX_DEPTH = 32
MAX_FAILURES = 3

RECORDER: Recorder | None = None


def _env() -> dict[str, str]:
    environ = os.environ
    return {k: environ[k] for k in ENV_VARS if k in environ}


def _parent_of(pid: int) -> int:
    fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, 1024)
    finally:
        os.close(fd)
    return int(data.rsplit(b")", 1)[1].split()[1])  # the name in parentheses may hold spaces


def _ancestors(stop: int) -> list[int]:
    """Parent, grandparent, ... up to pid 1 or ``stop`` (the raylet), neither included."""
    out: list[int] = []
    pid = os.getppid()
    while pid > 1 and pid != stop and len(out) < MAX_DEPTH:
        out.append(pid)
        try:
            pid = _parent_of(pid)
        except (OSError, ValueError, IndexError):
            break
    return out


def _argv() -> list[str]:
    argv = getattr(sys, "orig_argv", None) or getattr(sys, "argv", None) or []
    return [str(a)[:MAX_ARG_CHARS] for a in argv[:MAX_ARGS]]


def _esc(text: str) -> str:
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    if not text.isprintable():  # control characters, lone surrogates (undecodable argv bytes)
        text = "".join(c if c.isprintable() or ord(c) > 0xFFFF else f"\\u{ord(c):04x}" for c in text)
    return '"' + text + '"'


def dump(obj: object) -> str:
    """JSON of plain data, without importing json (its decoder pulls in ``re`` at every process start)."""
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, int):
        return str(int(obj))
    if isinstance(obj, float):
        return repr(obj) if obj == obj and obj not in (float("inf"), float("-inf")) else "null"
    if isinstance(obj, dict):
        return "{" + ",".join(_esc(str(k)) + ":" + dump(v) for k, v in obj.items()) + "}"
    if isinstance(obj, list | tuple):
        return "[" + ",".join(dump(v) for v in obj) + "]"
    return _esc(str(obj))


def _pci(props: Any) -> str | None:
    """``dddd:bb:dd.0`` as torch.numa.binding writes it from the same three properties."""
    parts = [getattr(props, k, None) for k in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    if not all(isinstance(p, int) for p in parts):
        return None
    return f"{parts[0]:04x}:{parts[1]:02x}:{parts[2]:02x}.0"


class Recorder:
    """This process's record and the hooks that keep it current."""

    def __init__(self, folder: str) -> None:
        import _thread
        import time

        self.folder = folder
        self._thread = _thread
        self._time = time
        self.lock = _thread.RLock()
        self.failures = 0
        self.env_start = _env()
        self.env_init: dict[str, str] | None = None
        self.torch: dict[str, Any] | None = None
        self.cuda: Any = None
        self.ray: dict[str, Any] | None = None
        self.title: str | None = None
        self.error: str | None = None
        self.forked = False
        self._new_process()

    def _new_process(self) -> None:
        self.pid = os.getpid()
        self.ppid = os.getppid()
        self.start_ns = self._time.time_ns()
        self.node = os.uname().nodename
        try:
            raylet = int(os.environ.get("RAY_RAYLET_PID", "0"))
        except ValueError:
            raylet = 0
        self.ancestors = _ancestors(raylet)
        self.file = f"{self.node}-{self.pid}-{self.start_ns}.json"
        self.last = ""

    def note(self, exc: BaseException) -> None:
        self.error = f"{type(exc).__name__}: {exc}"[:300]

    # -- writing -----------------------------------------------------------------------------------------

    def record(self) -> dict[str, Any]:
        return {
            "v": 1,
            "node": self.node,
            "pid": self.pid,
            "ppid": self.ppid,
            "ancestors": self.ancestors,
            "start_ns": self.start_ns,
            "argv": _argv(),
            "forked": self.forked,
            "env_start": self.env_start,
            "env": _env(),
            "env_init": self.env_init,
            "title": self.title,
            "ray": self.ray,
            "torch": self.torch,
            "error": self.error,
        }

    def write(self, event: str) -> None:
        """Write the record if it changed; never raises."""
        try:
            with self.lock:
                if self.failures >= MAX_FAILURES:
                    return
                self._refresh_ray()
                body = dump(self.record())
                if body == self.last:
                    return
                self._put((body[:-1] + ',"event":' + _esc(event) + "}").encode("utf-8", "replace"))
                self.last = body
        except Exception:
            self.failures += 1

    def _put(self, data: bytes) -> None:
        final = os.path.join(self.folder, self.file)
        tmp = os.path.join(self.folder, f".{self.file}.{self._thread.get_ident()}.tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
        try:
            fd = os.open(tmp, flags, 0o644)
        except FileNotFoundError:
            os.makedirs(self.folder, exist_ok=True)
            fd = os.open(tmp, flags, 0o644)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.replace(tmp, final)
        except BaseException:
            try:  # noqa: SIM105  (contextlib is one more import at every process start)
                os.unlink(tmp)
            except OSError:
                pass
            raise

    # -- Ray ---------------------------------------------------------------------------------------------

    def _refresh_ray(self) -> None:
        """The actor this worker runs, once ``ray`` is imported and connected (never in a forked child, whose
        Ray connection is its parent's)."""
        if "RAY_RAYLET_PID" not in os.environ or self.forked:
            return
        try:
            fd = os.open("/proc/self/cmdline", os.O_RDONLY | os.O_CLOEXEC)
            try:
                title = os.read(fd, 256).split(b"\0", 1)[0].decode("utf-8", "replace").strip()
            finally:
                os.close(fd)
            if title.startswith("ray::"):
                self.title = title
        except (OSError, ValueError):
            pass
        ray = sys.modules.get("ray")
        if ray is None:
            return
        try:
            if not ray.is_initialized():
                return
            ctx = ray.get_runtime_context()
            actor = ctx.get_actor_id()
            if actor is None:
                return
            function = (ctx.get_task_function_name() or "").rsplit(".", 2)
            ids = ctx.get_accelerator_ids().get("GPU", [])
            self.ray = {
                "actor_id": actor,
                "actor_name": ctx.get_actor_name() or None,
                "class": function[-2] if len(function) >= 2 else None,
                "task": ctx.get_task_name(),
                "gpu_ids": [str(i) for i in ids],
            }
        except Exception as exc:
            self.note(exc)

    # -- torch -------------------------------------------------------------------------------------------

    def torch_loaded(self, torch: Any) -> None:
        try:
            cuda = getattr(torch, "cuda", None)
            version = getattr(torch, "version", None)
            hip, cu = getattr(version, "hip", None), getattr(version, "cuda", None)
            compiled = getattr(cuda, "_is_compiled", None)
            gpu_build = bool(compiled()) if callable(compiled) else bool(hip or cu)
            self.torch = {
                "version": str(getattr(torch, "__version__", "")),
                "build": ("hip" if hip else "cuda" if cu else "gpu") if gpu_build else "cpu",
                "initialised": False,
                "count": None if gpu_build else 0,  # a CPU build counts no GPU, without asking anything
                "device": None,
                "pci": None,
                "uuid": None,
                "name": None,
            }
            if gpu_build and cuda is not None:
                self.cuda = cuda
                self._wrap(cuda, "set_device")
                self._wrap(getattr(torch, "accelerator", None), "set_device_index")
                if cuda.is_initialized():
                    self.gpu_started()
                    return
                # torch runs queued calls at the end of _lazy_init, where a call that raised would fail the
                # process's first CUDA call: gpu_started never raises.
                lazy_call = getattr(cuda, "_lazy_call", None)
                if callable(lazy_call):
                    lazy_call(self.gpu_started)
        except Exception as exc:
            self.note(exc)
        self.write("torch")

    def gpu_started(self, event: str = "gpu-init") -> None:
        try:
            if self.torch is not None and self.cuda is not None:
                self.torch["initialised"] = True
                self.env_init = _env()  # the masks the runtime read
                self.torch["count"] = int(self.cuda.device_count())
                self._device()
        except Exception as exc:
            self.note(exc)
        self.write(event)

    def _device(self) -> bool:
        """Take the current device; True when it changed."""
        assert self.torch is not None
        device = int(self.cuda.current_device())
        if device == self.torch["device"] and self.torch["pci"] is not None:
            return False
        props = self.cuda.get_device_properties(device)
        uuid = getattr(props, "uuid", None)
        self.torch.update(
            device=device,
            pci=_pci(props),
            uuid=None if uuid is None else str(uuid),
            name=str(getattr(props, "name", "")) or None,
        )
        return True

    def device_chosen(self) -> None:
        try:
            if self.torch is None or self.cuda is None or not self.cuda.is_initialized():
                return
            if not self.torch["initialised"]:  # a torch without _lazy_call: the first choice starts it
                self.gpu_started("set_device")
            elif self._device():
                self.write("set_device")
        except Exception as exc:
            self.note(exc)

    def _wrap(self, module: Any, name: str) -> None:
        import functools

        original = getattr(module, name, None)
        if not callable(original) or hasattr(original, "_rocmstack_masks"):
            return
        recorder = self

        def chosen(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            recorder.device_chosen()
            return result

        functools.update_wrapper(chosen, original)
        chosen._rocmstack_masks = True  # type: ignore[attr-defined]
        setattr(module, name, chosen)

    # -- process events ----------------------------------------------------------------------------------

    def at_exit(self) -> None:
        try:
            if self.torch is not None and self.cuda is not None and self.cuda.is_initialized():
                if self.torch["initialised"]:
                    self._device()
                else:
                    self.gpu_started("exit")
        except Exception as exc:
            self.note(exc)
        self.write("exit")

    def after_fork(self) -> None:
        """In a forked child: a process of its own, which cannot use its parent's GPU runtime."""
        try:
            self.lock = self._thread.RLock()
            self.forked = True
            self.failures = 0
            self.env_init = None
            self.ray = None
            if self.torch is not None:
                cpu = self.torch["build"] == "cpu"
                self.torch.update(initialised=False, count=0 if cpu else None, device=None, pci=None)
                self.torch.update(uuid=None, name=None)
            self._new_process()
        except Exception as exc:
            self.note(exc)
        self.write("fork")


class _TorchLoader:
    """torch's own loader, and once torch's module has run, the recorder's hooks."""

    def __init__(self, inner: Any, recorder: Recorder) -> None:
        self.inner = inner
        self.recorder = recorder

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        # torch sees its own loader (importlib.resources, reload, inspect), not this one
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self.inner
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self.inner
        self.inner.exec_module(module)
        _TorchFinder.remove()
        self.recorder.torch_loaded(module)

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # a copy being made before __init__ ran: no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)


class _TorchFinder:
    """First on sys.meta_path until torch is imported: finds torch as the other finders do and hands back its
    spec with a loader that runs the recorder's hooks after torch's module."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.busy = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torch" or self.busy:
            return None
        self.busy = True
        try:
            spec = None
            for finder in list(sys.meta_path):
                find = None if finder is self else getattr(finder, "find_spec", None)
                if find is not None:
                    spec = find(name, path, target)
                    if spec is not None:
                        break
        except Exception:
            return None  # the import goes on without the hook, and meets the same error itself
        finally:
            self.busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _TorchLoader(spec.loader, self.recorder)
        return spec

    @staticmethod
    def remove() -> None:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _TorchFinder)]


def install() -> Recorder | None:
    """Start recording this process into $ROCMSTACK_MASKS_DIR (nothing when it is unset, or when a recorder
    already runs here); never raises."""
    global RECORDER
    try:
        folder = os.environ.get(DIR_ENV)
        if not folder:
            return None
        active = sys.modules.get(ACTIVE)
        if active is not None:
            return getattr(active, "RECORDER", None)
        import atexit

        recorder = Recorder(os.path.abspath(folder))
        RECORDER = recorder
        me = sys.modules.get(__name__)
        if me is not None:
            sys.modules[ACTIVE] = me
        atexit.register(recorder.at_exit)
        os.register_at_fork(after_in_child=recorder.after_fork)
        torch = sys.modules.get("torch")
        if torch is not None and getattr(torch, "cuda", None) is not None:
            recorder.torch_loaded(torch)  # imported before the hook (a Ray worker's preloaded modules)
        else:
            sys.meta_path.insert(0, _TorchFinder(recorder))
            recorder.write("start")
        return recorder
    except Exception:
        return None


def _chain() -> None:
    """Run the sitecustomize this folder hides (the next one on sys.path), reporting its errors as site.py
    does."""
    here = os.path.dirname(os.path.abspath(__file__))
    listed: list[object] = list(sys.path)  # not always strings: anything may be appended
    entries = [e for e in listed if isinstance(e, str)]
    rest = []
    for i, entry in enumerate(entries):
        if os.path.abspath(entry or os.curdir) == here:
            rest = entries[i + 1 :]
            break
    else:
        rest = entries
    rest = [e for e in rest if os.path.abspath(e or os.curdir) != here]
    try:
        bootstrap = sys.modules["_frozen_importlib"]
        spec = sys.modules["_frozen_importlib_external"].PathFinder.find_spec("sitecustomize", rest)
        if spec is None or spec.loader is None:
            return
        if spec.origin and os.path.dirname(os.path.abspath(spec.origin)) == here:
            return
        module = bootstrap.module_from_spec(spec)
        sys.modules["_rocmstack_chained_sitecustomize"] = module
        spec.loader.exec_module(module)
    except ImportError as exc:
        if exc.name != "sitecustomize":
            _report(exc)
    except Exception as exc:
        _report(exc)


def _report(err: BaseException) -> None:
    if sys.flags.verbose:
        sys.excepthook(type(err), err, err.__traceback__)
    else:
        sys.stderr.write(
            f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{err.__class__.__name__}: {err}\n"
        )


if __name__ == "sitecustomize":
    install()
    _chain()
