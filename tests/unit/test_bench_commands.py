"""`rocmstack bench rollout` end to end on CPU with a tiny config: the code paths and the JSON, no speed claims."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rocmstack.bench.report import SCHEMA, BenchReport, DecodeCheck, upgrade
from rocmstack.cli import main

TINY = {
    "model_type": "qwen3", "vocab_size": 96, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "tie_word_embeddings": True,
}  # fmt: skip
EVIDENCE = (
    Path(__file__).parents[2] / "docs/evidence/engine-stack-h200-2026-12-01/validate/bench/rollout.json"
)
RUN = ["bench", "rollout", "--device", "cpu", "--batch", "1,3", "--prompt-len", "6", "--new-tokens", "5"]


def cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


@pytest.fixture
def shape(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY))
    return str(path)


def test_json_report_has_every_field(capsys, shape, tmp_path):
    code, out, err = cli(
        capsys, *RUN, "--shape", shape, "--rollout", "reference,hf", "--json",
        "-o", str(tmp_path / "r.json"), "--save-baseline", str(tmp_path / "b.json"),
    )  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    assert report == json.loads((tmp_path / "r.json").read_text())
    assert report["device"]["type"] == "cpu" and report["device"]["spec"] is None
    assert report["device"]["copy_bandwidth_gb_s"] > 0
    ok = [r for r in report["results"] if r["status"] == "pass"]
    assert sorted((r["engine"], r["batch"]) for r in ok) == [
        ("hf", 1),
        ("hf", 3),
        ("reference", 1),
        ("reference", 3),
    ]
    bw = report["device"]["copy_bandwidth_gb_s"] * 1e9
    for r in ok:
        for field in ("tokens_per_s", "tokens_per_s_per_gpu", "decode_tokens_per_s", "median_step_ms",
                      "prefill_tokens_per_s", "mbu", "roofline_tokens_per_s", "peak_memory_gb"):  # fmt: skip
            assert r[field] > 0, field
        assert r["mbu_spec"] is None
        assert r["mbu"] == pytest.approx(r["decode_tokens_per_s"] * r["bytes_per_step"] / r["batch"] / bw)
    assert report["weight_sync"] == []
    assert len(json.loads((tmp_path / "b.json").read_text())["entries"]) == 4
    assert report["schema"] == SCHEMA
    BenchReport.model_validate(report)  # what the bench writes is what its readers index


def test_a_run_gated_on_its_own_baseline_checks_each_decode_rate(capsys, shape, tmp_path):
    base = tmp_path / "b.json"
    code, out, err = cli(capsys, *RUN, "--shape", shape, "--save-baseline", str(base), "--json")
    assert code == 0, err
    saved = {
        (e["engine"], e["batch"]): e["decode_tokens_per_s"] for e in json.loads(base.read_text())["entries"]
    }
    code, out, err = cli(
        capsys, *RUN, "--shape", shape, "--baseline", str(base), "--tolerance", "1", "--json"
    )
    assert code == 0, err
    report = json.loads(out)
    verdict = BenchReport.model_validate(report).baseline
    assert verdict is not None and [type(c) for c in verdict.checks] == [DecodeCheck, DecodeCheck]
    for c in report["baseline"]["checks"]:
        assert c["baseline_decode_tokens_per_s"] == saved[(c["engine"], c["batch"])]
        row = next(r for r in report["results"] if (r["engine"], r["batch"]) == (c["engine"], c["batch"]))
        assert c["decode_tokens_per_s"] == row["decode_tokens_per_s"] and c["status"] == "pass"


def test_an_engine_asked_for_that_cannot_run_is_exit_1(capsys, shape, tmp_path):
    code, _, err = cli(
        capsys, *RUN, "--shape", shape, "--rollout", "reference,sglang", "--json", "-o", str(tmp_path / "r.json")
    )  # fmt: skip
    assert code == 1
    last = err.strip().splitlines()[-1]
    assert (
        last.startswith("rocmstack: error: --rollout sglang could not run (skip): ")
        and "not installed" in last
    )
    report = json.loads((tmp_path / "r.json").read_text())  # the measurements are kept
    assert [r["status"] for r in report["results"] if r["engine"] == "sglang"] == ["skip", "skip"]
    assert [r["status"] for r in report["results"] if r["engine"] == "reference"] == ["pass", "pass"]


def test_progress_reaches_a_log_without_a_terminal(capsys, shape):
    code, _, err = cli(capsys, *RUN, "--shape", shape)
    assert code == 0, err
    lines = err.splitlines()
    assert lines[0] == "bench rollout: " + shape + ", batch 1,3, prompt 6, 5 new tokens, bfloat16 on cpu"
    assert "bench rollout: reference: batch 3: timed run" in lines


def test_a_run_that_cannot_fit_is_refused_before_allocating(capsys, shape):
    code, out, err = cli(capsys, *RUN[:4], "--batch", "100000000", "--shape", shape)
    assert code == 2 and out == ""
    assert err.startswith("rocmstack: error: this run needs about ") and err.count("\n") == 1
    assert "for the reference engine at batch 100000000" in err and "KV cache" in err
    assert "GB MemAvailable in /proc/meminfo" in err and "--batch" in err


def test_cpu_defaults_are_a_small_shape_that_fits(monkeypatch):
    from rocmstack.bench.rollout import RolloutSpec, memory_phases
    from rocmstack.commands.bench import plan

    name, config, batches, prompt_len, new_tokens = plan("cpu", None, None, None, None)
    assert (name, batches, prompt_len, new_tokens) == ("qwen3-0.6b", (1, 8), 64, 32)
    spec = RolloutSpec(
        shape_name=name, config=config, batches=batches, prompt_len=prompt_len, new_tokens=new_tokens,
        engines=("reference",), device="cpu",
    )  # fmt: skip
    assert max(p.total for p in memory_phases(spec)) < 2.5e9  # a laptop has that free
    assert plan("cuda", None, None, None, None)[0] == "qwen3-8b"
    assert plan("cpu", "qwen3-8b", "2", 7, None)[2:] == ((2,), 7, 32)  # what the user names wins


def test_baseline_gate_exits_1_on_a_regression(capsys, shape, tmp_path):
    base = tmp_path / "b.json"
    code, _, err = cli(capsys, *RUN, "--shape", shape, "--save-baseline", str(base), "--json")
    assert code == 0, err
    data = json.loads(base.read_text())
    for entry in data["entries"]:
        entry["decode_tokens_per_s"] *= 100  # a baseline this run cannot reach
    base.write_text(json.dumps(data))
    code, out, err = cli(capsys, *RUN, "--shape", shape, "--baseline", str(base))
    assert code == 1
    errors = [line for line in err.splitlines() if line.startswith("rocmstack: error: ")]  # after progress
    assert errors == [err.splitlines()[-1]]
    assert errors[0].startswith("rocmstack: error: rollout regression: 2 config(s) below baseline")
    assert "REGRESSION" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--batch", "1,x"], "--batch '1,x': expected positive integers"),
        (["--batch", "0"], "--batch '0'"),
        (["--batch", "2,2"], "--batch '2,2': 2 is listed twice"),
        (["--rollout", "hf,hf"], "--rollout 'hf,hf': hf is listed twice"),
        (["--rollout", "reference,trt"], "--rollout 'reference,trt': unknown engine 'trt'"),
        (["--dtype", "int4"], "--dtype 'int4'"),
        (["--top-p", "0"], "--top-p 0.0: must be in (0, 1]"),
        (["--shape", "llama-70b"], "--shape 'llama-70b': not a built-in shape"),
        (["--baseline", "/nonexistent/b.json"], "--baseline /nonexistent/b.json: no such file"),
        (
            ["-o", "/nonexistent/r.json"],
            "--output '/nonexistent/r.json': '/nonexistent' is not a writable folder",
        ),
        (["--save-baseline", "/"], "--save-baseline '/': is a folder"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, args, message):
    code, _, err = cli(capsys, "bench", "rollout", "--device", "cpu", *args)
    assert code == 2
    assert err.startswith("rocmstack: error: ") and err.count("\n") == 1
    assert message in err


def test_cuda_request_without_a_gpu_is_exit_2(capsys, shape):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    code, _, err = cli(capsys, "bench", "rollout", "--shape", shape, "--device", "cuda")
    assert code == 2 and "--device cuda: torch" in err and "sees no GPU" in err


def test_module_entry_point_has_the_cli_errors():
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "rocmstack.bench", "rollout", "--device", "cpu", "--batch", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        proc.returncode == 2
        and proc.stderr.startswith("rocmstack: error: --batch")
        and proc.stderr.count("\n") == 1
    )


def test_estimate_before_the_work_and_time_left_on_each_run(capsys, shape, tmp_path):
    code, _, err = cli(
        capsys, *RUN, "--shape", shape, "--rollout", "reference,hf", "-o", str(tmp_path / "r.json")
    )
    assert code == 0, err
    lines = err.splitlines()
    at = next(i for i, line in enumerate(lines) if "estimate: about" in line)
    first = next(i for i, line in enumerate(lines) if "building the" in line)
    assert at < first  # said before any model is built
    assert "for 4 run(s) of rocmstack's engines" in lines[at]
    runs = [line for line in lines if "batch" in line and ("warm-up" in line) and "token" not in line]
    assert runs and all(re.search(r"\(about [0-9.]+ (s|min) left\)$", line) for line in runs), runs


def test_the_table_says_what_each_rate_counts_and_decode_is_the_rate_mbu_is_of(capsys, shape, tmp_path):
    code, out, err = cli(
        capsys, *RUN, "--shape", shape, "--rollout", "reference", "-o", str(tmp_path / "r.json")
    )
    assert code == 0, err
    assert "tok/s: batch x new tokens / the whole timed generate (prefill included)" in out
    assert "decode tok/s: batch x (new tokens - 1) / all decode steps' time, the rate MBU is of" in out


def test_the_table_shows_the_rows_decode_rate_not_a_second_one_from_the_median_step(capsys):
    from rocmstack.commands.bench import _render

    # validate's bench on H200: the reference engine's mean decode step (33,478 tok/s at batch 64) is not
    # its median step (1.904 ms = 33,606 tok/s); the table showed the median's rate beside the mean's MBU.
    report = upgrade(json.loads(EVIDENCE.read_text()))  # recorded as schema 1
    _render(report)
    out = capsys.readouterr().out
    for r in (r for r in report["results"] if r["status"] == "pass"):
        row = next(
            line for line in out.splitlines() if re.match(rf"│ {r['engine']}\s+│\s+{r['batch']} │", line)
        )
        cells = [c.strip() for c in row.strip("│").split("│")]
        assert cells[4] == f"{r['decode_tokens_per_s']:,.1f}", (row, r["decode_tokens_per_s"])


def test_engine_is_an_old_spelling_of_rollout_with_a_note(capsys):
    code, _, err = cli(capsys, "bench", "rollout", "--device", "cpu", "--engine", "reference,trt")
    assert code == 2
    assert err.splitlines()[0] == "note: --engine is deprecated; use --rollout"
    assert "--rollout 'reference,trt': unknown engine 'trt'" in err
