"""`rocmstack bench ...`: the rollout hot path against the hardware's memory roofline.

torch, transformers and the engines are imported inside the commands, so `rocmstack --help` stays fast.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.markup import escape

from rocmstack.bench.report import check_rates, upgrade
from rocmstack.bench.rollout import ENGINES  # what --rollout takes, derived from the rollout catalogue
from rocmstack.errors import CheckFailed, InputError, Interrupted, printable, quoted
from rocmstack.options import (
    BASELINE,
    DEVICE,
    JSON_OPT,
    OUTPUT,
    ROLLOUT,
    ROLLOUT_ENGINE_OLD,
    SEED,
    parse_duration,
    renamed,
)
from rocmstack.output import (
    check_output_file,
    dumps,
    log_lines,
    print_json,
    print_table,
    stderr,
    stdout,
    warn,
)
from rocmstack.status import Status

# Defaults per device. A GPU runs the shape and batches rollouts use; a CPU runs a small real shape at
# batches and lengths that finish in about a minute (measured: ~45 s on a 2-core x86 box).
DEFAULTS: dict[str, dict[str, str | int]] = {
    "cuda": {"shape": "qwen3-8b", "batch": "1,64,256", "prompt_len": 128, "new_tokens": 256},
    "cpu": {"shape": "qwen3-0.6b", "batch": "1,8", "prompt_len": 64, "new_tokens": 32},
}
# Token progress at most this often (a line each time when stderr is not a terminal).
TICK_S = 5.0


def _unique(flag: str, text: str, items: tuple[Any, ...]) -> None:
    twice = next((x for i, x in enumerate(items) if x in items[:i]), None)
    if twice is not None:
        raise InputError(
            f"{flag} {quoted(text)}: {twice} is listed twice (it would run twice)",
            fix=f"name each once, e.g. {flag} {','.join(dict.fromkeys(str(x) for x in items))}",
        )


def _parse_batches(text: str) -> tuple[int, ...]:
    try:
        batches = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        batches = ()
    if not batches or any(b <= 0 for b in batches):
        raise InputError(
            f"--batch {quoted(text)}: expected positive integers separated by commas",
            fix="e.g. --batch 1,64,256",
        )
    _unique("--batch", text, batches)
    return batches


def _parse_engines(text: str) -> tuple[str, ...]:
    engines = tuple(e.strip() for e in text.split(",") if e.strip())
    bad = [e for e in engines if e not in ENGINES]
    if not engines or bad:
        raise InputError(
            f"--rollout {quoted(text)}: unknown engine {quoted(bad[0] if bad else '')}",
            fix=f"use {'|'.join(ENGINES)}",
        )
    _unique("--rollout", text, engines)
    return engines


def plan(
    device: str, shape: str | None, batch: str | None, prompt_len: int | None, new_tokens: int | None
) -> tuple[str, dict[str, Any], tuple[int, ...], int, int]:
    """What runs: the user's settings, and the device's defaults for those not given."""
    from rocmstack.gpu.shapes import load_config

    defaults = DEFAULTS[device]
    name, config = load_config(shape or str(defaults["shape"]))
    return (
        name,
        config,
        _parse_batches(batch or str(defaults["batch"])),
        prompt_len or int(defaults["prompt_len"]),
        new_tokens or int(defaults["new_tokens"]),
    )


def _status_line(status: Any) -> Callable[[str], None]:
    """A terminal's live status line."""
    return lambda msg: status.update(f"bench rollout: {escape(printable(msg))}")


def _resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda"):
        raise InputError(
            f"--device {device!r}: expected cpu, cuda or auto", fix="ROCm GPUs are 'cuda' in PyTorch too"
        )
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError(
            f"--device cuda: torch {torch.__version__} sees no GPU",
            fix="run inside the image on a GPU node, or pass --device cpu",
        )
    return device


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


# What each rate counts: they differ by the prefill, and by the median step against the mean one.
# One decode rate from the engine to every report: decode_tokens_per_s (all decode steps' time, the rate MBU
# and validate's verdict use); the median step is shown beside it, never turned into a second rate.
COLUMNS_NOTE = (
    "tok/s: batch x new tokens / the whole timed generate (prefill included); step ms: the median decode "
    "step; decode tok/s: batch x (new tokens - 1) / all decode steps' time, the rate MBU is of"
)


def _render(report: dict[str, Any]) -> None:
    from rich.table import Table

    dev = report["device"]
    spec = dev["spec"]
    out = stdout()
    out.print(
        f"[bold]{report['shape']['name']}[/bold] on {dev['name']} ({dev['backend']}): "
        f"copy bandwidth {dev['copy_bandwidth_gb_s']:.0f} GB/s measured"
        + (f", {spec['hbm_tb_per_s'] * 1e3:.0f} GB/s spec ({spec['name']})" if spec else ", no spec entry")
    )
    s = report["settings"]
    table = Table(
        title=f"prompt {s['prompt_len']}, {s['new_tokens']} new tokens, {s['dtype']}",
        title_justify="left",
    )
    for col in (
        "engine",
        "batch",
        "tok/s",
        "step ms",
        "decode tok/s",
        "prefill tok/s",
        "MBU",
        "MBU spec",
        "roofline tok/s",
        "peak GB",
    ):
        table.add_column(col, justify="left" if col == "engine" else "right", no_wrap=col == "engine")
    reasons: dict[str, str] = {}
    for r in report["results"]:
        if r["status"] != Status.PASS:
            table.add_row(r["engine"], str(r["batch"]), r["status"], *[""] * 7)
            reasons.setdefault(f"{r['engine']} {r['status']}", r["reason"])
            continue
        table.add_row(
            r["engine"],
            str(r["batch"]),
            _fmt(r["tokens_per_s"], ",.1f"),
            _fmt(r["median_step_ms"], ".2f"),
            _fmt(r["decode_tokens_per_s"], ",.1f"),
            _fmt(r["prefill_tokens_per_s"], ",.0f"),
            _fmt(r["mbu"], ".3f"),
            _fmt(r["mbu_spec"], ".3f"),
            _fmt(r["roofline_tokens_per_s"], ",.0f"),
            _fmt(r["peak_memory_gb"], ".1f"),
        )
    print_table(table, out)
    out.print(COLUMNS_NOTE, markup=False, highlight=False)
    for e in report.get("engines", []):
        if e["status"] == Status.PASS:
            out.print(
                escape(
                    f"{e['engine']} {e['version']}: {e['engine_starts']} engine start(s) for all batches"
                    + (f" (start {e['start_s']:.0f} s)" if e["start_s"] is not None else "")
                    + (f", {e['wall_s']:.0f} s in all" if e.get("wall_s") is not None else "")
                    + f"; peak memory: {e['peak_memory_source'] or 'not measured'}"
                )
            )
    for what, why in reasons.items():
        out.print(escape(f"{what}: {why}"))
    for w in report["weight_sync"]:
        if w["status"] == Status.PASS:
            out.print(
                f"weight sync {w['method']}: {w['bytes'] / 1e9:.2f} GB in {w['median_s'] * 1e3:.1f} ms "
                f"= {w['gb_per_s']:.0f} GB/s ({w['vs_device_copy']:.2f} of device copy), first push "
                f"{w['first_s'] * 1e3:.0f} ms, verified={w['verified']}"
            )
        else:
            out.print(escape(f"weight sync {w['method']}: {w['status']}: {w['reason']}"))
    base = report.get("baseline")
    if base:
        for c in base["checks"]:
            mark = "ok" if c["status"] == Status.PASS else "[red]REGRESSION[/red]"
            now, then = check_rates(c)
            out.print(
                f"baseline {c['engine']} batch {c['batch']}: {now:,.1f} vs {then:,.1f} decode tok/s"
                f" ({c['ratio']:.2f}x) {mark}"
            )


def rollout(
    shape: str | None = typer.Option(
        None,
        "--shape",
        help="qwen3-0.6b | qwen3-8b | PATH/config.json (HF Qwen3 fields). Default: qwen3-8b on a GPU, "
        "qwen3-0.6b on CPU.",
    ),
    batch: str | None = typer.Option(
        None, "--batch", help="Batch sizes, comma-separated. Default: 1,64,256 on a GPU, 1,8 on CPU."
    ),
    prompt_len: int | None = typer.Option(
        None, "--prompt-len", min=1, help="Prompt tokens per sequence. Default: 128 on a GPU, 64 on CPU."
    ),
    new_tokens: int | None = typer.Option(
        None, "--new-tokens", min=1, help="Generated tokens per sequence. Default: 256 on a GPU, 32 on CPU."
    ),
    rollout: str = ROLLOUT(
        "reference",
        detail=f"Here: a comma-separated list of {', '.join(ENGINES)} (hf: transformers' generate, the "
        "baseline).",
    ),
    device: str = DEVICE("auto"),
    dtype: str = typer.Option("bfloat16", "--dtype", help="bfloat16 | float16 | float32."),
    temperature: float = typer.Option(1.0, "--temperature", min=0.0, help="0 = greedy."),
    top_p: float = typer.Option(1.0, "--top-p", help="Nucleus mass in (0, 1]."),
    graphs: bool = typer.Option(
        True, "--graphs/--no-graphs", help="Capture the reference decode step as a graph."
    ),
    fused: bool | None = typer.Option(
        None, "--fused/--no-fused", help="Reference engine's Triton decode kernels (default: when available)."
    ),
    weight_sync: bool = typer.Option(
        False, "--weight-sync", help="Also time a full state-dict push (IPC, 2-rank)."
    ),
    seed: int = SEED(0),
    tokenizer: str | None = typer.Option(
        None, "--tokenizer", help="Local tokenizer for vllm/sglang (offline)."
    ),
    engine_timeout: str = typer.Option(
        "30m", "--engine-timeout", metavar="TIME", help="Time limit of each vllm/sglang run, e.g. 90s or 30m."
    ),
    json_out: bool = JSON_OPT,
    output: Path | None = OUTPUT(None, detail="Here: also write the JSON report to this file."),
    baseline: Path | None = BASELINE(None),
    tolerance: float | None = typer.Option(
        None, "--tolerance", min=0.0, max=1.0, help="Allowed drop (default: file's)."
    ),
    save_baseline: Path | None = typer.Option(
        None, "--save-baseline", help="Merge this run into a baseline file."
    ),
    engine: str | None = ROLLOUT_ENGINE_OLD,
) -> None:
    """Decode throughput of the rollout path (random weights, no download) against the memory roofline."""
    from rocmstack.bench.baseline import DEFAULT_TOLERANCE, compare, load_baseline, update_baseline
    from rocmstack.bench.rollout import DTYPES, RolloutInterrupted, RolloutSpec, memory_phases, run_rollout
    from rocmstack.gpu import memory
    from rocmstack.gpu.shapes import load_config

    engines = _parse_engines(renamed(rollout, engine, "--engine", "--rollout"))
    if batch is not None:
        _parse_batches(batch)  # bad input fails before torch is imported
    if shape is not None:
        load_config(shape)
    resolved = _resolve_device(device)
    shape_name, config, batches, prompt_len, new_tokens = plan(resolved, shape, batch, prompt_len, new_tokens)
    if dtype not in DTYPES:
        raise InputError(
            f"--dtype {dtype!r}: expected one of {', '.join(DTYPES)}", fix="e.g. --dtype bfloat16"
        )
    if not 0.0 < top_p <= 1.0:
        raise InputError(f"--top-p {top_p}: must be in (0, 1]", fix="e.g. --top-p 1.0")
    base = None
    if baseline is not None:
        base = load_baseline(baseline)  # bad files fail before minutes of benchmarking
    for flag, path in (("--output", output), ("--save-baseline", save_baseline)):
        if path is not None:
            check_output_file(path, flag)  # not after the run, when the results would be lost
    spec = RolloutSpec(
        shape_name=shape_name,
        config=config,
        batches=batches,
        prompt_len=prompt_len,
        new_tokens=new_tokens,
        engines=engines,
        device=resolved,
        dtype=dtype,
        temperature=temperature,
        top_p=top_p,
        use_graphs=graphs,
        fused=fused,
        seed=seed,
        weight_sync=weight_sync,
        tokenizer=tokenizer,
        engine_timeout_s=parse_duration(engine_timeout, "--engine-timeout"),
    )
    available, source = memory.available_bytes(resolved)
    memory.check_fits(
        memory_phases(spec),
        available,
        source,
        fix="pass a smaller --batch, --prompt-len/--new-tokens or --shape (or free memory)",
    )
    console = stderr()
    console.print(
        f"bench rollout: {shape_name}, batch {','.join(map(str, batches))}, prompt {prompt_len}, "
        f"{new_tokens} new tokens, {dtype} on {resolved}",
        markup=False,
        highlight=False,
    )
    try:
        if console.is_terminal:
            with console.status("bench rollout") as status:
                report = run_rollout(spec, progress=_status_line(status), tick_s=TICK_S)
        else:  # a log or a pipe: a line per message (tokens throttled), and one at least every 30 s
            with log_lines("bench rollout") as say:
                report = run_rollout(spec, progress=say, tick_s=TICK_S)
    except RolloutInterrupted as stop:
        _keep_interrupted(stop.report, output, json_out)
    if base is not None:
        report["baseline"] = compare(report, base, tolerance=tolerance) | {"file": str(baseline)}
    if save_baseline is not None:
        update_baseline(
            save_baseline, report, tolerance=DEFAULT_TOLERANCE if tolerance is None else tolerance
        )
    if output is not None:
        output.write_text(dumps(report))
    if json_out:
        print_json(report)
    else:
        _render(report)
    for r in report["results"]:
        if r["status"] == Status.ERROR:
            warn(f"{r['engine']} batch {r['batch']}: {r['reason']}")
        if (r.get("extra") or {}).get("fused_fallback"):
            warn(f"{r['engine']} batch {r['batch']}: {r['extra']['fused_fallback']}")
    # Every engine here was named by the user (or is the default): one that could not run is a failure.
    failed_runs = [r for r in report["results"] if r["status"] != Status.PASS]
    if failed_runs:
        r = failed_runs[0]
        raise CheckFailed(
            f"--rollout {r['engine']} could not run ({r['status']}): {r['reason']}",
            fix=f"install {r['engine']} in this environment, or leave it out of --rollout"
            if r["status"] == Status.SKIP
            else "the engine's last log lines are in the --json report (engines[].log_tail)",
        )
    verdict = report.get("baseline")
    if verdict is not None:
        if not verdict["checks"]:
            raise InputError(
                f"--baseline {baseline}: no config of this run has an entry in it",
                fix="run the shapes, batches and lengths the baseline records",
            )
        failed = [c for c in verdict["checks"] if c["status"] != Status.PASS]
        if failed:
            c = failed[0]
            now, then = check_rates(c)
            raise CheckFailed(
                f"rollout regression: {len(failed)} config(s) below baseline; {c['engine']} batch {c['batch']} "
                f"{now:,.1f} decode tok/s = {c['ratio']:.2f}x of {then:,.1f}",
                fix=f"tolerance {verdict['tolerance']:.0%}; check AITER, the attention backend and CPU fallbacks",
            )


def _keep_interrupted(report: dict[str, Any], output: Path | None, json_out: bool) -> NoReturn:
    """Ctrl-C: the rows that finished go where a whole run's would (--output, --json or the table), marked
    interrupted; no baseline is compared or saved from part of a run."""
    if output is not None:
        output.write_text(dumps(report))
    if json_out:
        print_json(report)
    elif report["results"]:
        _render(report)
    where = report["interrupted"]
    kept = f"; {where['rows']} finished row(s)" + (f" in {output}" if output is not None else "")
    raise Interrupted(f"bench interrupted at {where['phase']}{kept} (marked interrupted)")


def plot(
    reports: list[Path] = typer.Argument(..., help="JSON reports written by `bench rollout --output`."),
    output: Path = OUTPUT(..., detail="Here: the PNG to write."),
) -> None:
    """Plot the decode rate and MBU against batch size: each engine vs the roofline."""
    import json

    from rocmstack.bench.plot import plot_reports

    check_output_file(output, "--output")
    loaded = []
    for path in reports:
        try:
            loaded.append(upgrade(json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError) as exc:  # ValueError: bad JSON or bad UTF-8
            raise InputError(
                f"{path}: cannot read a JSON report ({exc})", fix="pass files from --output"
            ) from exc
    plot_reports(loaded, output)
    stdout().print(f"wrote {output}")


def register(app: typer.Typer) -> None:
    bench = typer.Typer(
        help="Benchmarks: the rollout hot path against the memory roofline.", no_args_is_help=True
    )
    bench.command("rollout")(rollout)
    bench.command("plot")(plot)
    app.add_typer(bench, name="bench")
