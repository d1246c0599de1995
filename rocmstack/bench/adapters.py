"""vLLM and SGLang through their own benchmarks, parsed onto the same roofline as the reference engine.

Each engine is run as a subprocess (argument list, timeout) with dummy weights from a config-only
model directory. When the engine is not installed the result is a `skip` with the reason, never a guess.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocmstack.platform.tools import run_tool

# `vllm bench throughput` (and the older benchmarks/benchmark_throughput.py) print one summary line:
#   Throughput: 89.27 requests/s, 22853.37 total tokens/s, 11426.69 output tokens/s
# versions before vllm#8914 printed only "..., 20926.37 tokens/s" (total).
_VLLM_LINE = re.compile(
    r"^Throughput:\s*(?P<rps>[\d.]+) requests/s,\s*(?P<total>[\d.]+) (?:total )?tokens/s"
    r"(?:,\s*(?P<output>[\d.]+) output tokens/s)?",
    re.MULTILINE,
)

# `python -m sglang.bench_one_batch` prints, per run (a warmup then the benchmark):
#   Prefill. latency: 0.01014 s, throughput:   5916.43 token/s
#   Decode.  median latency: 0.00572 s, median throughput:    174.85 token/s
#   Total. latency:  0.062 s, throughput:   1122.76 token/s
_SGL_PREFILL = re.compile(
    r"^Prefill\. latency: (?P<lat>[\d.]+) s, throughput:\s*(?P<tps>[\d.]+) token/s", re.MULTILINE
)
_SGL_DECODE = re.compile(
    r"^Decode\.\s+median latency: (?P<lat>[\d.]+) s, median throughput:\s*(?P<tps>[\d.]+) token/s",
    re.MULTILINE,
)
_SGL_TOTAL = re.compile(
    r"^Total\. latency:\s*(?P<lat>[\d.]+) s, throughput:\s*(?P<tps>[\d.]+) token/s", re.MULTILINE
)


class ParseError(ValueError):
    """The engine's output lacks the summary lines we read (a format change, or the run failed)."""


@dataclass(frozen=True, kw_only=True)
class VllmThroughput:
    requests_per_s: float
    total_tokens_per_s: float
    output_tokens_per_s: float | None


def parse_vllm_throughput(text: str) -> VllmThroughput:
    """The last summary in the text (a warmup may print one before)."""
    matches = list(_VLLM_LINE.finditer(text))
    if not matches:
        raise ParseError("no 'Throughput: ... requests/s' line in vllm's output")
    m = matches[-1]
    return VllmThroughput(
        requests_per_s=float(m["rps"]),
        total_tokens_per_s=float(m["total"]),
        output_tokens_per_s=float(m["output"]) if m["output"] else None,
    )


@dataclass(frozen=True, kw_only=True)
class SglangOneBatch:
    prefill_latency_s: float
    prefill_tokens_per_s: float
    decode_median_latency_s: float
    decode_median_tokens_per_s: float
    total_latency_s: float | None
    total_tokens_per_s: float | None


def parse_sglang_one_batch(text: str) -> SglangOneBatch:
    """The benchmark run's figures: bench_one_batch prints a warmup block first, so the last block wins."""
    prefill, decode = list(_SGL_PREFILL.finditer(text)), list(_SGL_DECODE.finditer(text))
    if not prefill or not decode:
        raise ParseError("no 'Prefill. latency' / 'Decode.  median latency' lines in sglang's output")
    total = list(_SGL_TOTAL.finditer(text))
    return SglangOneBatch(
        prefill_latency_s=float(prefill[-1]["lat"]),
        prefill_tokens_per_s=float(prefill[-1]["tps"]),
        decode_median_latency_s=float(decode[-1]["lat"]),
        decode_median_tokens_per_s=float(decode[-1]["tps"]),
        total_latency_s=float(total[-1]["lat"]) if total else None,
        total_tokens_per_s=float(total[-1]["tps"]) if total else None,
    )


def engine_available(engine: str) -> str | None:
    """None when the engine can run here, else the reason it cannot."""
    if importlib.util.find_spec(engine) is None:  # the engines' import names are their own
        return f"{engine} is not installed in this Python ({sys.executable})"
    if engine == "vllm" and shutil.which("vllm") is None:
        return "the vllm command is not on PATH"
    return None


def write_model_dir(config: Mapping[str, Any], directory: Path, dtype: str) -> Path:
    """A config-only HF model directory; both engines fill it with dummy weights (--load-format dummy)."""
    cfg = dict(config) | {"architectures": ["Qwen3ForCausalLM"], "torch_dtype": dtype}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(cfg, indent=2))
    return directory


def vllm_command(
    model_dir: Path, *, batch: int, prompt_len: int, new_tokens: int, tokenizer: str | None
) -> list[str]:
    cmd = [
        shutil.which("vllm") or "vllm", "bench", "throughput",
        "--model", str(model_dir),
        "--load-format", "dummy",
        "--dataset-name", "random",
        "--input-len", str(prompt_len),
        "--output-len", str(new_tokens),
        "--num-prompts", str(batch),
        "--max-num-seqs", str(batch),
        "--dtype", "bfloat16",
    ]  # fmt: skip
    if tokenizer:
        cmd += ["--tokenizer", tokenizer]
    return cmd


def sglang_command(
    model_dir: Path, *, batch: int, prompt_len: int, new_tokens: int, tokenizer: str | None
) -> list[str]:
    cmd = [
        sys.executable, "-m", "sglang.bench_one_batch",
        "--model-path", str(model_dir),
        "--load-format", "dummy",
        "--batch-size", str(batch),
        "--input-len", str(prompt_len),
        "--output-len", str(new_tokens),
        "--dtype", "bfloat16",
    ]  # fmt: skip
    if tokenizer:
        cmd += ["--tokenizer-path", tokenizer]
    return cmd


@dataclass(frozen=True, kw_only=True)
class EngineRun:
    """What an external engine reported, in the bench's units (tokens/s of generated tokens)."""

    status: str  # ok | skip | error
    reason: str | None = None
    command: tuple[str, ...] = ()
    tokens_per_s: float | None = None  # generated tokens over the whole run (prefill included)
    decode_tokens_per_s: float | None = None  # steady decode rate where the engine reports it
    median_step_s: float | None = None
    prefill_tokens_per_s: float | None = None


def run_engine(
    engine: str,
    config: Mapping[str, Any],
    *,
    batch: int,
    prompt_len: int,
    new_tokens: int,
    tokenizer: str | None,
    timeout_s: float,
) -> EngineRun:
    reason = engine_available(engine)
    if reason:
        return EngineRun(status="skip", reason=reason)
    with tempfile.TemporaryDirectory(prefix=f"rocmstack-{engine}-") as tmp:
        model_dir = write_model_dir(config, Path(tmp) / "model", "bfloat16")
        build = vllm_command if engine == "vllm" else sglang_command
        cmd = build(model_dir, batch=batch, prompt_len=prompt_len, new_tokens=new_tokens, tokenizer=tokenizer)
        # Own process group, killed whole at the limit: the engines' worker processes must not keep the GPU.
        proc = run_tool(cmd, timeout=timeout_s)
    if proc.timed_out:
        return EngineRun(
            status="error", reason=f"{engine} benchmark exceeded {timeout_s:.0f} s", command=tuple(cmd)
        )
    text = proc.stdout + "\n" + proc.stderr
    if not proc.ok:
        tail = " | ".join(text.strip().splitlines()[-3:]) or proc.error or "no output"
        return EngineRun(
            status="error", reason=f"{engine} exited {proc.returncode}: {tail}", command=tuple(cmd)
        )
    try:
        if engine == "vllm":
            v = parse_vllm_throughput(text)
            out = v.output_tokens_per_s
            if out is None:  # old format: only total tokens/s; output share is new/(prompt+new)
                out = v.total_tokens_per_s * new_tokens / (prompt_len + new_tokens)
            return EngineRun(status="ok", command=tuple(cmd), tokens_per_s=out)
        s = parse_sglang_one_batch(text)
        return EngineRun(
            status="ok",
            command=tuple(cmd),
            tokens_per_s=s.total_tokens_per_s * new_tokens / (prompt_len + new_tokens)
            if s.total_tokens_per_s
            else None,
            decode_tokens_per_s=s.decode_median_tokens_per_s,
            median_step_s=s.decode_median_latency_s,
            prefill_tokens_per_s=s.prefill_tokens_per_s,
        )
    except ParseError as exc:
        return EngineRun(status="error", reason=str(exc), command=tuple(cmd))
