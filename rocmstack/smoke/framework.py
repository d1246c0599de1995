"""``rocmstack smoke framework``: the image's RL framework runs its own short loop, judged from its logs.

The recipe declares the command, where the framework's metrics land and the judgments
(rocmstack.recipe.model.FrameworkSmoke): a new framework is data, not code. rocmstack makes the inputs
(framework_inputs), runs the command in its own process group under the time limit with its output
streamed to ``framework.log``, parses the metrics and judges them with the smoke verdict's criteria.

The command is code from the recipe: outside a rocmstack image it runs only when the caller opts in
(``--allow-recipe-command``), and always with a minimal environment (``command_env``), never the caller's secrets.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rocmstack.advisories.match import known_causes
from rocmstack.contract import LOCK_PATH
from rocmstack.errors import InputError, printable
from rocmstack.gpu.engine_log import where_it_broke
from rocmstack.output import dumps, print_table, stdout, warn
from rocmstack.platform.tools import run_tool
from rocmstack.recipe.load import load_recipe
from rocmstack.recipe.model import FrameworkSmoke, MetricsSource
from rocmstack.redact import redact_url
from rocmstack.secrets import is_secret_name
from rocmstack.smoke import verdict
from rocmstack.smoke.framework_inputs import make_inputs
from rocmstack.smoke.report import FrameworkSummary, criteria_table

LOG_NAME = "framework.log"
ALLOW_FLAG = "--allow-recipe-command"
# What a recipe's command gets of the caller's environment, by name: the basics a process needs, the device
# runtime's masks, paths and tuning (ROCm/HIP/HSA, CUDA, RCCL/NCCL, MIOpen, AITER, the arch lists), the
# engines' own settings (torch, vLLM, SGLang, Triton: an image's ENV sets them there) and Ray's switches that
# leave the device masks to the framework. No other RAY_* (RAY_ADDRESS would join another cluster), no HF_*,
# no PYTHONPATH; the declaration's pass_env adds names. A secret's name never passes, even when listed.
BASE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "LD_LIBRARY_PATH")
DEVICE_ENV_PREFIXES = (
    "LC_",
    "HIP_",
    "ROCR_",
    "HSA_",
    "ROCM_",
    "CUDA_",
    "GPU_",
    "AMDGPU_",
    "NCCL_",
    "RCCL_",
    "MIOPEN_",
    "AITER_",
    "PYTORCH_",
    "TORCH_",
    "TRITON_",
    "VLLM_",
    "SGLANG_",
    "RAY_EXPERIMENTAL_NOSET_",
)
MAX_LINE = 1 << 20  # a longer log line is no metric line a framework writes: left out, with a warning
MAX_STEP = 10**12  # a larger "step" is a garbled line, not a step of a smoke
_WRAP_DEPTH = 4  # np.float64(...), tensor(...): a deeper nesting is no logged scalar
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
    for _ in range(_WRAP_DEPTH):
        if (m := _WRAPPED.match(s)) is None:
            break
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
        try:
            return float(value)
        except OverflowError:  # an int too big for a float: kept, and non-finite to the verdict
            return math.inf if value > 0 else -math.inf
    if isinstance(value, str):
        return number(value)
    return None


@dataclass(frozen=True)
class Metrics:
    rows: list[dict[str, Any]]
    skipped: tuple[str, ...] = ()  # per metric line left out: where and why


def whole_step(value: Any) -> int | None:
    """A logged step as an int: a whole number from 0 to MAX_STEP (``3``, ``3.0``, ``"3"``), else None."""
    if isinstance(value, str):
        text = value.strip()
        if not 0 < len(text) <= len(str(MAX_STEP)):  # int() of thousands of digits raises
            return None
        try:
            value = int(text)
        except ValueError:
            return None
    if isinstance(value, float):
        if not value.is_integer():  # also nan and the infinities
            return None
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= MAX_STEP else None


def _step_problem(n: int, raw: Any) -> str:
    return f"line {n}: step {printable(str(raw))[:40]} is not a whole number from 0 to {MAX_STEP}"


def _lines(text: str, skipped: list[str]) -> list[tuple[int, str]]:
    """Numbered lines; one over MAX_LINE is left out (and said), so no parser sees it."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if len(line) > MAX_LINE:
            skipped.append(f"line {n}: longer than {MAX_LINE} characters")
        else:
            out.append((n, line))
    return out


def _kv_console(text: str) -> Metrics:
    """verl's console lines, one row per step (a step logged twice is merged)."""
    skipped: list[str] = []
    by_step: dict[int, dict[str, Any]] = {}
    for n, line in _lines(text, skipped):
        m = _KV_LINE.search(line.rstrip())
        if m is None:
            continue
        if (step := whole_step(m.group(1))) is None:
            skipped.append(_step_problem(n, m.group(1)))
            continue
        row = by_step.setdefault(step, {"step": step})
        for part in m.group(2).split(" - ")[1:]:
            key, sep, value = part.rpartition(":")
            key = key.strip()
            parsed = number(value)
            if sep and key and key != "step" and parsed is not None:  # the row's step is the line's
                row[key] = parsed
    return Metrics([by_step[k] for k in sorted(by_step)], tuple(skipped))


def parse_kv_console(text: str) -> list[dict[str, Any]]:
    return _kv_console(text).rows


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
    objects: list[tuple[int, int | None, dict[str, Any]]], source: MetricsSource, skipped: list[str]
) -> list[dict[str, Any]]:
    """One row per step; a step logged by several lines (say, trainer and rollout) is merged."""
    rows: list[dict[str, Any]] = []
    by_step: dict[int, dict[str, Any]] = {}
    for n, line_step, obj in objects:
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
            if (step := whole_step(row[source.step_key])) is None:
                skipped.append(_step_problem(n, row[source.step_key]))
                continue
        if step is not None:
            row.pop("step", None)  # a logged "step" value never replaces the row's step
        if step is None:
            row["step"] = len(rows) + 1
            rows.append(row)
        elif step in by_step:
            by_step[step].update(row)
        else:
            by_step[step] = {**row, "step": step}
            rows.append(by_step[step])
    return sorted(rows, key=lambda r: r["step"]) if by_step else rows


def _objects(
    text: str, source: MetricsSource, skipped: list[str]
) -> list[tuple[int, int | None, dict[str, Any]]]:
    prefix = re.compile(source.prefix) if source.prefix is not None else None
    out: list[tuple[int, int | None, dict[str, Any]]] = []
    for n, line in _lines(text, skipped):
        step: int | None = None
        s = line.strip()
        if prefix is not None:
            m = prefix.search(line)
            if m is None:
                continue
            s = line[m.end() :].strip()
            if prefix.groups and (step := whole_step(m.group(1) or "")) is None:
                skipped.append(_step_problem(n, m.group(1)))
                continue
        if not s.startswith("{") or not s.endswith("}"):
            continue
        try:
            obj = json.loads(s) if source.format == "jsonl" else literal(s)
        # TypeError: a literal dict with an unhashable key ({[1]: 2}); the rest: not a literal, or too deep.
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            continue
        if isinstance(obj, dict):
            out.append((n, step, obj))
    return out


def read_metrics(text: str, source: MetricsSource) -> Metrics:
    """Per-step rows ``{"step": N, metric: float, ...}`` from a framework's log, in the declared format, and
    the metric lines left out. A value too big for a float, nan or inf is kept (the checks judge it); a line
    whose step is no whole number >= 0, or that is too long to be a metric line, is left out and said."""
    if source.format == "kv-console":
        return _kv_console(text)
    skipped: list[str] = []
    rows = _rows_from_objects(_objects(text, source, skipped), source, skipped)
    return Metrics(rows, tuple(skipped))


def parse_metrics(text: str, source: MetricsSource) -> list[dict[str, Any]]:
    return read_metrics(text, source).rows


def skipped_warning(skipped: Sequence[str], count: int) -> str | None:
    """One line for all ``count`` metric lines left out (``skipped``: the first reasons); None for none."""
    if not skipped or count < 1:
        return None
    more = f"; and {count - 1} more" if count > 1 else ""
    return f"{count} metric line(s) left out of the verdict: {skipped[0]}{more}"


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


def in_image() -> bool:
    """This node is a rocmstack image: it carries the image contract's lock.json."""
    return Path(LOCK_PATH).is_file()


def check_recipe_command(recipe: str, *, allowed: bool, inside_image: bool) -> None:
    """A recipe's command is code: outside a rocmstack image it runs only when the caller said so
    (``--allow-recipe-command``, on ``smoke framework`` and ``validate --in-place``); one InputError line else."""
    if allowed or inside_image:
        return
    raise InputError(
        f"recipe {printable(recipe)}: its framework_smoke command is code from the recipe, and this node is "
        f"no rocmstack image (no {LOCK_PATH})",
        fix=f"run it inside the image, or pass {ALLOW_FLAG} to run it here (with a minimal environment, "
        "docs/security.md)",
    )


def _passed(name: str) -> bool:
    return name in BASE_ENV or name.startswith(DEVICE_ENV_PREFIXES)


def command_env(
    decl: FrameworkSmoke, values: Mapping[str, str], environ: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """The command's whole environment: the caller's variables named by BASE_ENV, DEVICE_ENV_PREFIXES and the
    declaration's ``pass_env``, then its ``env``. A secret's name (rocmstack.secrets) never passes, nor a
    value holding a URL's user information (``https://user:token@host``)."""

    wanted = set(decl.pass_env)
    env = {
        k: v
        for k, v in environ.items()
        if (_passed(k) or k in wanted) and not is_secret_name(k) and redact_url(v) == v
    }
    env.update({k: fill(v, values) for k, v in decl.env.items() if not is_secret_name(k)})
    return env


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
    env = command_env(decl, values)
    log = work_dir / LOG_NAME
    run = run_tool(argv, timeout=limit, env=env, log=log, cwd=work_dir)
    text = run.stdout
    if decl.metrics.file is not None:
        metrics_file = Path(fill(decl.metrics.file, values))
        if not metrics_file.is_absolute():
            metrics_file = work_dir / metrics_file
        text = metrics_file.read_text(errors="replace") if metrics_file.is_file() else ""
    metrics = read_metrics(text, decl.metrics)
    rows = metrics.rows
    criteria = judge(
        decl.model_copy(update={"timeout_s": int(limit)}) if timeout_s is not None else decl,
        rows,
        returncode=run.returncode,
        timed_out=run.timed_out,
        seconds=run.seconds,
    )
    _, failed = verdict.verdict_of(criteria)
    # only a run that ended badly: a traceback a passing launcher printed on its way out (verl's DataLoader
    # worker at shutdown) is not why a metric failed
    broke = where_it_broke(run.stdout) if run.returncode != 0 or run.timed_out else None
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
        "skipped_lines": list(metrics.skipped[:20]),
        "skipped_count": len(metrics.skipped),
        "criteria": verdict.as_dicts(criteria),
        "failed": failed,
        "passed": not failed,
        "log_tail": [] if not failed else _tail(run.stdout),
        # the process that broke first and its own exception, read off the whole log (whatever the cause)
        "failure": None if broke is None else {**asdict(broke), "cause": broke.cause},
        # the field's error signatures over the framework's whole log: a known cause and its fix
        "known_causes": known_causes(run.stdout) if failed else [],
    }
    summary = FrameworkSummary.produce(summary).wire()
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

    recipe, path = load_recipe(recipe_name, overrides)
    if recipe.framework_smoke is None:
        raise InputError(
            f"{printable(path)}: framework_smoke: the recipe declares no framework smoke",
            fix="add a framework_smoke section (docs/recipes.md) or pick a recipe that has one",
        )
    return recipe.framework_smoke, recipe.name


def work_folder(given: Path | None, recipe: str) -> Path:
    """``--output`` (refused when it is a file, before anything runs) or a new temporary folder."""
    if given is None:
        import tempfile

        return Path(tempfile.mkdtemp(prefix=f"rocmstack-framework-{recipe}-"))
    if given.exists() and not given.is_dir():
        raise InputError(f"--output: {printable(given)} is a file", fix="give a folder (it is created)")
    return given


def run_command(
    recipe_name: str,
    overrides: list[str],
    report: Path | None,
    *,
    steps: int | None = None,
    timeout_s: float | None = None,
    allow_command: bool = False,
    progress: Callable[[str], None] = lambda _msg: None,
) -> dict[str, Any]:
    """``smoke framework``: read the declaration and the permission to run it (bad input stops here, exit 2),
    run it, judge it."""
    decl, name = declaration(recipe_name, overrides)
    check_recipe_command(name, allowed=allow_command, inside_image=in_image())
    work_dir = work_folder(report, name)
    progress(f"{decl.framework}: {decl.steps if steps is None else steps} step(s), log {work_dir / LOG_NAME}")
    summary = run_framework_smoke(decl, work_dir, recipe=name, steps=steps, timeout_s=timeout_s)
    if (why := skipped_warning(summary["skipped_lines"], summary["skipped_count"])) is not None:
        warn(why)
    return summary


def print_summary(summary: dict[str, Any]) -> None:
    console = stdout()
    console.print(
        f"{summary['framework']} ({summary['recipe']}): {summary['steps_seen']}/{summary['steps']} steps logged, "
        f"run {summary['run_s']:.1f} s (inputs {summary['inputs_s']:.1f} s), log {summary['log']}"
    )
    print_table(criteria_table(summary), console)
    broke = summary.get("failure")
    if broke and broke.get("cause"):
        console.print(f"broke first: {broke['process']}: {broke['cause']}", markup=False, highlight=False)
    elif broke and broke.get("lines"):
        console.print(f"broke first: {broke['process']}: {broke['lines'][-1]}", markup=False, highlight=False)
    for known in summary.get("known_causes", []):
        console.print(f"known cause {known['id']}: {known['title']}; fix: {known['fix']}", markup=False)
    if not summary["passed"] and summary["log_tail"]:
        console.print("last lines of the log:", markup=False)
        for line in summary["log_tail"][-10:]:
            console.print("  " + line, markup=False, highlight=False)
    verdict_line = (
        "[green]PASS[/green]" if summary["passed"] else "[red]FAIL[/red]: " + ", ".join(summary["failed"])
    )
    console.print(f"verdict: {verdict_line}")
