"""``rocmstack smoke framework``: the image's RL framework runs its own short loop, judged from its logs.

The recipe declares the command, where the framework's metrics land and the judgments
(rocmstack.recipe.model.FrameworkSmoke): a new framework is data, not code. rocmstack makes the inputs
(framework_inputs), runs the command in its own process group under the time limit with its output
streamed to ``framework.log``, parses the metrics and judges them with the smoke verdict's criteria.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rocmstack.errors import InputError, printable
from rocmstack.output import dumps
from rocmstack.recipe.model import FrameworkSmoke, MetricsSource
from rocmstack.smoke import verdict

LOG_NAME = "framework.log"
# verl's console logger (verl/utils/logger/aggregate_logger.py, concat_dict_to_str): "step:N - k:v - k:v";
# the line may come through Ray's log forwarding with a "(TaskRunner pid=...)" prefix.
_KV_LINE = re.compile(r"(?:^|\s)step:(\d+)((?: - [^\n]*)?)$")
# pprint of a numpy scalar under numpy 2 is "np.float64(0.5)"; a tensor's "tensor(0.5)".
_WRAPPED = re.compile(r"^[A-Za-z_][\w.]*\((.*)\)$")


def fill(arg: str, values: Mapping[str, str]) -> str:
    """``{name}`` replaced by its value (the names were checked when the recipe was read)."""
    return re.sub(r"\{([^{}]*)\}", lambda m: values[m.group(1)], arg)


def placeholders(work_dir: Path, inputs: Any, steps: int, python: str = sys.executable) -> dict[str, str]:
    return {
        "python": python,
        "model_dir": str(inputs.model_dir),
        "tokenizer_dir": str(inputs.tokenizer_dir),
        "train_parquet": str(inputs.train_parquet),
        "val_parquet": str(inputs.val_parquet),
        "data_dir": str(inputs.train_parquet.parent),
        "reward_py": str(inputs.reward_py),
        "reward_module": inputs.reward_py.stem,
        "reward_fn": "compute_score",
        "steps": str(steps),
        "work_dir": str(work_dir),
        "vocab_size": str(inputs.vocab_size),
    }


def number(text: str) -> float | None:
    """A logged value as a float: ``0.5``, ``'0.5'``, ``nan``, ``-inf``, ``True``, ``np.float64(0.5)``."""
    s = text.strip().strip("'\"")
    while (m := _WRAPPED.match(s)) is not None:
        s = m.group(1).split(",")[0].strip()
    if s in ("True", "False"):
        return float(s == "True")
    try:
        return float(s)
    except ValueError:
        return None


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        return number(value)
    return None


def parse_kv_console(text: str) -> list[dict[str, Any]]:
    """verl's console lines, one row per step (a step logged twice is merged)."""
    by_step: dict[int, dict[str, Any]] = {}
    for line in text.splitlines():
        m = _KV_LINE.search(line.rstrip())
        if m is None:
            continue
        row = by_step.setdefault(int(m.group(1)), {"step": int(m.group(1))})
        for part in m.group(2).split(" - ")[1:]:
            key, sep, value = part.rpartition(":")
            parsed = number(value)
            if sep and key and parsed is not None:
                row[key.strip()] = parsed
    return [by_step[k] for k in sorted(by_step)]


class _NonFinite(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Constant(float(node.id)) if node.id in ("nan", "inf") else node


def literal(text: str) -> Any:
    """A Python literal as ``repr`` prints it, ``nan`` and ``inf`` included (a dict of floats prints
    ``{'loss': nan}``, which ``ast.literal_eval`` alone refuses)."""
    try:
        return ast.literal_eval(text)
    except ValueError:
        return ast.literal_eval(_NonFinite().visit(ast.parse(text, mode="eval")))


def _rows_from_objects(
    objects: list[tuple[int | None, dict[str, Any]]], source: MetricsSource
) -> list[dict[str, Any]]:
    """One row per step; a step logged by several lines (say, trainer and rollout) is merged."""
    rows: list[dict[str, Any]] = []
    by_step: dict[int, dict[str, Any]] = {}
    for line_step, obj in objects:
        if source.row_key is not None and source.row_key not in obj:
            continue
        row: dict[str, Any] = {}
        for key, value in obj.items():
            if (parsed := _as_float(value)) is not None:
                row[str(key)] = parsed
        step = line_step
        if step is None and source.step_key is not None:
            if source.step_key not in row:
                continue
            step = int(row[source.step_key])
        if step is None:
            row["step"] = len(rows) + 1
            rows.append(row)
        elif step in by_step:
            by_step[step].update(row)
        else:
            by_step[step] = {**row, "step": step}
            rows.append(by_step[step])
    return sorted(rows, key=lambda r: r["step"]) if by_step else rows


def _objects(text: str, source: MetricsSource) -> list[tuple[int | None, dict[str, Any]]]:
    prefix = re.compile(source.prefix) if source.prefix is not None else None
    out: list[tuple[int | None, dict[str, Any]]] = []
    for line in text.splitlines():
        step: int | None = None
        s = line.strip()
        if prefix is not None:
            m = prefix.search(line)
            if m is None:
                continue
            s = line[m.end() :].strip()
            if prefix.groups:
                try:
                    step = int(m.group(1))
                except (TypeError, ValueError):
                    continue
        if not s.startswith("{") or not s.endswith("}"):
            continue
        try:
            obj = json.loads(s) if source.format == "jsonl" else literal(s)
        except (ValueError, SyntaxError, RecursionError, MemoryError):
            continue
        if isinstance(obj, dict):
            out.append((step, obj))
    return out


def parse_metrics(text: str, source: MetricsSource) -> list[dict[str, Any]]:
    """Per-step rows ``{"step": N, metric: float, ...}`` from a framework's log, in the declared format."""
    if source.format == "kv-console":
        return parse_kv_console(text)
    return _rows_from_objects(_objects(text, source), source)


def judge(
    decl: FrameworkSmoke,
    rows: list[dict[str, Any]],
    *,
    returncode: int | None,
    timed_out: bool,
    seconds: float,
) -> list[verdict.Criterion]:
    """The declared judgments plus a clean exit and every step seen, as the smoke verdict's criteria."""
    out = [
        verdict.exit_clean(returncode, timed_out=timed_out, seconds=seconds, limit=decl.timeout_s),
        verdict.steps_seen([r["step"] for r in rows], decl.steps),
    ]
    out += [verdict.metric_check(rows, c.metric, c.op, c.value, c.at) for c in decl.checks]
    return out


def _tail(text: str, lines: int = 20) -> list[str]:
    return [printable(ln)[:400] for ln in text.splitlines()[-lines:]]


def run_framework_smoke(
    decl: FrameworkSmoke,
    work_dir: Path,
    *,
    recipe: str,
    steps: int | None = None,
    timeout_s: float | None = None,
    python: str = sys.executable,
) -> dict[str, Any]:
    """Make the inputs under ``work_dir``, run the framework, judge it; the summary dict."""
    from rocmstack.platform.tools import run_tool
    from rocmstack.smoke.framework_inputs import make_inputs

    if steps is not None:
        decl = decl.model_copy(update={"steps": steps})
    limit = float(timeout_s if timeout_s is not None else decl.timeout_s)
    work_dir = work_dir.resolve()
    work_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    inputs = make_inputs(work_dir, train_rows=decl.train_rows, val_rows=decl.val_rows)
    inputs_s = time.monotonic() - t0
    values = placeholders(work_dir, inputs, decl.steps, python)
    argv = [fill(a, values) for a in decl.command]
    env = {**os.environ, **{k: fill(v, values) for k, v in decl.env.items()}}
    log = work_dir / LOG_NAME
    run = run_tool(argv, timeout=limit, env=env, log=log, cwd=work_dir)
    text = run.stdout
    if decl.metrics.file is not None:
        metrics_file = Path(fill(decl.metrics.file, values))
        if not metrics_file.is_absolute():
            metrics_file = work_dir / metrics_file
        text = metrics_file.read_text(errors="replace") if metrics_file.is_file() else ""
    rows = parse_metrics(text, decl.metrics)
    criteria = judge(
        decl.model_copy(update={"timeout_s": int(limit)}) if timeout_s is not None else decl,
        rows,
        returncode=run.returncode,
        timed_out=run.timed_out,
        seconds=run.seconds,
    )
    _, failed = verdict.verdict_of(criteria)
    with (work_dir / "metrics.jsonl").open("w") as fh:
        for row in rows:
            fh.write(json.dumps(row, sort_keys=True) + "\n")
    summary: dict[str, Any] = {
        "kind": "framework",
        "recipe": recipe,
        "framework": decl.framework,
        "steps": decl.steps,
        "steps_seen": len(rows),
        "argv": argv,
        "work_dir": str(work_dir),
        "log": str(log),
        "returncode": run.returncode,
        "timed_out": run.timed_out,
        "error": run.error or ("command not found" if run.missing else None),
        "timeout_s": limit,
        "inputs_s": round(inputs_s, 2),
        "run_s": round(run.seconds, 2),
        "metrics": rows,
        "criteria": verdict.as_dicts(criteria),
        "failed": failed,
        "passed": not failed,
        "log_tail": [] if not failed else _tail(run.stdout),
    }
    (work_dir / "summary.json").write_text(dumps(json_safe(summary)))
    return summary


def json_safe(value: Any) -> Any:
    """NaN and infinities as strings: JSON has no literal for them."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def declaration(recipe_name: str, overrides: list[str]) -> tuple[FrameworkSmoke, str]:
    """The recipe's framework smoke, or one InputError line saying it has none."""
    from rocmstack.recipe.load import load_recipe

    recipe, path = load_recipe(recipe_name, overrides)
    if recipe.framework_smoke is None:
        raise InputError(
            f"{printable(path)}: framework_smoke: the recipe declares no framework smoke",
            fix="add a framework_smoke section (docs/recipes.md) or pick a recipe that has one",
        )
    return recipe.framework_smoke, recipe.name


def work_folder(given: Path | None, recipe: str) -> Path:
    """``--report`` (refused when it is a file, before anything runs) or a new temporary folder."""
    if given is None:
        import tempfile

        return Path(tempfile.mkdtemp(prefix=f"rocmstack-framework-{recipe}-"))
    if given.exists() and not given.is_dir():
        raise InputError(f"--report: {printable(given)} is a file", fix="give a folder (it is created)")
    return given


def run_command(
    recipe_name: str,
    overrides: list[str],
    report: Path | None,
    *,
    steps: int | None = None,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """``smoke framework``: read the declaration (bad input stops here, exit 2), run it, judge it."""
    decl, name = declaration(recipe_name, overrides)
    work_dir = work_folder(report, name)
    from rocmstack.output import stderr

    stderr().print(
        f"[bold]framework[/bold] {decl.framework}: {decl.steps if steps is None else steps} "
        f"step(s), log {work_dir / LOG_NAME}"
    )
    return run_framework_smoke(decl, work_dir, recipe=name, steps=steps, timeout_s=timeout_s)


def print_summary(summary: dict[str, Any]) -> None:
    from rich.table import Table

    from rocmstack.output import print_table, stdout

    console = stdout()
    console.print(
        f"{summary['framework']} ({summary['recipe']}): {summary['steps_seen']}/{summary['steps']} steps logged, "
        f"run {summary['run_s']:.1f} s (inputs {summary['inputs_s']:.1f} s), log {summary['log']}"
    )
    table = Table(show_header=True, header_style="bold")
    table.add_column("criterion", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("detail", overflow="fold")
    for c in summary["criteria"]:
        table.add_row(c["name"], "[green]PASS[/green]" if c["passed"] else "[red]FAIL[/red]", c["detail"])
    print_table(table, console)
    if not summary["passed"] and summary["log_tail"]:
        console.print("last lines of the log:", markup=False)
        for line in summary["log_tail"][-10:]:
            console.print("  " + line, markup=False, highlight=False)
    verdict_line = (
        "[green]PASS[/green]" if summary["passed"] else "[red]FAIL[/red]: " + ", ".join(summary["failed"])
    )
    console.print(f"verdict: {verdict_line}")
