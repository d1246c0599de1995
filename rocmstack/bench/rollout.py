"""`bench rollout`: run each engine over each batch size and put every result on the decode roofline.

Definitions (one place, used by every engine):
- tokens/s: generated tokens (batch x new_tokens) over the whole generation, prefill included;
- decode tokens/s: batch x (new_tokens - 1) over the decode steps alone (prefill yields the first token);
- MBU: decode tokens/s x bytes per step / batch / bandwidth, against the bandwidth measured in this run
  (a device-to-device copy, bytes read + written) and against the datasheet figure;
- peak memory: the most device memory the engine held during its run (weights, cache, activations).
"""

from __future__ import annotations

import datetime as _dt
import gc
import math
import platform
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from rocmstack import __version__
from rocmstack.bench import roofline
from rocmstack.bench.adapters import run_engine
from rocmstack.bench.report import KIND, SCHEMA, BenchReport
from rocmstack.bench.weightsync import bench_dist, bench_ipc
from rocmstack.gpu import memory
from rocmstack.gpu.engine_bench import EngineRequest
from rocmstack.gpu.memory import MemoryEstimate
from rocmstack.gpu.rollout import CATALOGUE, Catalogue, make_engine, prompt_ids
from rocmstack.gpu.shapes import DTYPES, ModelShape, shape_from_config
from rocmstack.status import Status

# Run in this process: the catalogue's reference engine, and transformers' generate (hf), the baseline both
# are measured against. Every other engine is a catalogue entry's subprocess path.
IN_PROCESS = ("reference", "hf")


def engines(catalogue: Catalogue = CATALOGUE) -> tuple[str, ...]:
    """The names --rollout takes: the in-process runs, then each catalogue entry with a bench path."""
    return (*IN_PROCESS, *catalogue.names(bench=True))


ENGINES = engines()
# Size of the copy that measures the device's bandwidth (source and destination each).
COPY_BYTES_GPU = 2 << 30
COPY_BYTES_CPU = 64 << 20

Progress = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class RolloutSpec:
    shape_name: str
    config: Mapping[str, Any]
    batches: tuple[int, ...]
    prompt_len: int
    new_tokens: int
    engines: tuple[str, ...]
    device: str  # cpu | cuda
    dtype: str = "bfloat16"
    temperature: float = 1.0
    top_p: float = 1.0
    use_graphs: bool = True
    fused: bool | None = None  # reference engine's Triton decode kernels; None = when available
    seed: int = 0
    weight_sync: bool = False
    tokenizer: str | None = None
    engine_timeout_s: float = 1800.0
    catalogue: Catalogue = CATALOGUE  # where the engines' names lead (a test adds one of its own)


def memory_phases(spec: RolloutSpec) -> list[MemoryEstimate]:
    """What each phase of the run holds at its peak; the run needs the largest (they run one after another)."""
    shape = shape_from_config(spec.config)
    dtype_bytes = DTYPES[spec.dtype]
    common: dict[str, Any] = {
        "dtype_bytes": dtype_bytes,
        "batches": spec.batches,
        "prompt_len": spec.prompt_len,
        "new_tokens": spec.new_tokens,
        "top_p": spec.top_p,
        "device": spec.device,
    }
    copy_buffers = 2 * (COPY_BYTES_GPU if spec.device == "cuda" else COPY_BYTES_CPU)
    phases = [MemoryEstimate(what="the bandwidth measurement", activations=copy_buffers)]
    hf = memory.hf_generate(shape, **common) if "hf" in spec.engines else None
    if hf is not None:
        phases.append(hf)
    if "reference" in spec.engines:
        fused = spec.device == "cuda" and spec.fused is not False
        ref = memory.reference_engine(shape, graphs=spec.use_graphs, fused=fused, **common)
        phases.append(ref)
        if hf is not None:  # the engine is loaded from transformers' weights while both exist
            phases.append(replace(ref, what=f"{ref.what}, loaded from transformers", weights=2 * ref.weights))
    if spec.weight_sync:  # trainer state dict, the engine and the receiving copy
        phases.append(
            MemoryEstimate(what="the weight-sync bench", weights=3 * memory.weight_bytes(shape, dtype_bytes))
        )
    return phases


def measure_copy_bandwidth(device: str, *, nbytes: int | None = None, repeats: int = 20) -> float:
    """Device-to-device copy rate in bytes/s, counting bytes read plus bytes written (median of repeats)."""
    import torch

    dev = torch.device(device)
    nbytes = nbytes or (COPY_BYTES_GPU if dev.type == "cuda" else COPY_BYTES_CPU)
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=dev).uniform_()  # never time zeros
    dst = torch.empty_like(src)
    times = []
    for i in range(repeats + 3):
        if dev.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dst.copy_(src)
            end.record()
            end.synchronize()
            elapsed = start.elapsed_time(end) / 1e3
        else:
            t0 = time.perf_counter()
            dst.copy_(src)
            elapsed = time.perf_counter() - t0
        if i >= 3:
            times.append(elapsed)
    times.sort()
    return float(2 * nbytes / times[len(times) // 2])


class _Memory:
    """Peak device memory of one engine run (CPU: the process's max RSS, which only grows)."""

    def __init__(self, device: str) -> None:
        self.cuda = device == "cuda"

    def reset(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()

    def peak_gb(self) -> float:
        if self.cuda:
            import torch

            return float(torch.cuda.max_memory_allocated() / 1e9)
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def spec_bytes(shape: ModelShape, spec: RolloutSpec, batch: int) -> roofline.DecodeBytes:
    """The roofline's bytes per decode step of this run at ``batch`` (the bench's rows and its estimate)."""
    return roofline.decode_bytes(
        shape,
        batch=batch,
        prompt_len=spec.prompt_len,
        new_tokens=spec.new_tokens,
        dtype_bytes=DTYPES[spec.dtype],
    )


def _record(
    engine: str,
    batch: int,
    spec: RolloutSpec,
    shape: ModelShape,
    bandwidth: float,
    spec_bw: float | None,
    *,
    total_s: float | None = None,
    prefill_s: float | None = None,
    decode_s: float | None = None,
    median_step_s: float | None = None,
    tokens_per_s: float | None = None,
    decode_tokens_per_s: float | None = None,
    prefill_tokens_per_s: float | None = None,
    peak_gb: float | None = None,
    status: str = Status.PASS,
    reason: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    b = spec_bytes(shape, spec, batch)
    n, p = spec.new_tokens, spec.prompt_len
    if tokens_per_s is None and total_s:
        tokens_per_s = batch * n / total_s
    if decode_tokens_per_s is None and decode_s and n > 1:
        decode_tokens_per_s = batch * (n - 1) / decode_s
    if prefill_tokens_per_s is None and prefill_s:
        prefill_tokens_per_s = batch * p / prefill_s
    rate = decode_tokens_per_s or tokens_per_s  # engines that report no decode phase: whole-run rate
    out = {
        "engine": engine,
        "batch": batch,
        "prompt_len": p,
        "new_tokens": n,
        "status": status,
        "reason": reason,
        "gpus": 1,
        "tokens_per_s": tokens_per_s,
        "tokens_per_s_per_gpu": tokens_per_s,
        "decode_tokens_per_s": decode_tokens_per_s,
        "median_step_ms": median_step_s * 1e3 if median_step_s else None,
        "prefill_tokens_per_s": prefill_tokens_per_s,
        "bytes_per_step": b.per_step,
        "roofline_tokens_per_s": roofline.roofline_tokens_per_s(
            b, batch=batch, bandwidth_bytes_per_s=bandwidth
        ),
        "roofline_tokens_per_s_spec": (
            roofline.roofline_tokens_per_s(b, batch=batch, bandwidth_bytes_per_s=spec_bw) if spec_bw else None
        ),
        "mbu": roofline.mbu(rate, b, batch=batch, bandwidth_bytes_per_s=bandwidth) if rate else None,
        "mbu_spec": roofline.mbu(rate, b, batch=batch, bandwidth_bytes_per_s=spec_bw)
        if rate and spec_bw
        else None,
        "peak_memory_gb": peak_gb,
    }
    out.update(extra or {})
    return out


def _hf_model(spec: RolloutSpec) -> Any:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    fields = {
        k: v
        for k, v in spec.config.items()
        if k not in ("model_type", "architectures", "torch_dtype", "dtype")
    }
    with torch.device(spec.device):
        model = Qwen3ForCausalLM._from_config(Qwen3Config(**fields), dtype=getattr(torch, spec.dtype))
    return model.eval()


def _run_hf(
    model: Any,
    spec: RolloutSpec,
    shape: ModelShape,
    bandwidth: float,
    spec_bw: float | None,
    progress: Any,
    tick: Any,
    out: list[dict[str, Any]],
    eta: Eta | None = None,
) -> None:
    """Append each batch's row to ``out`` as it finishes: Ctrl-C keeps the finished ones."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    from rocmstack.gpu.engine import Events  # imports torch, as the imports above

    class StepClock(StoppingCriteria):
        """Called once per generated token: marks time without a host sync."""

        def __init__(self, label: str) -> None:
            self.events = Events(torch.device(spec.device), enabled=True)
            self.label = label

        def __call__(self, input_ids, scores, **kwargs):
            self.events.mark()
            tick(f"{self.label}: token {len(self.events.marks)}/{spec.new_tokens}")
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

    def generate(ids, new_tokens, clock=None):
        sampling = {"do_sample": True, "temperature": spec.temperature, "top_p": spec.top_p, "top_k": 0}
        return model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=new_tokens,
            pad_token_id=0,
            eos_token_id=None,
            stopping_criteria=StoppingCriteriaList([clock] if clock else []),
            **(sampling if spec.temperature > 0 else {"do_sample": False}),
        )

    peak = _Memory(spec.device)
    for batch in spec.batches:
        progress(f"hf generate: batch {batch}: warm-up and prefill" + (f" ({eta.left()})" if eta else ""))
        ids = prompt_ids(shape.vocab_size, batch, spec.prompt_len, spec.seed, spec.device)
        with torch.no_grad():
            generate(ids, 4)  # warm-up: kernels, allocator
            _sync(spec.device)
            t0 = time.perf_counter()
            model(ids, use_cache=True)
            _sync(spec.device)
            prefill_s = time.perf_counter() - t0
            peak.reset()
            progress(f"hf generate: batch {batch}: timed run")
            clock = StepClock(f"hf generate: batch {batch}: timed run")
            t0 = time.perf_counter()
            generate(ids, spec.new_tokens, clock)
            _sync(spec.device)
            total_s = time.perf_counter() - t0
        steps = clock.events.seconds()  # token to token: the N - 1 decode steps, each timed where it ran
        out.append(
            _record(
                "hf",
                batch,
                spec,
                shape,
                bandwidth,
                spec_bw,
                total_s=total_s,
                prefill_s=prefill_s,
                decode_s=sum(steps) if steps else None,
                median_step_s=statistics.median_high(steps) if steps else None,
                peak_gb=peak.peak_gb(),
            )
        )
        if eta is not None:
            eta.finished(("hf", batch))


def _run_reference(
    engine: Any,
    spec: RolloutSpec,
    shape: ModelShape,
    bandwidth: float,
    spec_bw: float | None,
    progress: Any,
    tick: Any,
    out: list[dict[str, Any]],
    eta: Eta | None = None,
) -> None:
    """Append each batch's row to ``out`` as it finishes: Ctrl-C keeps the finished ones."""
    import torch

    peak = _Memory(spec.device)
    for batch in spec.batches:
        ids = prompt_ids(shape.vocab_size, batch, spec.prompt_len, spec.seed, spec.device)
        gen = torch.Generator(device=spec.device).manual_seed(spec.seed)
        kwargs = {"temperature": spec.temperature, "top_p": spec.top_p, "generator": gen}
        warm, timed = (
            f"reference: batch {batch}: {p}"
            for p in ("warm-up (captures the decode graphs)" if engine.use_graphs else "warm-up", "timed run")
        )
        progress(warm + (f" ({eta.left()})" if eta else ""))
        engine.generate(
            ids,
            spec.new_tokens,
            on_token=lambda n, w=warm: tick(f"{w}: token {n}/{spec.new_tokens}"),
            **kwargs,
        )
        _sync(spec.device)
        peak.reset()
        progress(timed)
        t0 = time.perf_counter()
        result = engine.generate(
            ids, spec.new_tokens, timed=True, on_token=lambda n, t=timed: tick(f"{t}: token {n}/{spec.new_tokens}"),
            **kwargs,
        )  # fmt: skip
        _sync(spec.device)
        wall_s = time.perf_counter() - t0
        decode_s = sum(result.step_seconds)
        out.append(
            _record(
                "reference",
                batch,
                spec,
                shape,
                bandwidth,
                spec_bw,
                total_s=result.prefill_seconds + decode_s,
                prefill_s=result.prefill_seconds,
                decode_s=decode_s,
                median_step_s=statistics.median_high(result.step_seconds) if result.step_seconds else None,
                peak_gb=peak.peak_gb(),
                extra={
                    "wall_s": wall_s,
                    "graphs": engine.use_graphs,
                    "fused": engine.fused,
                    "fused_fallback": engine.fused_fallback,
                    "gemv": dict(engine.gemv_report) if batch == 1 and engine.gemv_report else None,
                },
            )
        )
        if eta is not None:
            eta.finished(("reference", batch))


def _run_external(
    name: str,
    spec: RolloutSpec,
    shape: ModelShape,
    bandwidth: float,
    spec_bw: float | None,
    backend: str,
    progress: Any,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One start of the engine for every batch; its rows, and what the run was (version, starts, command)."""
    progress(f"{name}: one engine start, batches {','.join(map(str, spec.batches))}")
    run = run_engine(
        name,
        EngineRequest(
            config=spec.config, batches=spec.batches, prompt_len=spec.prompt_len, new_tokens=spec.new_tokens,
            dtype=spec.dtype, device=spec.device, backend=backend, seed=spec.seed,
            temperature=spec.temperature, top_p=spec.top_p, tokenizer=spec.tokenizer,
            timeout_s=spec.engine_timeout_s,
        ),
        spec.catalogue,
    )  # fmt: skip
    out = []
    for batch in spec.batches:
        got = run.batch(batch)
        if got is None:
            reason = (
                run.reason if run.status != Status.PASS else f"{name} reported no result for batch {batch}"
            )
            status = run.status if run.status != Status.PASS else Status.ERROR
            out.append(_record(name, batch, spec, shape, bandwidth, spec_bw, status=status, reason=reason))
            continue
        if got.unmeasured:  # a row of figures that do not fit together is worse than none
            out.append(
                _record(
                    name, batch, spec, shape, bandwidth, spec_bw, status=Status.ERROR, reason=got.unmeasured
                )
            )
            continue
        out.append(
            _record(
                name,
                batch,
                spec,
                shape,
                bandwidth,
                spec_bw,
                total_s=got.total_s,
                prefill_s=got.prefill_s,
                median_step_s=got.step_s,
                # the one figure of a step: tok/s and ms/step agree (batch x 1000 / ms)
                decode_tokens_per_s=batch / got.step_s if got.step_s else None,
                peak_gb=run.peak_memory_gb,
                extra={"batch_latency_mean_s": got.batch_latency_mean_s},
            )
        )
    about = {
        "engine": name,
        "status": run.status,
        "reason": run.reason,
        "version": run.version,
        "engine_starts": run.engine_starts,
        "start_s": run.start_s,
        "wall_s": run.wall_s,
        "peak_memory_source": run.peak_memory_source,
        "command": list(run.command),
        "log_tail": list(run.log_tail),
    }
    return out, about


def _device_info(device: str) -> tuple[str, str]:
    import torch

    if device == "cuda":
        return torch.cuda.get_device_name(), "hip" if torch.version.hip else "cuda"
    return platform.processor() or platform.machine(), "cpu"


def _versions() -> dict[str, str | None]:
    import torch

    try:
        import transformers

        tf = transformers.__version__
    except ImportError:
        tf = None
    return {
        "rocmstack": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "hip": torch.version.hip,
        "cuda": torch.version.cuda,
        "transformers": tf,
    }


def _every(progress: Progress, seconds: float) -> Progress:
    """progress, passed on at most once per `seconds` (per-token messages)."""
    last = [-math.inf]

    def tick(msg: str) -> None:
        now = time.monotonic()
        if now - last[0] >= seconds:
            last[0] = now
            progress(msg)

    return tick


# The share of the measured copy rate a decode step reaches, by device: 0.24-0.33 measured for qwen3-0.6b
# at batches 1 and 8 on a 2-core x86-64 VM (docs/bench.md); GPUs reach 0.5-0.76 (docs/bench.md's table),
# where the lower figure keeps the estimate on the long side. transformers' generate is slower per step.
DECODE_SHARE = {"cpu": 0.25, "cuda": 0.5}
HF_SLOWER = {"cpu": 2.0, "cuda": 20.0}


def estimate_seconds(spec: RolloutSpec, shape: ModelShape, bandwidth: float) -> dict[tuple[str, int], float]:
    """Seconds each (engine, batch) run of rocmstack's own engines will take, before it starts: every
    generate call (a warm-up and a timed one) moves the decode step's bytes once per new token, at the share
    of the measured copy rate the device reaches; prefill is counted as two steps. The image's engines
    (the catalogue's subprocess paths: vllm, sglang) are not estimated: their start alone varies by minutes."""
    share = DECODE_SHARE.get(spec.device, 0.25)
    out = {}
    for batch in spec.batches:
        b = spec_bytes(shape, spec, batch)
        step_s = b.per_step / (bandwidth * share)
        one_call = (spec.new_tokens + 2) * step_s
        if "hf" in spec.engines:
            out[("hf", batch)] = (one_call + 6 * step_s) * HF_SLOWER.get(spec.device, 2.0)
        if "reference" in spec.engines:
            out[("reference", batch)] = 2 * one_call
    return out


class Eta:
    """The estimate, then the time left: what the estimate still holds for the runs not finished, scaled
    by how the finished ones compared with theirs."""

    def __init__(
        self, estimate: Mapping[tuple[str, int], float], clock: Callable[[], float] = time.monotonic
    ):
        self.estimate = dict(estimate)
        self.clock = clock
        self.t0 = clock()
        self.done: set[tuple[str, int]] = set()

    def announce(self) -> str:
        total = sum(self.estimate.values())
        if not self.estimate:
            return "estimate: none for these engines (their start alone varies by minutes)"
        return (
            f"estimate: about {_duration(total)} for {len(self.estimate)} run(s) of rocmstack's engines "
            f"(decode at the device's usual share of the measured copy rate; engine starts not counted)"
        )

    def finished(self, run: tuple[str, int]) -> None:
        self.done.add(run)

    def left(self) -> str:
        planned = sum(v for k, v in self.estimate.items() if k in self.done)
        rest = sum(v for k, v in self.estimate.items() if k not in self.done)
        scale = (self.clock() - self.t0) / planned if planned > 0 else 1.0
        return f"about {_duration(rest * scale)} left"


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


class RolloutInterrupted(KeyboardInterrupt):
    """Ctrl-C during the bench: ``report`` holds the rows that finished and where it stopped."""

    def __init__(self, report: dict[str, Any]) -> None:
        super().__init__()
        self.report = report


def run_rollout(
    spec: RolloutSpec, progress: Progress = lambda msg: None, *, tick_s: float = 5.0
) -> dict[str, Any]:
    """Run the bench; `progress` gets each phase and, every `tick_s` seconds, the token reached. Ctrl-C
    raises RolloutInterrupted with the rows that finished."""
    for name in spec.engines:  # an unknown name fails here, before any work
        if name not in IN_PROCESS:
            spec.catalogue.entry(name, flag="bench engine", bench=True)
    import torch

    shape = shape_from_config(spec.config)
    device_name, backend = _device_info(spec.device)
    arch = None
    if spec.device == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        arch = roofline.lookup_spec(
            device_name, gcn_arch=getattr(props, "gcnArchName", None), memory_gb=props.total_memory / 1e9
        )
    spec_bw = arch.hbm_tb_per_s * 1e12 if arch else None
    results: list[dict[str, Any]] = []
    engines: list[dict[str, Any]] = []
    sync_results: list[dict[str, Any]] = []
    measured: dict[str, float] = {}
    phase = ["measuring device copy bandwidth"]

    def tracked(msg: str) -> None:
        phase[0] = msg
        progress(msg)

    interrupted = None
    try:
        _measure(spec, shape, spec_bw, backend, tracked, tick_s, measured, results, engines, sync_results)
    except KeyboardInterrupt:
        interrupted = {"phase": phase[0], "rows": len(results)}
    report = _report(
        spec, shape, device_name, backend, arch, measured.get("bandwidth"), results, engines, sync_results,
        interrupted=interrupted,
    )  # fmt: skip
    if interrupted is not None:
        raise RolloutInterrupted(report) from None
    return report


def _measure(
    spec: RolloutSpec,
    shape: ModelShape,
    spec_bw: float | None,
    backend: str,
    progress: Progress,
    tick_s: float,
    measured: dict[str, float],
    results: list[dict[str, Any]],
    engines: list[dict[str, Any]],
    sync_results: list[dict[str, Any]],
) -> None:
    """The bench itself; every list is filled as its entries finish."""
    import torch

    progress("measuring device copy bandwidth")
    bandwidth = measured["bandwidth"] = measure_copy_bandwidth(spec.device)
    eta = Eta(estimate_seconds(spec, shape, bandwidth))
    progress(eta.announce())

    hf_model = None
    if "hf" in spec.engines or "reference" in spec.engines:
        torch.manual_seed(spec.seed)
    if "hf" in spec.engines:
        progress("building the transformers model (random weights)")
        hf_model = _hf_model(spec)
        _run_hf(hf_model, spec, shape, bandwidth, spec_bw, progress, _every(progress, tick_s), results, eta)
    if "reference" in spec.engines:
        progress("building the reference engine")
        engine, _ = make_engine(
            dict(spec.config),
            device=spec.device,
            dtype=getattr(torch, spec.dtype),
            max_batch=max(spec.batches),
            max_seq_len=spec.prompt_len + spec.new_tokens,
            prefer="reference",
            graphs=spec.use_graphs,
            fused=spec.fused,
            catalogue=spec.catalogue,
        )
        if hf_model is not None:  # the very weights transformers ran with
            engine.load_hf_state_dict(hf_model.state_dict())
        else:
            engine.init_random_(spec.seed)
        hf_model = None  # the engine holds the weights now: free transformers' copy before timing
        if spec.device == "cuda":
            torch.cuda.empty_cache()
        _run_reference(
            engine, spec, shape, bandwidth, spec_bw, progress, _every(progress, tick_s), results, eta
        )
        del engine
        if spec.device == "cuda":
            torch.cuda.empty_cache()
    del hf_model  # before the external engines take the device
    if spec.device == "cuda":
        # The engines size their cache from the device's free memory (vLLM refuses to start when less than
        # its share is free): cycles (captured graphs and their pools) must go before the cache is emptied.
        gc.collect()
        torch.cuda.empty_cache()
    for name in spec.catalogue.names(bench=True):
        if name in spec.engines:
            rows, about = _run_external(name, spec, shape, bandwidth, spec_bw, backend, progress)
            results += rows
            engines.append(about)

    if spec.weight_sync:
        progress("weight sync: IPC on one device")
        sync_results.append(
            bench_ipc(spec.config, device=spec.device, dtype=spec.dtype, copy_bandwidth=bandwidth).to_dict()
        )
        progress("weight sync: two ranks")
        sync_results.append(
            bench_dist(spec.config, device=spec.device, dtype=spec.dtype, copy_bandwidth=bandwidth).to_dict()
        )


def _report(
    spec: RolloutSpec,
    shape: ModelShape,
    device_name: str,
    backend: str,
    arch: Any,
    bandwidth: float | None,
    results: list[dict[str, Any]],
    engines: list[dict[str, Any]],
    sync_results: list[dict[str, Any]],
    interrupted: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """rollout.json, built as its model; ``interrupted``: where Ctrl-C stopped the run (the rows kept)."""
    dtype_bytes = DTYPES[spec.dtype]
    report = {
        "schema": SCHEMA,
        "kind": KIND,
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": ["rocmstack", *sys.argv[1:]],
        "host": platform.node(),
        "device": {
            "type": spec.device,
            "backend": backend,
            "name": device_name,
            "gpus": 1 if spec.device == "cuda" else 0,
            "spec": (
                {
                    "name": arch.name,
                    "arch": arch.arch,
                    "hbm_tb_per_s": arch.hbm_tb_per_s,
                    "source": arch.source,
                }
                if arch
                else None
            ),
            "copy_bandwidth_gb_s": None if bandwidth is None else bandwidth / 1e9,
        },
        "versions": _versions(),
        "shape": {
            "name": spec.shape_name,
            "params": shape.total_params(),
            "params_read_per_step": shape.params_read_per_step(),
            "weight_bytes_per_step": shape.params_read_per_step() * dtype_bytes,
            "kv_bytes_per_token": shape.kv_bytes_per_token(dtype_bytes),
        },
        "settings": {
            "prompt_len": spec.prompt_len,
            "new_tokens": spec.new_tokens,
            "dtype": spec.dtype,
            "temperature": spec.temperature,
            "top_p": spec.top_p,
            "graphs": spec.use_graphs,
            "fused": spec.fused,
            "seed": spec.seed,
        },
        "results": results,
        "engines": engines,
        "weight_sync": sync_results,
    }
    if interrupted is not None:
        report["interrupted"] = interrupted
    return BenchReport.produce(report).wire()
