from __future__ import annotations

import pytest
from typer.testing import CliRunner

from rocmstack.cli import main, make_app


def test_smoke_grpo_is_registered_with_its_options():
    result = CliRunner().invoke(make_app(), ["smoke", "grpo", "--help"])
    assert result.exit_code == 0
    for option in ("--placement", "--inject", "--output", "--json", "--device"):
        assert option in result.output


def test_bad_input_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["smoke", "grpo", "--inject", "bitflip"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert (
        err.strip()
        == "rocmstack: error: --inject 'bitflip' is not one of skip-sync, stale-weights, zero-reward, nan-loss, "
        "logprob-mismatch"
    )
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--rollout", "sglang", "--placement", "split"],
            "--rollout sglang with --placement split is not supported: SGLang's weight broadcast "
            "(update_weights_from_distributed) needs two GPUs and has not been proven on them "
            "(use --placement colocated, or --rollout vllm for a split run)",
        ),
        (
            ["--inject", "logprob-mismatch"],
            "--inject logprob-mismatch needs an engine rollout (it runs the engine in float16) "
            "(add --rollout vllm)",
        ),
        (["--rollout", "vllm", "--logprob-bar", "0"], "--logprob-bar must be > 0, got 0.0"),
        (["--rollout", "ray"], "--rollout 'ray' is not one of reference, vllm, sglang"),
    ],
)
def test_engine_rollout_input_is_checked_in_one_line(capsys, args, line):
    with pytest.raises(SystemExit) as exc:
        main(["smoke", "grpo", "--device", "cpu", *args])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.strip() == f"rocmstack: error: {line}"


def test_a_report_path_that_is_a_file_is_refused_before_the_job(capsys, tmp_path):
    target = tmp_path / "report"
    target.write_text("not a folder\n")
    with pytest.raises(SystemExit) as exc:
        main(["smoke", "grpo", "--device", "cpu", "--output", str(target)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"rocmstack: error: --output '{target}': exists and is not a folder")
    assert target.read_text() == "not a folder\n"


def test_the_command_module_imports_no_heavy_dependency():
    import subprocess
    import sys

    code = (
        "import sys, rocmstack.commands.smoke;"
        " print(sorted(m for m in ('torch', 'ray', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--rollout", "sglang"],
            "--rollout sglang needs a GPU: SGLang has no CPU engine (use --rollout vllm on CPU)",
        ),
        (["--rollout", "vllm"], "--rollout vllm: vllm is not installed in this Python"),
    ],
)
def test_an_engine_rollout_that_cannot_run_here_is_one_line_before_ray_starts(capsys, args, line):
    import importlib.util

    if args[1] == "vllm" and importlib.util.find_spec("vllm") is not None:
        pytest.skip("this Python has vLLM: the not-installed line cannot happen")
    with pytest.raises(SystemExit) as exc:
        main(["smoke", "grpo", "--device", "cpu", *args])
    err = capsys.readouterr().err
    (last,) = [ln for ln in err.splitlines() if ln.startswith("rocmstack: error:")]
    assert exc.value.code == 1 and last.startswith(f"rocmstack: error: {line}")
    assert "Traceback" not in err and "ray" not in err.lower()


def test_the_verdict_says_tokens_per_second_on_the_cpu(capsys):
    from rocmstack.commands.smoke import _print_verdict

    summary = {
        "placement": "colocated",
        "device": "cpu",
        "dtype": "float32",
        "shape": "tiny",
        "params": 1000,
        "engine": "reference",
        "rollout_dtype": "float32",
        "steps": 2,
        "final": {
            "reward_first_window": 0.1,
            "reward_last_window": 0.2,
            "tokens_per_gpu_per_sec_avg": 1234.0,
            "sync_bytes": 1e6,
            "sync_gb_per_s_avg": 1.0,
        },
        "time_to_verdict_s": 3.0,
        "ray_init_s": 1.0,
        "model_init_s": 0.5,
        "criteria": [],
        "inject": None,
        "passed": True,
        "failed": [],
    }
    _print_verdict(summary)
    cpu = capsys.readouterr().out
    assert "1,234 tokens/s;" in cpu and "tokens/GPU/s" not in cpu
    _print_verdict({**summary, "device": "cuda"})
    assert "1,234 tokens/GPU/s;" in capsys.readouterr().out


def test_engine_is_an_old_spelling_of_decoder_with_a_note(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["smoke", "grpo", "--device", "cpu", "--engine", "bogus"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[0] == "note: --engine is deprecated; use --decoder"
    assert "--decoder 'bogus' is not one of auto, reference, kvcache" in err
