"""The in-place pipeline: stage verdicts, bench gate, options, the image's own record, a real doctor run."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from rocmstack.bench.report import upgrade
from rocmstack.errors import InputError
from rocmstack.validate import pipeline
from rocmstack.validate.pipeline import (
    ValidateOptions,
    bench_verdict,
    image_info,
    run_in_place,
    stage,
    verdict,
)


def _bench(*results, baseline=None):
    rep = {
        "device": {"name": "NVIDIA H200", "spec": {"name": "H200", "arch": "sm_90"}},
        "results": list(results),
    }
    if baseline is not None:
        rep["baseline"] = baseline
    return rep


def _ok(batch, tps):
    return {
        "engine": "reference",
        "batch": batch,
        "status": "pass",
        "tokens_per_s": tps,
        "decode_tokens_per_s": tps,
        "mbu": 0.3,
        "reason": None,
    }


# validate's bench on H200 (Qwen3-0.6B, batches 1 and 64, reference and vLLM): a recorded report.
EVIDENCE = (
    Path(__file__).parents[2] / "docs/evidence/engine-stack-h200-2026-12-01/validate/bench/rollout.json"
)


def _recorded():
    rep = upgrade(json.loads(EVIDENCE.read_text()))  # recorded as schema 1
    rep["results"] = [r for r in rep["results"] if r["status"] == "pass"]  # sglang was not in that image
    return rep


def test_a_recorded_healthy_bench_passes_with_its_decode_rate_and_the_floor_it_used():
    status, text = bench_verdict(_recorded())
    assert status == "pass", text
    assert "reference decode 33,478 tok/s at batch 64 = 32% of roofline (floor 10%, sm_90 bars.yaml)" in text
    assert "vllm decode 22,518 tok/s at batch 64 = 22% of roofline" in text


def test_a_bench_that_ran_but_is_under_the_floor_fails():
    # The same run, its vLLM row at transformers' eager rate (MBU 0.009, bench-h200-run1/bench-0.6b.json):
    # every config ran, which alone used to pass.
    rep = _recorded()
    slow = next(r for r in rep["results"] if r["engine"] == "vllm" and r["batch"] == 64)
    slow.update(decode_tokens_per_s=773.3, tokens_per_s=773.9, mbu=0.0087)
    status, text = bench_verdict(rep)
    assert status == "fail" and text.startswith("under the floor: ") and "vllm decode 773 tok/s" in text
    assert "= 1% of roofline (floor 10%, sm_90 bars.yaml)" in text


def test_the_floor_judges_decode_not_the_prefill_inclusive_rate():
    rep = _recorded()
    row = next(r for r in rep["results"] if r["engine"] == "reference" and r["batch"] == 64)
    row.update(decode_tokens_per_s=None)  # an engine that reported no decode phase: nothing to judge
    assert bench_verdict(rep)[0] == "fail"


def test_a_bench_with_no_floor_for_its_arch_warns_and_validate_still_says_so():
    rep = _recorded()
    rep["device"]["spec"] = None  # a device gpu_specs.yaml does not know: no arch, no floor
    status, text = bench_verdict(rep)
    assert status == "warn" and "no bench floor in bars.yaml for arch 'unknown': not judged" in text
    assert verdict([stage("doctor", "pass", 1, ""), stage("bench", status, 1, text)]) == (
        True,
        "PASS: doctor, bench (bench warned)",
    )
    # only the bench warns: any other stage's "warn" is not ours and fails
    assert verdict([stage("doctor", "warn", 1, ""), stage("bench", "pass", 1, "")])[0] is False


def test_a_floor_from_another_bars_file_is_the_one_named():
    from rocmstack.doctor.bars import Bars, BenchBar

    bars = Bars((), (), (BenchBar("sm_90", 0.5, "test"),))
    status, text = bench_verdict(_recorded(), bars)
    assert status == "fail" and "(floor 50%, sm_90 bars.yaml)" in text


def test_verdict_passes_only_when_every_stage_that_ran_passed():
    assert verdict([stage("doctor", "pass", 1, ""), stage("smoke", "skip", 0, "")]) == (
        True,
        "PASS: doctor (smoke skipped)",
    )
    assert verdict([stage("doctor", "pass", 1, ""), stage("bench", "fail", 1, "")]) == (
        False,
        "FAIL: bench fail",
    )
    assert verdict([stage("doctor", "error", 1, ""), stage("smoke", "pass", 1, "")])[0] is False
    assert verdict([stage("smoke", "skip", 0, "")]) == (False, "FAIL: nothing ran (smoke skipped)")


def test_bench_without_baseline_passes_when_every_config_ran():
    status, text = bench_verdict(_bench(_ok(1, 600.0), _ok(64, 29000.0)))
    assert status == "pass" and "decode 29,000 tok/s at batch 64 = 30% of roofline" in text
    assert "no baseline" in text


def test_bench_config_that_did_not_run_fails():
    bad = {
        "engine": "vllm",
        "batch": 64,
        "status": "error",
        "reason": "vllm not installed",
        "tokens_per_s": None,
    }
    status, text = bench_verdict(_bench(_ok(1, 600.0), bad))
    assert status == "fail" and "vllm batch 64: error: vllm not installed" in text


def test_bench_regression_against_the_baseline_fails():
    checks = [
        {
            "engine": "reference",
            "batch": 64,
            "metric": "decode_tokens_per_s",
            "decode_tokens_per_s": 20000.0,
            "baseline_decode_tokens_per_s": 29000.0,
            "ratio": 20000 / 29000,
            "status": "fail",
        }
    ]
    status, text = bench_verdict(_bench(_ok(64, 20000.0), baseline={"checks": checks, "tolerance": 0.1}))
    assert status == "fail" and "20,000.0 decode tok/s = 0.69x of baseline 29,000.0" in text
    status, text = bench_verdict(
        _bench(_ok(64, 20000.0), baseline={"checks": [], "tolerance": 0.1, "file": "b.json"})
    )
    assert status == "fail" and "no config of this run" in text
    checks[0].update(status="pass")
    assert bench_verdict(_bench(_ok(64, 20000.0), baseline={"checks": checks, "tolerance": 0.1}))[0] == "pass"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("device", "gpu", "--device 'gpu'"),
        ("expect_gpus", -1, "--expect-gpus -1"),
        ("smoke_steps", 0, "--steps 0"),
    ],
)
def test_bad_options_name_the_field(tmp_path, field, value, message):
    with pytest.raises(InputError, match=message):
        ValidateOptions(report_dir=tmp_path, **{field: value}).validated()


def test_missing_baseline_file_is_input_error(tmp_path):
    with pytest.raises(InputError, match=r"--baseline .*no such file"):
        ValidateOptions(report_dir=tmp_path, baseline=tmp_path / "nope.json").validated()


def test_report_folder_is_checked_before_any_work(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match=r"--output '.*file': exists and is not a folder"):
        ValidateOptions(report_dir=tmp_path / "file").validated()
    with pytest.raises(InputError, match=r"is not a writable folder"):
        ValidateOptions(report_dir=tmp_path / "file" / "sub").validated()
    mine = tmp_path / "mine"
    (mine / "smoke").mkdir(parents=True)
    (mine / "notes.txt").write_text("the user's")
    with pytest.raises(InputError, match=r"holds no earlier validate report is not empty"):
        pipeline.prepare_report_dir(mine)
    assert (mine / "notes.txt").is_file() and (mine / "smoke").is_dir()  # nothing removed


def test_bench_stage_that_cannot_fit_is_an_error_before_it_allocates(tmp_path, monkeypatch):
    from rocmstack.gpu import memory

    meminfo = tmp_path / "meminfo"  # /proc/meminfo's format, on a node with 1 MB left
    meminfo.write_text(
        "MemTotal:       24000000 kB\nMemFree:            900 kB\nMemAvailable:       1000 kB\n"
    )
    monkeypatch.setattr(memory, "MEMINFO", meminfo)
    result, report = pipeline.run_bench_stage(ValidateOptions(report_dir=tmp_path / "r", device="cpu"), print)
    assert report is None and result["status"] == "error"
    assert (
        result["summary"].startswith("this run needs about ")
        and "more than the 1 MB MemAvailable" in result["summary"]
    )
    assert not (tmp_path / "r").exists()


def test_image_info_reads_the_lock_and_patch_markers(tmp_path):
    assert image_info(tmp_path)["render_hash"] is None
    (tmp_path / "lock.json").write_text(json.dumps({"schema": 1, "render_hash": "ab" * 32}))
    (tmp_path / "patches" / "applied").mkdir(parents=True)
    (tmp_path / "patches" / "applied" / "rtld-local.json").write_text("{}")
    info = image_info(tmp_path)
    assert info["render_hash"] == "ab" * 32 and info["applied_patches"] == ["rtld-local"]
    (tmp_path / "lock.json").write_text("{not json")
    assert "unreadable" in image_info(tmp_path)["note"]


@pytest.mark.timeout(180)
def test_doctor_only_run_on_this_cpu_node(tmp_path):
    """A real doctor run: 0 GPUs expected passes here; 1 expected fails, and the report says so.

    The folder held an earlier full run: its smoke/ and bench/ results must not sit beside a report that
    says they were skipped."""
    earlier = tmp_path / "a"
    for name in ("smoke/summary.json", "bench/rollout.json", "report.json", "report.html"):
        (earlier / name).parent.mkdir(parents=True, exist_ok=True)
        (earlier / name).write_text("{}")
    ok = run_in_place(
        ValidateOptions(
            report_dir=tmp_path / "a", expect_gpus=0, skip_smoke=True, skip_bench=True, image_root=tmp_path
        )
    )
    assert ok["schema"] == pipeline.SCHEMA and ok["mode"] == "in-place"
    assert ok["passed"] and ok["verdict"] == "PASS: doctor (smoke, bench skipped)"
    assert ok["doctor"]["report"]["passed"] and ok["smoke"]["summary"] is None
    assert sorted(p.name for p in earlier.iterdir()) == []  # write_all adds this run's report.*
    assert ok["doctor"]["report"]["options"]["level"] == 1  # level 2 (active probes) only where GPUs are
    bad = run_in_place(
        ValidateOptions(
            report_dir=tmp_path / "b", expect_gpus=1, skip_smoke=True, skip_bench=True, image_root=tmp_path
        )
    )
    assert not bad["passed"] and bad["verdict"].startswith("FAIL: doctor fail")
    assert "gpu-count" in bad["stages"][0]["summary"]


def test_doctor_level_without_torch_is_level_one(monkeypatch):
    """An image without torch (the build test's image) runs the doctor at level 1; the stage must not crash
    on the missing module (the doctor's own checks report it)."""
    from rocmstack.validate import pipeline

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    assert pipeline._doctor_level("auto") == 1
    assert pipeline._doctor_level("cpu") == 1


# A child of the tiny-pip fixture whose framework smoke is two echoed steps of verl's console format.
FW_RECIPE = (
    "name: fw\nextends: tiny-pip\ndescription: test\n"
    "publish: {repository: localhost/t/fw, tag: 'fw_{arch}', aliases: []}\n"
    "framework_smoke:\n"
    "  framework: echo\n"
    "  command: ['{python}', '-c', \"print('step:1 - r:0.5'); print('step:2 - r:0.7')\"]\n"
    "  timeout_s: 60\n"
    "  metrics: {format: kv-console}\n"
    "  checks: [{metric: r, op: '>', value: 0.6, at: last}]\n"
)


def test_framework_stage_runs_the_recipe_declaration_or_says_why_not(tmp_path):
    from pathlib import Path

    fixtures = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "recipes"
    (tmp_path / "tiny-pip.yaml").write_text((fixtures / "tiny-pip.yaml").read_text())
    recipe = tmp_path / "fw.yaml"
    recipe.write_text(FW_RECIPE)
    opts = pipeline.ValidateOptions(report_dir=tmp_path / "report")
    no_lock = pipeline.run_framework_stage(opts, {"lock": None}, lambda msg: None)
    assert no_lock == (
        pipeline.stage("framework", pipeline.SKIP, 0.0, "no recipe: not a rocmstack image"),
        None,
    )
    undeclared = pipeline.run_framework_stage(
        opts, {"lock": {"recipe": str(fixtures / "tiny-pip.yaml")}}, lambda msg: None
    )
    assert (
        undeclared[0]["status"] == pipeline.SKIP and "declares no framework smoke" in undeclared[0]["summary"]
    )
    pytest.importorskip("pyarrow", reason="the smoke's parquet is written with pyarrow (test extra)")
    ran, summary = pipeline.run_framework_stage(opts, {"lock": {"recipe": str(recipe)}}, lambda msg: None)
    assert ran["status"] == pipeline.PASS and ran["summary"] == "echo: 2/2 steps", ran
    assert summary is not None and (tmp_path / "report" / pipeline.FRAMEWORK_DIR / "framework.log").is_file()


def test_an_image_from_a_lab_recipe_runs_the_framework_smoke_it_carries(tmp_path):
    """The declaration travels in the image (render writes it beside lock.json): a recipe that is on no recipe
    path of the image still has its framework's loop run by validate."""
    from pathlib import Path

    from rocmstack.recipe.load import load_recipe
    from rocmstack.recipe.model import FRAMEWORK_SMOKE_FILE
    from rocmstack.recipe.resolve import resolve
    from rocmstack.render.context import render

    fixtures = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "recipes"
    lab = tmp_path / "lab"
    lab.mkdir()
    (lab / "tiny-pip.yaml").write_text((fixtures / "tiny-pip.yaml").read_text())
    (lab / "fw.yaml").write_text(FW_RECIPE)
    recipe, path = load_recipe(str(lab / "fw.yaml"))
    files = render(
        resolve(recipe, path, None),
        revision=("0" * 40, "2026-12-01T00:00:00Z"),
        patches_dir=fixtures.parent / "patches",
    ).files
    assert (
        f"COPY --chmod=0644 rocmstack/{FRAMEWORK_SMOKE_FILE} /opt/rocmstack/" in files["Dockerfile"].decode()
    )
    root = tmp_path / "image"
    root.mkdir()
    (root / FRAMEWORK_SMOKE_FILE).write_bytes(files[f"rocmstack/{FRAMEWORK_SMOKE_FILE}"])
    shutil.rmtree(lab)  # the recipe itself is nowhere to be found, as in the image
    opts = pipeline.ValidateOptions(report_dir=tmp_path / "report", image_root=root)
    pytest.importorskip("pyarrow", reason="the smoke's parquet is written with pyarrow (test extra)")
    ran, summary = pipeline.run_framework_stage(opts, {"lock": {"recipe": "fw"}}, lambda msg: None)
    assert ran["status"] == pipeline.PASS and ran["summary"] == "echo: 2/2 steps", ran
    assert summary is not None and summary["recipe"] == "fw"

    (root / FRAMEWORK_SMOKE_FILE).write_text('{"framework": "echo", "command": 3}')
    broken, _ = pipeline.run_framework_stage(opts, {"lock": {"recipe": "fw"}}, lambda msg: None)
    assert broken["status"] == pipeline.ERROR and "not a framework smoke declaration" in broken["summary"]
    assert "\n" not in broken["summary"] and "traceback" not in broken


def test_the_bench_runs_the_engines_the_image_lock_names_beside_the_reference():
    from rocmstack.validate.pipeline import bench_spec, image_engines

    lock = {"components": {"verl": {}, "sglang": {}, "vllm": {}, "ray": {}}}
    assert image_engines({"lock": lock}) == ("vllm", "sglang")
    assert image_engines({"lock": None}) == ()  # not a rocmstack image: the reference engine alone
    assert bench_spec("cpu", image_engines({"lock": lock})).engines == ("reference", "vllm", "sglang")
    assert bench_spec("cpu").engines == ("reference",)


def test_bench_summary_names_every_engine_at_the_largest_batch():
    rows = [_ok(1, 600.0), _ok(64, 29000.0), {**_ok(64, 9000.0), "engine": "vllm"}]
    status, text = bench_verdict(_bench(*rows))
    assert status == "pass" and "reference decode 29,000 tok/s at batch 64" in text
    assert "vllm decode 9,000 tok/s at batch 64" in text


def test_a_stage_that_died_in_a_worker_names_the_cause_in_one_line():
    # Ray's ActorDiedError text as validate's smoke-vllm stage got it on a GPU node with xgrammar removed
    # (docs/evidence/engine-stack-h200-2026-12-01/no-xgrammar), shortened.
    text = (
        "The actor died because of an error raised in its creation task, \x1b[36mray::RolloutWorker.__init__()"
        '\x1b[39m (pid=13303, ip=192.0.2.2)\n  File "/opt/rocmstack/src/rocmstack/smoke/actors.py", line 280, in '
        "__init__\n    self.vllm = VLLMRollout(\nModuleNotFoundError: No module named 'xgrammar'"
    )

    class ActorDiedError(RuntimeError):
        pass

    row = pipeline._crash("smoke-vllm", ActorDiedError(text), 0.0)
    assert row["summary"] == "ActorDiedError: ModuleNotFoundError: No module named 'xgrammar'"
    assert "RolloutWorker.__init__" in row["error"] and "\x1b" not in row["error"]


@pytest.mark.parametrize("quiet", [False, True])
def test_the_smoke_settings_warning_is_hidden_under_q(tmp_path, monkeypatch, quiet):
    from rocmstack.output import QUIET_ENV

    ran: list[object] = []

    def no_smoke(*args, **_kwargs):
        ran.append(args)
        raise RuntimeError("not run here")

    # where the stage calls it: patching rocmstack.smoke's name left the real smoke running (20 s a run)
    monkeypatch.setattr(pipeline, "run_grpo_smoke", no_smoke)
    if quiet:
        monkeypatch.setenv(QUIET_ENV, "1")
    else:
        monkeypatch.delenv(QUIET_ENV, raising=False)
    said: list[str] = []
    opts = ValidateOptions(report_dir=tmp_path / "r", expect_gpus=0, smoke_steps=1, device="cpu")
    pipeline.run_smoke_stage(opts, said.append)
    warnings = [line for line in said if line.startswith("smoke: warning:")]
    assert len(warnings) == (0 if quiet else 1), said
    assert len(ran) == 1  # the warning comes before the smoke starts


def test_the_stages_in_run_order_with_a_smoke_for_each_engine_the_image_carries():
    names = [s.name for s in pipeline.stages(("vllm", "sglang"))]
    assert names == ["doctor", "aiter", "smoke", "smoke-vllm", "smoke-sglang", "bench", "framework"]
    assert [s.name for s in pipeline.stages(())] == ["doctor", "aiter", "smoke", "bench", "framework"]
    by_name = {s.name: s for s in pipeline.stages(("vllm",))}
    assert by_name["smoke-vllm"].engine == "vllm" and by_name["smoke"].engine is None
    opts = ValidateOptions(report_dir=Path("r"), skip_smoke=True, skip_framework=True)
    left_out = {s.name: s.skipped(opts) for s in pipeline.stages(("vllm",))}
    assert left_out == {
        "doctor": None,
        "aiter": None,
        "smoke": "--skip-smoke",
        "smoke-vllm": "--skip-smoke",
        "bench": None,
        "framework": "--skip-framework",
    }


def test_run_stages_records_what_ran_what_was_left_out_and_what_had_nothing_to_do():
    said: list[str] = []
    ran: list[str] = []

    def runs(name, row=True):
        def run(given):
            ran.append(name)
            return (stage(name, pipeline.PASS, 0.1, "ok") if row else None), {"from": name}

        return run

    plan = [
        pipeline.ValidateStage("first", runs("first"), announce="first: going"),
        pipeline.ValidateStage("absent", runs("absent", row=False)),  # nothing of its kind on this image
        pipeline.ValidateStage("smoke", runs("smoke"), skip_option="skip_smoke"),
        pipeline.ValidateStage("smoke-vllm", runs("smoke-vllm"), skip_option="skip_smoke", engine="vllm"),
        pipeline.ValidateStage("bench", runs("bench"), skip_option="skip_bench"),
    ]
    opts = ValidateOptions(report_dir=Path("r"), skip_smoke=True)
    rows, outputs = pipeline.run_stages(plan, pipeline.StageInput(opts, {}, ("vllm",), said.append))
    assert ran == ["first", "absent", "bench"] and said == ["first: going"]
    assert [(r["name"], r["status"], r["summary"]) for r in rows] == [
        ("first", "pass", "ok"),
        ("smoke", "skip", "--skip-smoke"),  # an engine smoke left out by the same option has no row
        ("bench", "pass", "ok"),
    ]
    assert outputs == {"first": {"from": "first"}, "absent": {"from": "absent"}, "bench": {"from": "bench"}}
