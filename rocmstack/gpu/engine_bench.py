"""The bench's subprocess path: an image's engine started once in a child process of its own, every batch
timed inside that one start, with dummy weights from a config-only model folder. One runner per engine, named by
its entry in ``gpu/rollout.py``'s catalogue (``RolloutEntry.bench``); ``bench/adapters.run_engine`` gives it the
launcher (own process group, time limit, peak memory) and skips an engine that is not installed.

- vLLM: ``python -m rocmstack.bench.engine_child`` (one offline ``vllm.LLM``; decode step from ``generate``
  timed at 1 and N new tokens, see engine_child);
- SGLang: its one-batch benchmark (``sglang.benchmark.one_batch``; ``sglang.bench_one_batch`` in releases
  without it), which times prefill and each decode step itself; its JSON-lines result file is read.
Peak memory on CPU: the engine process's max RSS (on a GPU the launcher samples the driver's count). A run
that fails is an `error` with its last log lines.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocmstack.gpu.model_dir import write_model_dir
from rocmstack.gpu.shapes import DTYPES, shape_from_config
from rocmstack.gpu.tokenizer import build_tokenizer
from rocmstack.platform.tools import ToolRun, strip_ansi
from rocmstack.status import Status

# The vLLM child's marked lines on stdout (bench/engine_child.py writes them, run_vllm reads them).
RESULT_MARK = "ROCMSTACK-ENGINE-JSON:"
VISIBILITY_MARK = "ROCMSTACK-ENGINE-VISIBILITY:"

# The bench's launcher: a child's argv and environment (None: this process's) -> how it ran.
Launch = Callable[[list[str], Mapping[str, str] | None], ToolRun]
LOG_TAIL = 40  # log lines kept with a failed run
# Pairs timed again while the N-token calls' median is not the longer (a busy machine), before the decode step is
# reported as not measured.
EXTRA_PAIRS = 6
REASON_LINES = 4  # of those, in the one-line reason


@dataclass(frozen=True, kw_only=True)
class EngineRequest:
    config: Mapping[str, Any]
    batches: tuple[int, ...]
    prompt_len: int
    new_tokens: int
    dtype: str
    device: str  # cpu | cuda
    backend: str  # cpu | cuda | hip: which driver counts device memory
    seed: int = 0
    temperature: float = 1.0
    top_p: float = 1.0
    tokenizer: str | None = None
    iters: int = 3  # timed calls per output length (vLLM); medians are reported
    timeout_s: float = 1800.0


@dataclass(frozen=True, kw_only=True)
class EngineBatch:
    batch: int
    prefill_s: float
    total_s: float  # prefill + N - 1 decode steps: one full batch
    step_s: float | None  # one steady decode step
    # mean full-batch latency as `vllm bench latency` times it (both prefill every call: no prefix cache)
    batch_latency_mean_s: float | None = None
    unmeasured: str | None = None  # why no decode step could be timed (step_s is then None)


@dataclass(frozen=True, kw_only=True)
class EngineRun:
    engine: str
    status: str  # pass | skip | error (rocmstack.status)
    reason: str | None = None
    command: tuple[str, ...] = ()
    version: str | None = None
    engine_starts: int = 0
    start_s: float | None = None
    wall_s: float | None = None  # the engine's whole process: start, warm-up, every batch
    batches: tuple[EngineBatch, ...] = ()
    peak_memory_gb: float | None = None
    peak_memory_source: str | None = None
    log_tail: tuple[str, ...] = ()

    def batch(self, b: int) -> EngineBatch | None:
        return next((x for x in self.batches if x.batch == b), None)


# What an engine's catalogue entry names as its bench path: the request, a scratch folder, the launcher.
BenchRunner = Callable[[EngineRequest, Path, Launch], EngineRun]


def _sglang_module() -> str:
    try:
        new = importlib.util.find_spec("sglang.benchmark.one_batch") is not None
    except ImportError:  # a parent package that fails to import
        new = False
    return "sglang.benchmark.one_batch" if new else "sglang.bench_one_batch"


def cpu_kv_cache_bytes(req: EngineRequest) -> int:
    """Twice the KV cache the largest batch fills (vLLM rounds to blocks of 16 tokens), at least 64 MiB."""
    per_token = shape_from_config(req.config).kv_bytes_per_token(DTYPES[req.dtype])
    return max(64 << 20, 2 * max(req.batches) * (req.prompt_len + req.new_tokens + 16) * per_token)


def vllm_command(request_file: Path) -> list[str]:
    # The child is a program, run by its module name (no import): it keeps the path reports and the
    # evidence runs' hooks name.
    return [sys.executable, "-m", "rocmstack.bench.engine_child", str(request_file)]


def vllm_env(device: str) -> dict[str, str]:
    # On CPU the engine runs inside the child (no engine-core process), so the child's max RSS is the engine's.
    return {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"} if device == "cpu" else dict(os.environ)


def sglang_command(model_dir: Path, req: EngineRequest, result_file: Path) -> list[str]:
    cmd = [
        sys.executable, "-m", _sglang_module(),
        "--model-path", str(model_dir),
        "--load-format", "dummy",
        "--batch-size", *map(str, req.batches),
        "--input-len", str(req.prompt_len),
        "--output-len", str(req.new_tokens),
        "--dtype", req.dtype,
        "--result-filename", str(result_file),
    ]  # fmt: skip
    if req.tokenizer:
        cmd += ["--tokenizer-path", req.tokenizer]
    return cmd


def log_tail(proc: ToolRun) -> tuple[str, ...]:
    lines = [ln.rstrip() for ln in strip_ansi(proc.stdout + "\n" + proc.stderr).splitlines() if ln.strip()]
    return tuple(ln[:400] for ln in lines[-LOG_TAIL:])


def failed(engine: str, cmd: list[str], proc: ToolRun, what: str) -> EngineRun:
    tail = log_tail(proc)
    if proc.timed_out:
        head = f"{engine} did not finish within {proc.seconds:.0f} s (killed)"
    elif proc.error or proc.missing:
        head = proc.reason()
    else:
        head = f"{engine} exited {proc.returncode} {what}"
    last = " | ".join(ln for ln in tail[-REASON_LINES:] if not ln.startswith(VISIBILITY_MARK)) or "no output"
    seen = next((ln for ln in proc.stdout.splitlines() if ln.startswith(VISIBILITY_MARK)), None)
    if seen is not None:  # the engine's own view of its GPUs first: a mask that hid them is the cause
        head += f" ({seen[len(VISIBILITY_MARK) :].strip()})"
    return EngineRun(
        engine=engine, status=Status.ERROR, reason=f"{head}: {last}", command=tuple(cmd), log_tail=tail
    )


def parse_vllm_answer(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            value = json.loads(line[len(RESULT_MARK) :])
            return value if isinstance(value, dict) else None
    return None


def run_vllm(req: EngineRequest, tmp: Path, launch: Launch) -> EngineRun:
    model_dir = write_model_dir(req.config, tmp / "model", req.dtype)
    request = {
        "model_dir": str(model_dir),
        "tokenizer": req.tokenizer,
        "batches": list(req.batches),
        "prompt_len": req.prompt_len,
        "new_tokens": req.new_tokens,
        "dtype": req.dtype,
        "device": req.device,
        "seed": req.seed,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "iters": req.iters,
        "vocab_size": int(req.config["vocab_size"]),
        "kv_cache_bytes": cpu_kv_cache_bytes(req) if req.device == "cpu" else None,
    }
    request_file = tmp / "request.json"
    request_file.write_text(json.dumps(request))
    cmd = vllm_command(request_file)
    proc = launch(cmd, vllm_env(req.device))
    answer = parse_vllm_answer(proc.stdout) if proc.ok else None
    if answer is None:
        return failed("vllm", cmd, proc, "before answering" if proc.ok else "(engine start or run failed)")
    batches = []
    for row in answer["rows"]:
        s = summarise(row, req.new_tokens)
        batches.append(
            EngineBatch(
                batch=int(row["batch"]),
                prefill_s=s["prefill_s"],
                total_s=s["total_s"],
                step_s=s.get("step_s"),
                batch_latency_mean_s=s["batch_latency_mean_s"],
                unmeasured=s.get("unmeasured"),
            )
        )
    return EngineRun(
        engine="vllm",
        status=Status.PASS,
        command=tuple(cmd),
        version=str(answer["version"]),
        engine_starts=int(answer["engine_starts"]),
        start_s=float(answer["start_s"]),
        wall_s=proc.seconds,
        batches=tuple(batches),
        peak_memory_gb=float(answer["max_rss_gb"]) if req.device == "cpu" else None,
        peak_memory_source="max RSS of the engine process" if req.device == "cpu" else None,
    )


def run_sglang(req: EngineRequest, tmp: Path, launch: Launch) -> EngineRun:
    model_dir = write_model_dir(req.config, tmp / "model", req.dtype)
    if not req.tokenizer:
        # The one-batch benchmark loads a tokenizer even for its random token ids: a small local one.
        build_tokenizer(model_dir)
    result_file = tmp / "result.jsonl"
    cmd = sglang_command(model_dir, req, result_file)
    proc = launch(cmd, None)
    if not proc.ok:
        return failed("sglang", cmd, proc, "(engine start or run failed)")
    try:
        rows = [json.loads(ln) for ln in result_file.read_text(encoding="utf-8").splitlines() if ln.strip()]
        batches = sglang_batches(rows)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return failed("sglang", cmd, proc, f"without a readable {result_file.name} ({exc})")
    missing = sorted(set(req.batches) - {b.batch for b in batches})
    if missing:  # the benchmark skips a batch that does not fit its KV cache, and says so in its log
        return failed("sglang", cmd, proc, f"without a result for batch {', '.join(map(str, missing))}")
    return EngineRun(
        engine="sglang",
        status=Status.PASS,
        command=tuple(cmd),
        version=dist_version("sglang"),
        engine_starts=1,  # the benchmark loads the model once and runs every --batch-size in turn
        wall_s=proc.seconds,
        batches=batches,
    )


def dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def sglang_batches(rows: list[dict[str, Any]]) -> tuple[EngineBatch, ...]:
    """The one-batch benchmark's JSON lines: prefill, each decode step synchronised and timed, total."""
    return tuple(
        EngineBatch(
            batch=int(r["batch_size"]),
            prefill_s=float(r["prefill_latency"]),
            total_s=float(r["total_latency"]),
            step_s=float(r["median_decode_latency"]) if "median_decode_latency" in r else None,
        )
        for r in rows
    )


def time_pairs(
    one: Callable[[], float], full: Callable[[], float], iters: int, new_tokens: int
) -> dict[str, Any]:
    """``iters`` timed pairs of a 1-token and an N-token call; while the N-token median is not the longer, up to
    EXTRA_PAIRS more: noise longer than the decode itself (a busy host) would leave no decode time to report."""
    t1: list[float] = []
    tn: list[float] = []
    while len(t1) < iters or (
        new_tokens > 1 and statistics.median(tn) <= statistics.median(t1) and len(t1) < iters + EXTRA_PAIRS
    ):
        t1.append(one())
        tn.append(full())
    return {"t1_s": t1, "tn_s": tn}


def not_measured(total_s: float, prefill_s: float, new_tokens: int, runs: int) -> str | None:
    """Why a decode time of ``total_s - prefill_s`` (two calls timed apart) is no measurement (None when it is
    one)."""
    if new_tokens < 2 or total_s > prefill_s:
        return None
    runs_text = f"medians of {runs} runs" if runs > 1 else "one run each"
    return (
        f"decode not measured: {new_tokens} new tokens took {total_s:.4f} s, no longer than the prefill alone "
        f"({prefill_s:.4f} s; {runs_text}): other work on the machine outweighed the decode; "
        "run the bench on a quiet machine"
    )


def summarise(row: dict[str, Any], new_tokens: int) -> dict[str, Any]:
    """Medians of the timed calls; decode step from the difference of the two output lengths. A difference
    that is not positive is no figure: ``unmeasured`` says why, and no decode figure is given."""
    t1, tn = statistics.median(row["t1_s"]), statistics.median(row["tn_s"])
    out: dict[str, Any] = {
        "prefill_s": t1,
        "total_s": tn,
        "batch_latency_mean_s": statistics.fmean(row["tn_s"]),
    }
    why = not_measured(tn, t1, new_tokens, len(row["tn_s"]))
    if why:
        out["unmeasured"] = why
    elif new_tokens > 1:
        out["decode_s"] = tn - t1
        out["step_s"] = out["decode_s"] / (new_tokens - 1)
    return out
