"""Memory comes back: the allocate / share / release cycles an RL job runs between its trainer and its rollout
engine, each loop in a fresh process of its own, with the driver's figure of what the process holds read
before, during and after every cycle.

Loops (``LOOPS``):

- ipc: allocate, export a CUDA/HIP IPC handle (torch's own reducer, as weight sync does), open it in a second
  process, checksum, close, free (``ipc_collect``, ``empty_cache``). ROCm 7's IPC export pins the pages after
  the free (ROCm/hip#3886).
- vmm: torch's allocator on the driver's virtual memory API (``expandable_segments``): map, then unmap and
  release with the address range still reserved, which ROCm 7.2 does not give back (ROCm/ROCm#6021).
- cumem: vLLM's sleep allocator (``CuMemAllocator``): allocate in its pool, sleep, wake up, where vLLM is
  installed: the path of a colocated vLLM rollout.
- saver: torch_memory_saver's pause / resume where it is installed: the path of a colocated SGLang rollout
  (fzyzcjy/torch_memory_saver#83).
- dmabuf: export the allocation as a dma-buf, close it, free, then allocate afresh: on ROCm 7.2 that next
  allocation faults inside the runtime (ROCm/rocm-systems#8517).

A child prints one ``ROCMSTACK-RETURN:`` JSON line per step it starts and per cycle it finishes, so a child
that dies mid-cycle still says where. ``start_loops`` / ``finish_loops`` run the loops in parallel, one
process each; rocmstack.doctor.checks.memory_return judges the result.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rocmstack.gpu.driver_memory import open_counter, process_device_memory
from rocmstack.platform.tools import Pending, current_python, start_tool

LOOPS = ("ipc", "vmm", "cumem", "saver", "dmabuf")
PREFIX = "ROCMSTACK-RETURN:"
# CUmemRangeHandleType / hipMemRangeHandleType: CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, hipMemRangeHandleTypeDmaBufFd
DMA_BUF_FD = 1
CUDA_ERROR_NOT_SUPPORTED = 801
CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 124
HIP_ERROR_NOT_SUPPORTED = 801
ALIGN = 2 << 20
TAG = "rocmstack"
WARMUP = 1  # leading cycles that set a process up, not judged
# The allocator settings of the vmm loop's process: torch maps and unmaps through the VMM API.
VMM_ENV = {
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    "PYTORCH_HIP_ALLOC_CONF": "expandable_segments:True",
}

Emit = Callable[[dict[str, Any]], None]


class Skip(Exception):
    """The loop cannot run here (its package is missing, the driver lacks the feature): judged nothing."""


def _emit(record: dict[str, Any]) -> None:
    sys.stdout.write(PREFIX + json.dumps(record) + "\n")
    sys.stdout.flush()


def _hip() -> bool:
    import torch

    return torch.version.hip is not None


def runtime() -> dict[str, Any]:
    """The runtime the figures belong to: torch, HIP or CUDA version, the device's name."""
    import torch

    return {
        "torch": torch.__version__,
        "hip": torch.version.hip,
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(0),
    }


class Figures:
    """The driver's figure of what ``pids`` hold (NVML or amdsmi per process), and the device's used bytes."""

    def __init__(self, hip: bool) -> None:
        self.hip = hip
        counter = open_counter("hip" if hip else "cuda", os.environ)
        self._device = None if isinstance(counter, str) else counter[0]
        self.pids: set[int] = {os.getpid()}

    def read(self) -> dict[str, Any]:
        seen = process_device_memory("cuda", hip=self.hip, pids=self.pids)
        if seen.nbytes is None and " lists none of processes " in seen.source:
            # the driver lists only processes that hold device memory: none listed holds none (where it never
            # lists them, e.g. another PID namespace, the judge sees a figure that does not follow the loop)
            return {
                "process": 0,
                "device": self._device_used(),
                "source": f"{seen.source.split()[0]} (none listed)",
            }
        return {"process": seen.nbytes, "device": self._device_used(), "source": seen.source}

    def _device_used(self) -> int | None:
        if self._device is None:
            return None
        try:
            return self._device()
        except Exception:  # one failed read is a missing figure, not a crash of the loop
            return None


def _sync_free() -> None:
    import torch

    torch.cuda.synchronize()
    torch.cuda.ipc_collect()
    torch.cuda.empty_cache()


def _fill(nbytes: int) -> Any:
    import torch

    from rocmstack.gpu.weight_sync import pattern

    t = pattern(nbytes, torch.device("cuda", 0))
    torch.cuda.synchronize()
    return t


def _cycles(
    loop: str,
    cycles: int,
    figures: Figures,
    emit: Emit,
    take: Callable[[int], None],
    give: Callable[[int], None],
    after_give: Callable[[int], None] = lambda _k: None,
) -> None:
    # cycle 1 is the warm-up: the process's context, the allocator's pools and the IPC machinery come into
    # being there and stay; the judge starts from cycle 2 (WARMUP)
    for k in range(1, cycles + WARMUP + 1):
        before = figures.read()
        emit({"loop": loop, "cycle": k, "step": "take"})
        take(k)
        held = figures.read()
        emit({"loop": loop, "cycle": k, "step": "give"})
        give(k)
        after_give(k)
        emit({"loop": loop, "cycle": k, "before": before, "held": held, "after": figures.read()})


# --- the loops ------------------------------------------------------------------------------------------------


def _importer(conn: Any) -> None:
    """The second process of the ipc loop: open each handle, checksum it, close it."""
    import torch

    from rocmstack.gpu.weight_sync import checksum, open_shared_tensor

    torch.cuda.init()
    conn.send(os.getpid())
    while True:
        handle = conn.recv()
        if handle is None:
            return
        t = open_shared_tensor(handle)
        got = checksum(t)
        del t
        torch.cuda.synchronize()
        conn.send(got)


def loop_ipc(nbytes: int, cycles: int, figures: Figures, emit: Emit) -> None:
    import multiprocessing

    # the importer by its module's name, never __main__'s: this file also runs as `python -m`
    from rocmstack.gpu import memory_return as by_name
    from rocmstack.gpu.weight_sync import checksum, share_tensor

    ctx = multiprocessing.get_context("spawn")
    mine, theirs = ctx.Pipe()
    proc = ctx.Process(target=by_name._importer, args=(theirs,), daemon=True)
    proc.start()
    try:
        if not mine.poll(120):
            raise RuntimeError("the importing process did not start within 120 s")
        figures.pids.add(int(mine.recv()))
        held: dict[str, Any] = {}

        def take(_k: int) -> None:
            held["t"] = _fill(nbytes)
            mine.send(share_tensor(held["t"]))
            if not mine.poll(120):
                raise RuntimeError(
                    f"the importing process (exit {proc.exitcode}) did not answer within 120 s"
                )
            if mine.recv() != checksum(held["t"]):
                raise RuntimeError("the importer read other bytes than were exported")

        def give(_k: int) -> None:
            held.clear()
            _sync_free()

        _cycles("ipc", cycles, figures, emit, take, give)
        mine.send(None)
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()


def loop_vmm(nbytes: int, cycles: int, figures: Figures, emit: Emit) -> None:
    import torch

    held: dict[str, Any] = {}

    def take(k: int) -> None:
        held["t"] = _fill(nbytes)
        if k == 1:
            segments = torch.cuda.memory._snapshot()["segments"]
            if not any(s.get("is_expandable") for s in segments):
                raise Skip(
                    "torch did not map through the VMM API (expandable_segments not taken by this build)"
                )

    def give(_k: int) -> None:
        held.clear()
        _sync_free()

    _cycles("vmm", cycles, figures, emit, take, give)


def _pause_loop(
    loop: str,
    nbytes: int,
    cycles: int,
    figures: Figures,
    emit: Emit,
    region: Callable[[], Any],
    pause: Callable[[], None],
    resume: Callable[[], None],
) -> None:
    """A memory saver's cycle: allocate once inside its region, then pause (give) and resume (take)."""
    import torch

    held: dict[str, Any] = {}

    def take(k: int) -> None:
        if k == 1:
            with region():
                held["t"] = _fill(nbytes)
        else:
            resume()
        torch.cuda.synchronize()

    def give(_k: int) -> None:
        pause()
        _sync_free()

    _cycles(loop, cycles, figures, emit, take, give)


def loop_cumem(nbytes: int, cycles: int, figures: Figures, emit: Emit) -> None:
    try:
        from vllm.device_allocator.cumem import CuMemAllocator
    except ImportError as exc:
        raise Skip(f"vLLM's sleep allocator is not installed here ({exc})") from None
    allocator = CuMemAllocator.get_instance()
    _pause_loop(
        "cumem", nbytes, cycles, figures, emit,
        region=lambda: allocator.use_memory_pool(tag=TAG),
        pause=lambda: allocator.sleep(offload_tags=()),
        resume=allocator.wake_up,
    )  # fmt: skip


def loop_saver(nbytes: int, cycles: int, figures: Figures, emit: Emit) -> None:
    try:
        import torch_memory_saver
    except ImportError as exc:
        raise Skip(f"torch_memory_saver is not installed here ({exc})") from None
    saver = torch_memory_saver.torch_memory_saver
    if "torch_memory_saver" not in os.environ.get("LD_PRELOAD", ""):
        saver.hook_mode = "torch"  # no preload library in this process: torch's pluggable-allocator hook
    _pause_loop(
        "saver", nbytes, cycles, figures, emit,
        region=lambda: saver.region(tag=TAG),
        pause=lambda: saver.pause(TAG),
        resume=lambda: saver.resume(TAG),
    )  # fmt: skip


def _export_dma_buf(ptr: int, size: int, hip: bool) -> int:
    """A dma-buf file descriptor for [ptr, ptr + size) through the runtime's own entry point."""
    fd = ctypes.c_int(-1)
    if hip:
        import torch

        found = sorted(glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libamdhip64.so*")))
        lib = ctypes.CDLL(found[0] if found else "libamdhip64.so")
        fn, unsupported, what = lib.hipMemGetHandleForAddressRange, HIP_ERROR_NOT_SUPPORTED, "hipError_t"
        fn.argtypes = [
            ctypes.POINTER(ctypes.c_int),
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_ulonglong,
        ]
        name = "hipMemGetHandleForAddressRange"
    else:
        lib = ctypes.CDLL("libcuda.so.1")
        import torch

        supported = ctypes.c_int(0)
        lib.cuDeviceGetAttribute(
            ctypes.byref(supported), CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, torch.cuda.current_device()
        )
        if supported.value != 1:
            raise Skip("this GPU's driver exports no dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0)")
        fn, unsupported, what = lib.cuMemGetHandleForAddressRange, CUDA_ERROR_NOT_SUPPORTED, "CUresult"
        fn.argtypes = [
            ctypes.POINTER(ctypes.c_int),
            ctypes.c_ulonglong,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_ulonglong,
        ]
        name = "cuMemGetHandleForAddressRange"
    fn.restype = ctypes.c_int
    rc = fn(ctypes.byref(fd), ptr, size, DMA_BUF_FD, 0)
    if rc == unsupported:
        raise Skip(f"this driver exports no dma-buf ({name}: {what} {rc}, not supported)")
    if rc != 0 or fd.value < 0:
        raise RuntimeError(f"{name} failed: {what} {rc}")
    return int(fd.value)


def loop_dmabuf(nbytes: int, cycles: int, figures: Figures, emit: Emit) -> None:
    hip = figures.hip
    size = -(-nbytes // ALIGN) * ALIGN
    held: dict[str, Any] = {}

    def take(k: int) -> None:
        held["t"] = _fill(size)
        emit({"loop": "dmabuf", "cycle": k, "step": "export"})
        os.close(_export_dma_buf(held["t"].data_ptr(), size, hip))

    def give(_k: int) -> None:
        held.clear()
        _sync_free()

    def allocate_again(k: int) -> None:
        # the runtime's next allocation after an export: where ROCm 7.2 faults
        emit({"loop": "dmabuf", "cycle": k, "step": "allocate after export"})
        fresh = _fill(size)
        del fresh
        _sync_free()

    _cycles("dmabuf", cycles, figures, emit, take, give, allocate_again)


RUNNERS: Mapping[str, Callable[[int, int, Figures, Emit], None]] = {
    "ipc": loop_ipc,
    "vmm": loop_vmm,
    "cumem": loop_cumem,
    "saver": loop_saver,
    "dmabuf": loop_dmabuf,
}


def run_loop(loop: str, nbytes: int, cycles: int, emit: Emit = _emit) -> int:
    """One loop in this process: its lines on stdout; exit 0 (ran or skipped), 1 (failed with an error)."""
    try:
        import torch

        if not torch.cuda.is_available():
            emit({"loop": loop, "skipped": "no GPU visible to torch in this process"})
            return 0
        torch.cuda.init()
        hip = _hip()
        emit({"loop": loop, "runtime": runtime(), "pid": os.getpid()})
        figures = Figures(hip)
        RUNNERS[loop](nbytes, cycles, figures, emit)
        emit({"loop": loop, "done": True, "warmup": WARMUP})
        # what is judged is done: the process ends here, before any library's exit-time frees (a memory
        # saver's teardown of a paused region is no part of what the loop asks); the driver frees the rest
        sys.stdout.flush()
        os._exit(0)
    except Skip as exc:
        emit({"loop": loop, "skipped": str(exc)})
        return 0
    except Exception as exc:
        from rocmstack.gpu.outcome import error_line

        emit({"loop": loop, "error": error_line(exc)})
        return 1


# --- the parent's side ------------------------------------------------------------------------------------------


def loop_env(loop: str, env: Mapping[str, str]) -> dict[str, str]:
    out = dict(env)
    if loop == "vmm":
        out.update(VMM_ENV)
    else:  # the other loops measure the runtime's own allocations, not torch's VMM segments
        for name in VMM_ENV:
            out.pop(name, None)
    return out


def start_loops(
    loops: Sequence[str], nbytes: int, cycles: int, env: Mapping[str, str], timeout: float
) -> dict[str, Pending]:
    """Every loop in a process of its own, started now; ``finish_loops`` collects them."""
    return {
        loop: start_tool(
            [
                current_python(),
                "-m",
                "rocmstack.gpu.memory_return",
                loop,
                "--bytes",
                str(nbytes),
                "--cycles",
                str(cycles),
            ],
            timeout=timeout,
            env=loop_env(loop, env),
        )
        for loop in loops
    }


def parse_lines(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        if line.startswith(PREFIX):
            try:
                record = json.loads(line[len(PREFIX) :])
            except ValueError:
                continue
            if isinstance(record, dict):
                out.append(record)
    return out


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def collect(loop: str, nbytes: int, run: Any) -> dict[str, Any]:
    """One loop's result from its process's run (a ToolRun): its cycles, and how it ended."""
    records = [r for r in parse_lines(run.stdout) if r.get("loop") == loop]
    out: dict[str, Any] = {"loop": loop, "nbytes": nbytes, "cycles": [], "seconds": round(run.seconds, 2)}
    last_step = None
    for r in records:
        if "runtime" in r:
            out["runtime"] = r["runtime"]
        elif "step" in r:
            last_step = {"cycle": r.get("cycle"), "step": r["step"]}
        elif "before" in r:
            out["cycles"].append({k: r[k] for k in ("cycle", "before", "held", "after")})
            last_step = None
        for key in ("skipped", "error", "done", "warmup"):
            if key in r:
                out[key] = r[key]
    if run.timed_out:
        out["error"] = f"did not finish within {run.seconds:.0f} s" + (
            f" (in cycle {last_step['cycle']}, {last_step['step']})" if last_step else ""
        )
    elif run.returncode is not None and run.returncode < 0:
        where = f" in cycle {last_step['cycle']}, {last_step['step']}" if last_step else ""
        out["crash"] = f"the process died of {_signal_name(run.returncode)}{where}"
    elif run.returncode not in (0, None) and "error" not in out:
        tail = (run.stderr or run.stdout or "").strip().splitlines()[-3:]
        out["error"] = f"exited {run.returncode}: " + " | ".join(tail)[-400:]
    elif run.missing or run.error:
        out["error"] = f"could not start: {run.reason()}"
    return out


def finish_loops(pending: Mapping[str, Pending], nbytes: int) -> list[dict[str, Any]]:
    return [collect(loop, nbytes, p.result()) for loop, p in pending.items()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocmstack.gpu.memory_return")
    parser.add_argument("loop", choices=LOOPS)
    parser.add_argument("--bytes", type=int, default=256 << 20)
    parser.add_argument("--cycles", type=int, default=5)
    args = parser.parse_args(argv)
    return run_loop(args.loop, args.bytes, args.cycles)


if __name__ == "__main__":
    sys.exit(main())
