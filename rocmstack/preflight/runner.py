"""Run the job's own first step, shrunk: make the inputs, rewrite the command line, run it with the job's
environment under a time limit (a server: start it, send one request, stop it), and read its log.

The verdict is the run's: it passes only when the step itself ran (a framework's first step logged and the
command exited 0; a server answered a completion with tokens). A failure names the failing process and its
last error lines.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rocmstack.advisories.match import known_causes
from rocmstack.errors import InputError, printable
from rocmstack.gpu.engine_log import selections, where_it_broke
from rocmstack.gpu.weight_sync import free_port
from rocmstack.gpu.worker_masks import job_env as masked_env
from rocmstack.gpu.worker_masks import judge, read_records
from rocmstack.platform.tools import read_log, run_tool
from rocmstack.preflight.adapters import Adapter, Inputs, Step, choose
from rocmstack.preflight.shrink import LAYERS, read_config, write_shrunk_model
from rocmstack.redact import scrub, secret_values
from rocmstack.signals import stop_group
from rocmstack.smoke.framework_inputs import REWARD_MODULE, REWARD_SOURCE, rows, write_parquet

SCHEMA = "rocmstack.preflight/1"
SERVER_STOP_S = 30.0  # a server's grace after SIGINT to its process group (its engine workers shut down)
LOG_NAME = "step.log"
PROMPT = "copy the number 4711"
# verl's default reward scores this data source by rule; slime/vime get the made reward module instead
DATA_SOURCE = "openai/gsm8k"

Progress = Callable[[str], None]


@dataclass(frozen=True)
class PreflightRequest:
    argv: tuple[str, ...]  # the job's command line, as the lab runs it
    work_dir: Path
    framework: str | None = None  # None: recognised from the command line
    model_config: Path | None = None  # None: the config.json of the model folder the command names
    env: Mapping[str, str] = field(default_factory=dict)  # what the job's environment adds
    timeout_s: float = 300.0
    layers: int = LAYERS
    dry_run: bool = False  # make the inputs and the command, run nothing
    advisories_dirs: tuple[Path, ...] = ()  # a lab's own advisories, matched after the shipped ones


def _model_config(req: PreflightRequest, named: str | None) -> dict[str, Any]:
    if req.model_config is not None:
        return read_config(req.model_config)
    if named and (Path(named) / "config.json").is_file():
        return read_config(Path(named))
    raise InputError(
        f"the job's model {printable(named or '(none named)')} is no local folder with a config.json",
        fix="give the model's config.json with --model-config",
    )


def make_inputs(req: PreflightRequest, adapter: Adapter, config: Mapping[str, Any]) -> tuple[Inputs, Any]:
    work = req.work_dir
    shrunk = write_shrunk_model(config, work / "model", weights=adapter.weights, layers=req.layers)
    train, val = work / "data" / "train.parquet", work / "data" / "val.parquet"
    reward_py = work / f"{REWARD_MODULE}.py"
    if adapter.data:
        data = [dict(r, data_source=DATA_SOURCE) for r in rows(16, "train", 0)]
        write_parquet(train, data)
        write_parquet(val, data[:4])
        reward_py.write_text(REWARD_SOURCE)
    return Inputs(shrunk.directory, train, val, REWARD_MODULE, reward_py, work, port=free_port()), shrunk


def _post(url: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return dict(json.loads(response.read()))


def _get(url: str, timeout: float) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, b""
    except (urllib.error.URLError, OSError):
        return 0, b""


def _ask(engine: str, port: int, timeout: float) -> str:
    """One completion from the served model: the generated text, or ValueError when none came."""
    base = f"http://127.0.0.1:{port}"
    if engine == "sglang":
        answer = _post(
            f"{base}/generate", {"text": PROMPT, "sampling_params": {"max_new_tokens": 8}}, timeout
        )
        text = str(answer.get("text", ""))
        tokens = int((answer.get("meta_info") or {}).get("completion_tokens", len(text)))
    else:
        _, models = _get(f"{base}/v1/models", timeout)
        model = json.loads(models or b"{}").get("data", [{}])[0].get("id", "")
        answer = _post(
            f"{base}/v1/completions",
            {"model": model, "prompt": PROMPT, "max_tokens": 8, "temperature": 0, "ignore_eos": True},
            timeout,
        )
        text = str((answer.get("choices") or [{}])[0].get("text", ""))
        tokens = int((answer.get("usage") or {}).get("completion_tokens", 0))
    if tokens <= 0:
        raise ValueError(f"the server answered with no tokens: {json.dumps(answer)[:200]}")
    return text


def _serve(
    step: Step, engine: str, port: int, env: Mapping[str, str], req: PreflightRequest, log: Path
) -> tuple[dict, str]:
    """How the server's start and one completion went, and its log."""
    t0 = time.monotonic()
    deadline = t0 + req.timeout_s
    with log.open("wb") as out:
        proc = subprocess.Popen(
            list(step.argv), env=dict(env), cwd=req.work_dir, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        ready, answer, problem, timed_out = False, None, None, False
        try:
            while time.monotonic() < deadline and proc.poll() is None:
                if _get(f"http://127.0.0.1:{port}/health", 2.0)[0] == 200:
                    ready = True
                    break
                time.sleep(1.0)
            if ready:
                try:
                    answer = _ask(engine, port, max(deadline - time.monotonic(), 5.0))
                except (ValueError, OSError, urllib.error.URLError, json.JSONDecodeError) as exc:
                    problem = f"the server started but did not answer a completion: {exc}"
            elif proc.poll() is not None:
                problem = f"the server exited ({proc.returncode}) before it was ready"
            else:
                problem = f"the server was not ready within {req.timeout_s:g} s"
                timed_out = True
        finally:
            stop_group(proc, SERVER_STOP_S)
    run = {
        "returncode": proc.returncode,
        "timed_out": timed_out,
        "seconds": round(time.monotonic() - t0, 2),
        "ready": ready,
        "answer": answer,
        "problem": problem,
    }
    return run, read_log(log)


def _framework(step: Step, env: Mapping[str, str], req: PreflightRequest, log: Path) -> tuple[dict, str]:
    """How the step went, and its log (``run_tool`` with a log returns the log as the tool wrote it)."""
    run = run_tool(list(step.argv), timeout=req.timeout_s, env=env, log=log, cwd=req.work_dir)
    text = run.stdout
    stepped = step.done is None or re.search(step.done, text, flags=re.M) is not None
    problem = None
    if run.timed_out:
        problem = f"the step did not finish within {req.timeout_s:g} s"
    elif run.missing or run.error:
        problem = f"the command could not start: {run.reason()}"
    elif run.returncode != 0:
        problem = f"the command exited {run.returncode}"
    elif not stepped:
        problem = "the command exited 0 but its log shows no finished step"
    summary = {
        "returncode": run.returncode,
        "timed_out": run.timed_out,
        "seconds": round(run.seconds, 2),
        "problem": problem,
    }
    return summary, text


def node_gpus(sysfs: Path = Path("/sys"), proc: Path = Path("/proc")) -> tuple[str, int]:
    """(vendor, physical GPUs) of this node, from the kernel's own lists: KFD's GPU nodes (AMD), the NVIDIA
    driver's per-GPU folders; ("none", 0) on a node without either."""
    nodes = sysfs / "class/kfd/kfd/topology/nodes"
    amd = [n for n in nodes.glob("*/properties") if "simd_count 0" not in n.read_text(errors="replace")]
    if nodes.is_dir() and amd:
        return "amd", len(amd)
    nvidia = list((proc / "driver/nvidia/gpus").glob("*"))
    return ("nvidia", len(nvidia)) if nvidia else ("none", 0)


def _workers(masks_dir: Path, step: Step, env: Mapping[str, str]) -> dict[str, Any]:
    """Every Python process of the step, as it recorded itself, judged against what the job was given."""
    found = read_records(masks_dir)
    vendor, physical = node_gpus()
    rows = [
        {"pid": r.pid, "worker": r.name, "masks": {k: v for k, v in r.env.items() if k.endswith("VISIBLE_DEVICES")},
         "torch": r.torch}
        for r in found.records
    ]  # fmt: skip
    out: dict[str, Any] = {
        "recorded": len(found.records),
        "unreadable": list(found.unreadable),
        "processes": rows,
    }
    if vendor == "none":
        out.update(judged=0, mismatches=[], note="no GPU on this node: the masks are recorded, not judged")
        return out
    verdict = judge(
        found.records, vendor=vendor, allocation=min(step.gpus, physical) or physical, physical=physical,
        job_env=env,
    )  # fmt: skip
    out.update(judged=verdict.judged, mismatches=list(verdict.lines))
    return out


def run_preflight(req: PreflightRequest, progress: Progress = lambda _m: None) -> dict[str, Any]:
    """The report (a dict, schema rocmstack.preflight/1); raises InputError for bad input, before any work."""
    adapter = choose(req.argv, req.framework)
    config = _model_config(req, adapter.model_of(req.argv))
    req.work_dir.mkdir(parents=True, exist_ok=True)
    progress(f"{adapter.name}: writing a {req.layers}-layer model of the job's architecture")
    t0 = time.monotonic()
    inputs, shrunk = make_inputs(req, adapter, config)
    step = adapter.rewrite(req.argv, inputs)
    masks_dir = req.work_dir / "masks"
    if masks_dir.is_dir():  # a new run's records only
        for old in masks_dir.iterdir():
            old.unlink()
    # every Python process of the step records its masks and devices (rocmstack.gpu.worker_masks)
    base = {**os.environ, **req.env}
    applied = {k: v for k, v in step.defaults.items() if k not in base}
    env = masked_env(masks_dir, {**applied, **base, **step.env})
    secrets = secret_values(env)
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "framework": adapter.name,
        "work_dir": str(req.work_dir),
        "argv": list(req.argv),
        "step_argv": list(step.argv),
        "changed": [*step.changed, *(f"{k}: (unset) -> {v}" for k, v in applied.items())],
        "gpus_per_node": step.gpus,
        "parallel": dict(step.parallel),
        "env_given": sorted(req.env),
        "model": {
            "directory": str(shrunk.directory),
            "layers_before": shrunk.layers_before,
            "changed": list(shrunk.changed),
            "weights": shrunk.weights,
            "architectures": shrunk.config.get("architectures"),
        },
        "inputs_s": round(time.monotonic() - t0, 2),
    }
    if req.dry_run:
        report.update(passed=None, verdict="NOT RUN (--dry-run)")
        return dict(scrub(report, secrets))
    log = req.work_dir / LOG_NAME
    progress(f"running {adapter.name}'s own launcher for one step (log {log})")
    run, text = (
        _serve(step, adapter.name, inputs.port, env, req, log)
        if step.kind == "server"
        else _framework(step, env, req, log)
    )
    found = selections(text)
    broke = where_it_broke(text) if run["problem"] else None
    workers = _workers(masks_dir, step, {**os.environ, **req.env})
    problem = run["problem"] or (
        f"{len(workers['mismatches'])} worker(s) with the wrong GPUs: {workers['mismatches'][0]}"
        if workers["mismatches"]
        else None
    )
    passed = problem is None
    if run["problem"] and broke is not None and broke.cause:
        problem = f"{problem}; {broke.process}: {broke.cause}"
    elif run["timed_out"] and broke is not None and broke.lines:
        problem = f"{problem}; last: {broke.lines[-1][:200]}"
    # the field's error signatures over the whole log: a known cause and its fix, where one is known
    report.update(
        known_causes=known_causes(text, req.advisories_dirs) if not passed else [],
        passed=passed,
        verdict="PASSED" if passed else f"FAILED: {problem}",
        workers=workers,
        run=run,
        log=str(log),
        selections=[asdict(s) for s in found],
        failure=None if broke is None else asdict(broke),
    )
    return dict(scrub(report, secrets))
