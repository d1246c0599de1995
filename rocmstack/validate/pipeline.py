"""``rocmstack validate --in-place``: doctor -> GRPO smoke -> rollout bench on this node, one report dict.

Each stage runs through its owner's in-process API (``run_doctor``, ``run_grpo_smoke``, ``run_rollout``).
A stage that crashes is recorded as ``error`` and the next stage still runs, so one report shows every
finding. The report passes only when every stage that ran passed.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocmstack import __version__
from rocmstack.advisories.match import known_causes
from rocmstack.bench.baseline import compare, load_baseline
from rocmstack.bench.plot import plot_reports
from rocmstack.bench.report import HEADLINE, check_rates
from rocmstack.bench.rollout import RolloutSpec, memory_phases, run_rollout
from rocmstack.contract import image_root
from rocmstack.doctor import options as doctor_options
from rocmstack.doctor import run_doctor, select_checks
from rocmstack.doctor.bars import load_bars
from rocmstack.errors import InputError, Interrupted, RocmstackError, printable, quoted
from rocmstack.gpu import memory
from rocmstack.gpu.rollout import CATALOGUE
from rocmstack.gpu.shapes import load_config
from rocmstack.host import host_info
from rocmstack.output import check_output_dir, dumps, quiet
from rocmstack.recipe.load import find_recipe, load_recipe
from rocmstack.recipe.model import FRAMEWORK_SMOKE_FILE, FrameworkSmoke
from rocmstack.smoke import SmokeOptions, run_grpo_smoke
from rocmstack.smoke.config import DEVICES  # the smoke's, which validate runs
from rocmstack.smoke.framework import check_recipe_command, in_image, run_framework_smoke
from rocmstack.smoke.verdict import settings_warning
from rocmstack.validate.aiter import first_calls, judge, read_manifest
from rocmstack.validate.schema import (
    BENCH_DIR,
    BENCH_JSON,
    ERROR,
    FAIL,
    FRAMEWORK_DIR,
    PASS,
    REPORT_HTML,
    REPORT_JSON,
    REPORT_MD,
    ROOFLINE_PNG,
    SBOM_FILE,
    SCHEMA,
    SKIP,
    SMOKE_DIR,
    STAGE,
    WARN,
    ValidateReport,
    device_archs,
    single_arch,
    stage,
    verdict,
)

if TYPE_CHECKING:
    from rocmstack.bench.rollout import RolloutSpec
    from rocmstack.doctor.bars import Bars
    from rocmstack.recipe.model import FrameworkSmoke

MAX_DECLARATION_BYTES = 1 << 20  # an image's framework-smoke.json is read up to this much


# The bench's settings per device. GPU: a real model shape (Qwen3-0.6B, random weights) at the rollout
# batch sizes that matter; CPU: a small Qwen3 shape that proves the engine runs in seconds.
@dataclass(frozen=True)
class BenchPreset:
    shape: str
    batches: tuple[int, ...]
    prompt_len: int
    new_tokens: int
    dtype: str


GPU_BENCH = BenchPreset("qwen3-0.6b", (1, 64), prompt_len=128, new_tokens=128, dtype="bfloat16")
CPU_BENCH_CONFIG = {
    "model_type": "qwen3",
    "vocab_size": 512,
    "hidden_size": 256,
    "intermediate_size": 768,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 32,
    "hidden_act": "silu",
    "max_position_embeddings": 1024,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000,
    "tie_word_embeddings": False,
    "attention_bias": False,
}
CPU_BENCH = BenchPreset("qwen3-cpu-check", (1, 4), prompt_len=16, new_tokens=16, dtype="float32")

Progress = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class ValidateOptions:
    report_dir: Path
    expect_gpus: int | None = None
    skip_smoke: bool = False
    skip_bench: bool = False
    baseline: Path | None = None
    device: str = "auto"
    smoke_steps: int | None = None
    doctor_skip: tuple[str, ...] = ()  # doctor check ids left out (recorded in the doctor's report)
    image_root: Path | None = None  # default: $ROCMSTACK_ROOT or /opt/rocmstack
    skip_framework: bool = False
    recipe: str | None = None  # whose framework_smoke runs; default: the image's lock.json names it
    allow_recipe_command: bool = False  # --recipe's command may run on a node that is no rocmstack image

    def validated(self) -> ValidateOptions:
        if self.device not in DEVICES:
            raise InputError(
                f"--device {self.device!r} is not one of {', '.join(DEVICES)}",
                fix="auto uses the GPU when torch sees one; cuda requires one; cpu forces the CPU",
            )

        # the doctor stage's options pass the doctor's own checks, before any stage runs
        doctor_options.validated(
            expect_gpus=self.expect_gpus, skip=self.doctor_skip, image_root=self.image_root
        )
        if self.smoke_steps is not None and self.smoke_steps < 1:
            raise InputError(f"--steps {self.smoke_steps} must be >= 1", fix="e.g. --steps 30")
        if self.doctor_skip:
            select_checks((), self.doctor_skip)  # InputError naming an unknown id, before any work
        if self.recipe is not None:
            find_recipe(self.recipe)  # an unknown name is one line, before any stage runs
            if not self.skip_framework:
                recipe = load_recipe(self.recipe)[0]
                if recipe.framework_smoke is not None:  # refused before any stage runs, not after the bench
                    check_recipe_command(
                        recipe.name, allowed=self.allow_recipe_command, inside_image=in_image()
                    )
        check_output_dir(self.report_dir, "--output")
        if self.baseline is not None and not self.baseline.is_file():
            raise InputError(
                f"--baseline {self.baseline}: no such file",
                fix="pass a file written by `rocmstack bench rollout --save-baseline`",
            )
        return self

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["doctor_skip"] = list(self.doctor_skip)
        for key in ("report_dir", "baseline", "image_root"):
            out[key] = str(out[key]) if out[key] is not None else None
        return out

    def root(self) -> Path:
        return self.image_root or image_root(os.environ)


def prepare_report_dir(directory: Path) -> None:
    """Make DIR hold only this run's results: remove what an earlier validate wrote there (its report
    files and stage folders), and refuse a non-empty folder that is not a validate report."""
    if not directory.is_dir():
        return
    ours = (REPORT_JSON, REPORT_MD, REPORT_HTML, SMOKE_DIR, BENCH_DIR, FRAMEWORK_DIR, STAGE, SBOM_FILE)
    present = [directory / name for name in ours if (directory / name).exists()]
    if not (directory / REPORT_JSON).is_file() and any(directory.iterdir()):
        raise InputError(
            f"--output {quoted(directory)}: a folder that holds no earlier validate report is not empty",
            fix="pass a new or empty folder, or one an earlier `rocmstack validate` wrote",
        )
    for path in present:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def _crash(name: str, exc: BaseException, t0: float) -> dict[str, Any]:
    """A stage that raised: keep the one-line reason (and the last frames, for a bug) in the report."""
    if isinstance(exc, RocmstackError):
        return stage(name, ERROR, time.monotonic() - t0, exc.one_line())
    frames = traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:]
    # A worker's error comes wrapped (Ray's ActorDiedError carries the remote traceback): its last line is
    # the cause; the whole text stays in the report.
    lines = [printable(ln.strip()) for ln in str(exc).splitlines() if ln.strip()]
    cause = lines[-1] if lines else ""
    known = known_causes(f"{exc}\n{''.join(frames)}")
    return stage(
        name,
        ERROR,
        time.monotonic() - t0,
        f"{type(exc).__name__}: {cause}"[:500],
        traceback="".join(frames),
        **({"error": printable(str(exc), keep="\n")[-8000:]} if len(lines) > 1 else {}),
        **({"known_causes": known} if known else {}),
    )


def image_info(root: Path) -> dict[str, Any]:
    """The image's own record (written by the render step): lock.json and the applied-patch markers."""
    lock_path = root / "lock.json"
    info: dict[str, Any] = {"root": str(root), "lock": None, "render_hash": None, "applied_patches": []}
    if not lock_path.is_file():
        info["note"] = f"not a rocmstack image (no {lock_path})"
        return info
    try:
        lock = json.loads(lock_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        info["note"] = f"{lock_path} unreadable: {exc}"
        return info
    info["lock"] = lock
    info["render_hash"] = lock.get("render_hash") if isinstance(lock, dict) else None
    applied = root / "patches" / "applied"
    info["applied_patches"] = sorted(p.stem for p in applied.glob("*.json")) if applied.is_dir() else []
    return info


def run_doctor_stage(opts: ValidateOptions) -> tuple[dict[str, Any], dict[str, Any] | None]:

    t0 = time.monotonic()
    try:
        level = _doctor_level(opts.device)
        report = run_doctor(
            doctor_options.validated(
                expect_gpus=opts.expect_gpus, skip=opts.doctor_skip, image_root=opts.image_root, level=level
            )
        )
    except Exception as exc:
        return _crash("doctor", exc, t0), None
    status = PASS if report.get("passed") else FAIL
    return stage("doctor", status, time.monotonic() - t0, report.get("verdict", "")), report


AITER_FIRST_CALL_TIMEOUT = (
    900.0  # s: a module built at its first call takes minutes (sgl-project/sglang#34586)
)


def run_aiter_stage(
    opts: ValidateOptions, progress: Progress = lambda msg: None
) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None]:
    """The first call of each AITER module the image prebuilt (none: an image that prebuilt nothing)."""

    manifest, error = read_manifest(opts.root())
    if error:
        return stage("aiter", FAIL, 0.0, error), None
    if manifest is None:
        return None, None
    progress("aiter: first call of each prebuilt module")
    t0 = time.monotonic()
    try:
        calls = first_calls(opts.root(), manifest, timeout=AITER_FIRST_CALL_TIMEOUT)
        status, summary, rows = judge(manifest, calls)
    except Exception as exc:
        return _crash("aiter", exc, t0), None
    return stage(
        "aiter", PASS if status == "pass" else FAIL, time.monotonic() - t0, summary, modules=rows
    ), rows


def _doctor_level(choice: str) -> int:
    """Level 2 (active probes) where torch sees a GPU; level 1 elsewhere, also where torch is missing (the
    doctor's own checks say so: the stage must not crash on it)."""
    try:
        return 2 if _torch_device(choice) == "cuda" else 1
    except ImportError:
        return 1


def _torch_device(choice: str) -> str:
    if choice in ("cpu", "cuda"):
        return choice  # cuda without a GPU: the stages that need one say so
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def run_smoke_stage(
    opts: ValidateOptions, progress: Progress
) -> tuple[dict[str, Any], dict[str, Any] | None]:

    t0 = time.monotonic()
    kwargs: dict[str, Any] = {"device": opts.device, "report_dir": opts.report_dir / SMOKE_DIR}  # auto | cpu
    if opts.smoke_steps is not None:
        kwargs["steps"] = opts.smoke_steps
    try:
        smoke_opts = SmokeOptions(**kwargs)

        def on_step(row: dict[str, Any]) -> None:
            progress(f"smoke step {row['step'] + 1}/{smoke_opts.steps}: reward {row['raw_reward_mean']:.2f}")

        why = settings_warning(smoke_opts.steps, smoke_opts.inject)
        if why is not None and not quiet():  # a warning: -q hides it
            progress(f"smoke: warning: {why}")
        summary = run_grpo_smoke(smoke_opts, on_step=on_step)
    except Interrupted:
        raise  # Ctrl-C stops validate too; the smoke already said where and kept its steps
    except Exception as exc:
        return _crash("smoke", exc, t0), None
    f = summary["final"]
    text = (
        f"{'PASS' if summary['passed'] else 'FAIL: ' + ', '.join(summary['failed'])}; reward "
        f"{f['reward_first_window']:.2f} -> {f['reward_last_window']:.2f} over {summary['steps']} steps on "
        f"{summary['device']}"
    )
    return stage("smoke", PASS if summary["passed"] else FAIL, time.monotonic() - t0, text), summary


# Rollout engines the bench runs beside the reference engine when the image's lock names them as components
# (the catalogue's engines with a bench path; an engine's name is its component's).
IMAGE_ENGINES = CATALOGUE.names(bench=True)


def image_engines(image: dict[str, Any], recipe: str | None = None) -> tuple[str, ...]:
    """The rollout engines this image has: its lock.json's components, or on a node validated in place with
    ``--recipe``, that recipe's."""
    components: Any = (image.get("lock") or {}).get("components") or {}
    if not components and recipe:
        components = load_recipe(recipe)[0].components
    return tuple(e for e in IMAGE_ENGINES if e in components)


# Engines the GRPO smoke can drive as its rollout (``smoke grpo --rollout``); a few steps prove the
# invariants (log-prob agreement, weight version, sleep/wake), reward growth is the reference smoke's job.
SMOKE_ENGINES = CATALOGUE.names(served=True, option=True)
ENGINE_SMOKE_STEPS = 5


def run_engine_smoke_stage(
    opts: ValidateOptions, progress: Progress, engine: str
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``smoke grpo --rollout ENGINE``: the image's own engine generates, scores and takes the trainer's
    weights. An engine that cannot start is a FAIL naming why, never a skip."""

    t0 = time.monotonic()
    name = f"smoke-{engine}"
    try:
        smoke_opts = SmokeOptions(
            device=opts.device, rollout=engine, steps=opts.smoke_steps or ENGINE_SMOKE_STEPS
        ).validated()
        progress(f"{name}: the GRPO smoke with {engine} as its rollout")
        summary = run_grpo_smoke(smoke_opts)
    except Interrupted:
        raise
    except Exception as exc:
        return {**_crash(name, exc, t0), "status": FAIL}, None
    text = "PASS" if summary["passed"] else "FAIL: " + ", ".join(summary["failed"])
    return stage(name, PASS if summary["passed"] else FAIL, time.monotonic() - t0, text), summary


def bench_spec(device: str, engines: tuple[str, ...] = ()) -> RolloutSpec:

    if device == "cuda":
        name, config = load_config(GPU_BENCH.shape)
        s = GPU_BENCH
    else:
        name, config, s = CPU_BENCH.shape, dict(CPU_BENCH_CONFIG), CPU_BENCH
    return RolloutSpec(
        shape_name=name,
        config=config,
        batches=s.batches,
        prompt_len=s.prompt_len,
        new_tokens=s.new_tokens,
        engines=("reference", *engines),
        device=device,
        dtype=s.dtype,
        use_graphs=device == "cuda",
    )


def bench_verdict(report: dict[str, Any], bars: Bars | None = None) -> tuple[str, str]:
    """Judge decode against the roofline: every config ran, each engine's decode MBU at the largest batch
    clears the arch's floor (bars.yaml `bench`), and, with a baseline, none regressed. No floor for this
    arch: warn, never a plain pass."""
    bad = [r for r in report["results"] if r["status"] != PASS]
    if bad:
        return FAIL, f"{bad[0]['engine']} batch {bad[0]['batch']}: {bad[0]['status']}: {bad[0].get('reason')}"
    if not report["results"]:
        return FAIL, "the bench ran no configuration"
    if bars is None:
        bars = load_bars()
    arch = ((report["device"].get("spec") or {}).get("arch")) or None
    bar = bars.for_bench(arch)
    top = max(r["batch"] for r in report["results"])
    rows = [r for r in report["results"] if r["batch"] == top]
    floor = f"floor {bar.min_mbu:.0%}, {printable(bar.arch)} bars.yaml" if bar else None
    text = (
        "; ".join(
            f"{printable(r['engine'])} decode {_rate(r.get('decode_tokens_per_s'))} tok/s at batch {r['batch']} = "
            + (f"{r['mbu']:.0%}" if r.get("mbu") is not None else "?")
            + " of roofline"
            + (f" ({floor})" if floor else "")
            for r in rows
        )
        + f" on {printable(report['device']['name'])}"
    )
    if bar is None:
        return WARN, text + f"; no bench floor in bars.yaml for arch {quoted(arch or 'unknown')}: not judged"
    under = [r for r in rows if r.get("decode_tokens_per_s") is None or (r.get("mbu") or 0.0) < bar.min_mbu]
    if under:
        return FAIL, "under the floor: " + text
    base = report.get("baseline")
    if base is None:
        return PASS, text + " (no baseline)"
    if not base["checks"]:
        return FAIL, f"baseline {base.get('file')}: no config of this run has an entry in it"
    failed = [c for c in base["checks"] if c["status"] != PASS]
    if failed:
        c = failed[0]
        now, then = check_rates(c)
        return FAIL, (
            f"regression: {c['engine']} batch {c['batch']} {now:,.1f} decode tok/s = "
            f"{c['ratio']:.2f}x of baseline {then:,.1f} (tolerance {base['tolerance']:.0%})"
        )
    return PASS, text + f"; {len(base['checks'])} config(s) within {base['tolerance']:.0%} of the baseline"


def _rate(value: Any) -> str:
    return f"{value:,.0f}" if isinstance(value, int | float) else "none"


def run_bench_stage(
    opts: ValidateOptions, progress: Progress, engines: tuple[str, ...] = ()
) -> tuple[dict[str, Any], dict[str, Any] | None]:

    t0 = time.monotonic()
    try:
        base = None
        if opts.baseline is not None:
            base = load_baseline(opts.baseline)
        spec = bench_spec(_torch_device(opts.device), engines)
        available, source = memory.available_bytes(spec.device)
        memory.check_fits(
            memory_phases(spec), available, source, fix="free memory on this node, or --skip-bench"
        )
        report = run_rollout(spec, progress=lambda msg: progress(f"bench: {msg}"))
        if base is not None:
            report["baseline"] = compare(report, base) | {"file": str(opts.baseline)}
        out = opts.report_dir / BENCH_DIR
        out.mkdir(parents=True, exist_ok=True)
        (out / BENCH_JSON).write_text(dumps(report), encoding="utf-8")
        if any(r["status"] == PASS and r[HEADLINE] for r in report["results"]):
            plot_reports([report], out / ROOFLINE_PNG)
    except Exception as exc:
        return _crash("bench", exc, t0), None
    status, text = bench_verdict(report)
    return stage("bench", status, time.monotonic() - t0, text), report


def image_framework_smoke(root: Path) -> FrameworkSmoke | None:
    """The declaration the image carries (render writes it beside lock.json); None in an image without one.
    The file comes from the image: a malformed one is one InputError line, never a traceback."""
    from pydantic import ValidationError

    path = root / FRAMEWORK_SMOKE_FILE
    if not path.is_file():
        return None
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_DECLARATION_BYTES + 1)
        if len(raw) > MAX_DECLARATION_BYTES:
            raise ValueError(f"larger than {MAX_DECLARATION_BYTES} bytes")
        return FrameworkSmoke.model_validate_json(raw)  # JSON mode: lists stand for the model's tuples
    except (OSError, ValueError, ValidationError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(
            f"{quoted(path)}: not a framework smoke declaration ({printable(first)[:200]})",
            fix="rebuild the image from its recipe (`rocmstack build`)",
        ) from None


def run_framework_stage(
    opts: ValidateOptions, image: dict[str, Any], progress: Progress
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The image's RL framework's own loop (``smoke framework``), declared by ``--recipe`` on a node that is no
    rocmstack image, else by the image itself; skipped, saying why, when there is no declaration."""
    t0 = time.monotonic()
    lock = image.get("lock")
    locked_name = lock.get("recipe") if isinstance(lock, dict) else None
    name = opts.recipe or locked_name
    try:
        decl = None if opts.recipe else image_framework_smoke(opts.root())
        if decl is None and not name:
            return stage("framework", SKIP, 0.0, "no recipe: not a rocmstack image"), None
        if decl is None and name:
            try:
                decl = load_recipe(str(name))[0].framework_smoke
            except InputError:
                if opts.recipe:
                    raise
                # An image rendered before it carried its declaration, from a recipe not on its recipe path.
                note = (
                    f"recipe {name} is not on this image's recipe path (--recipe, or ROCMSTACK_RECIPES_PATH)"
                )
                return stage("framework", SKIP, 0.0, note), None
        if decl is None:
            return stage("framework", SKIP, 0.0, f"recipe {name} declares no framework smoke"), None
        # The image's own declaration (its lock.json was read) is the image's code; --recipe's is not.
        inside = in_image() or (not opts.recipe and lock is not None)
        check_recipe_command(
            str(name or decl.framework), allowed=opts.allow_recipe_command, inside_image=inside
        )
        progress(f"framework: {decl.framework}'s own loop")
        summary = run_framework_smoke(decl, opts.report_dir / FRAMEWORK_DIR, recipe=str(name or "unknown"))
    except Exception as exc:
        return _crash("framework", exc, t0), None
    text = f"{summary['framework']}: {summary['steps_seen']}/{summary['steps']} steps" + (
        "" if summary["passed"] else "; failed: " + ", ".join(summary["failed"])
    )
    if (broke := summary.get("failure")) and broke.get("cause"):
        text += f"; {broke['process']}: {broke['cause']}"
    if summary.get("skipped_count"):
        text += f"; {summary['skipped_count']} metric line(s) left out (framework/summary.json)"
    return stage("framework", PASS if summary["passed"] else FAIL, time.monotonic() - t0, text), summary


@dataclass(frozen=True)
class StageInput:
    """What every stage reads: the run's options, the image's own record, the engines it carries."""

    opts: ValidateOptions
    image: dict[str, Any]
    engines: tuple[str, ...]
    progress: Progress


@dataclass(frozen=True)
class ValidateStage:
    """One stage of a validate run. ``run`` returns the stage's row in report.json (None: nothing of this
    kind on this image, so no row) and what it produced (a report or summary, None when it crashed).
    ``skip_option`` names the ValidateOptions field that leaves it out: a SKIP row names the option."""

    name: str
    run: Callable[[StageInput], tuple[dict[str, Any] | None, Any]]
    skip_option: str | None = None
    announce: str | None = None  # the progress line before it runs
    engine: str | None = None  # an engine smoke: the rollout engine it drives

    def skipped(self, opts: ValidateOptions) -> str | None:
        """The option that leaves this stage out in this run, as the user spells it; None: it runs."""
        if self.skip_option is None or not getattr(opts, self.skip_option):
            return None
        return "--" + self.skip_option.replace("_", "-")


def _framework(s: StageInput) -> tuple[dict[str, Any] | None, Any]:
    """A recipe without a declaration has no framework row; its reason is the report's framework note."""
    row, summary = run_framework_stage(s.opts, s.image, s.progress)
    return (None if row["status"] == SKIP else row), {"summary": summary, "note": row["summary"]}


def _engine_smoke(engine: str) -> ValidateStage:
    return ValidateStage(
        f"smoke-{engine}",
        lambda s: run_engine_smoke_stage(s.opts, s.progress, engine),
        skip_option="skip_smoke",
        engine=engine,
    )


def stages(engines: tuple[str, ...]) -> list[ValidateStage]:
    """The stages in the order they run, for an image that carries ENGINES: the doctor, AITER's first calls,
    the GRPO smoke, a smoke with each engine as its rollout, the bench, and the framework's own loop."""
    return [
        ValidateStage("doctor", lambda s: run_doctor_stage(s.opts), announce="doctor: running the checks"),
        ValidateStage("aiter", lambda s: run_aiter_stage(s.opts, s.progress)),
        ValidateStage(
            "smoke",
            lambda s: run_smoke_stage(s.opts, s.progress),
            skip_option="skip_smoke",
            announce="smoke: starting the GRPO job",
        ),
        *(_engine_smoke(e) for e in engines if e in SMOKE_ENGINES),
        ValidateStage(
            "bench",
            lambda s: run_bench_stage(s.opts, s.progress, s.engines),
            skip_option="skip_bench",
            announce="bench: rollout decode against the roofline",
        ),
        ValidateStage("framework", _framework, skip_option="skip_framework"),
    ]


def run_stages(plan: list[ValidateStage], given: StageInput) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run each stage not left out; returns the rows for report.json and each stage's output by name.

    A left-out engine smoke has no row: the smoke's own SKIP row says the option once."""
    rows: list[dict[str, Any]] = []
    outputs: dict[str, Any] = {}
    for step in plan:
        why = step.skipped(given.opts)
        if why is not None:
            if step.engine is None:
                rows.append(stage(step.name, SKIP, 0.0, why))
            continue
        if step.announce:
            given.progress(step.announce)
        row, outputs[step.name] = step.run(given)
        if row is not None:
            rows.append(row)
    return rows, outputs


def run_in_place(options: ValidateOptions, progress: Progress = lambda msg: None) -> dict[str, Any]:
    """Run every stage here and return the report dict (``report["passed"]`` is the verdict)."""
    opts = options.validated()
    prepare_report_dir(opts.report_dir)
    opts.report_dir.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now(dt.UTC)
    t0 = time.monotonic()
    image = image_info(opts.root())
    engines = image_engines(image, opts.recipe)
    plan = stages(engines)
    stages_run, out = run_stages(plan, StageInput(opts, image, engines, progress))
    doctor, smoke, bench = out.get("doctor"), out.get("smoke"), out.get("bench")
    engine_smokes = {st.engine: out[st.name] for st in plan if st.engine and st.name in out}
    framework = out.get("framework") or {"summary": None, "note": "--skip-framework"}
    passed, line = verdict(stages_run)
    archs = device_archs(doctor)
    report = {
        "schema": SCHEMA,
        "rocmstack_version": __version__,
        "created": started.isoformat(timespec="seconds"),
        "seconds": round(time.monotonic() - t0, 3),
        "mode": "in-place",
        "passed": passed,
        "verdict": line,
        "render_hash": image["render_hash"],
        "gpu_arch": single_arch(archs),
        "gpu_archs": archs,
        "image": {"ref": None, "id": None, "labels": {}, **image},
        "engine": None,
        "host": host_info(),
        "options": opts.to_dict(),
        "stages": stages_run,
        "doctor": {"report": doctor},
        "smoke": {"summary": smoke, "dir": SMOKE_DIR if smoke is not None else None},
        "engine_smoke": engine_smokes,
        "bench": {"report": bench, "dir": BENCH_DIR if bench is not None else None},
        "framework": {
            "summary": framework["summary"],
            "dir": FRAMEWORK_DIR if framework["summary"] is not None else None,
            "note": framework["note"],
        },
    }
    return ValidateReport.produce(report).wire()
