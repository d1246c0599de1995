"""The engines' bench paths (gpu/engine_bench.py) and the bench's launcher (bench/adapters.py): availability,
the commands they run, the child's summary, the driver index.

The engines themselves run in tests/integration/test_bench_engine.py (real vLLM CPU engine)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocmstack.bench import engine_child
from rocmstack.bench.adapters import engine_available, run_engine
from rocmstack.gpu.driver_memory import PeakSampler, driver_index
from rocmstack.gpu.engine_bench import (
    EXTRA_PAIRS,
    RESULT_MARK,
    VISIBILITY_MARK,
    EngineRequest,
    cpu_kv_cache_bytes,
    failed,
    parse_vllm_answer,
    run_sglang,
    sglang_command,
    summarise,
    time_pairs,
    vllm_env,
)
from rocmstack.gpu.model_dir import write_model_dir
from rocmstack.gpu.shapes import BUILTIN_SHAPES
from rocmstack.platform.tools import ToolRun


def request(**kw) -> EngineRequest:
    base = {
        "config": BUILTIN_SHAPES["qwen3-0.6b"],
        "batches": (1, 64, 256),
        "prompt_len": 128,
        "new_tokens": 256,
        "dtype": "bfloat16",
        "device": "cpu",
        "backend": "cpu",
    }
    return EngineRequest(**(base | kw))


def test_absent_engines_skip_with_the_reason():
    # Neither engine is installed in the test environment: the real availability check says so.
    for engine in ("vllm", "sglang"):
        reason = engine_available(engine)
        assert reason and "not installed" in reason
        run = run_engine(engine, request(batches=(2,), prompt_len=8, new_tokens=4, timeout_s=5))
        assert run.status == "skip" and run.reason == reason and run.batches == ()


def test_sglang_runs_every_batch_in_one_benchmark(tmp_path):
    model = write_model_dir(BUILTIN_SHAPES["qwen3-8b"], tmp_path / "m", "bfloat16")
    cmd = sglang_command(model, request(), tmp_path / "r.jsonl")
    assert cmd[1] == "-m" and cmd[2] in ("sglang.benchmark.one_batch", "sglang.bench_one_batch")
    i = cmd.index("--batch-size")
    assert cmd[i + 1 : i + 4] == ["1", "64", "256"] and cmd[i + 4].startswith("--")
    assert cmd[cmd.index("--load-format") + 1] == "dummy"
    assert cmd[cmd.index("--result-filename") + 1] == str(tmp_path / "r.jsonl")
    assert "--tokenizer-path" not in cmd


# One line of sglang.benchmark.one_batch's --result-filename, with the keys latency_test_run_once writes in
# SGLang 0.5.17 (python/sglang/benchmark/one_batch.py: measurement_results).
def one_batch_line(batch: int) -> str:
    import json

    return json.dumps({
        "run_name": "default", "batch_size": batch, "input_len": 128, "output_len": 256,
        "prefill_latency": 0.05 * batch, "prefill_throughput": 128 * batch / (0.05 * batch),
        "median_decode_latency": 0.006, "median_decode_throughput": batch / 0.006,
        "total_latency": 0.05 * batch + 255 * 0.006, "overall_throughput": 1.0,
    })  # fmt: skip


def sglang_launch(batches: tuple[int, ...], seen: list[list[str]]):
    """Stands in for the benchmark's process: writes its result lines for `batches` where it was told to."""

    def launch(cmd: list[str], env: object) -> ToolRun:
        seen.append(cmd)
        out = Path(cmd[cmd.index("--result-filename") + 1])
        out.write_text("".join(one_batch_line(b) + "\n" for b in batches))
        log = "skipping (256, 128, 256) due to max batch size limit" if 256 not in batches else "done"
        return ToolRun(argv=tuple(cmd), returncode=0, stdout="", stderr=log, seconds=97.5)

    return launch


def test_sglang_rows_become_batches_and_a_tokenizer_is_made_for_its_benchmark(tmp_path):
    seen: list[list[str]] = []
    run = run_sglang(request(), tmp_path, sglang_launch((1, 64, 256), seen))
    assert run.status == "pass" and run.engine_starts == 1
    assert run.wall_s == 97.5  # the benchmark does not time its start: its whole process is the cost shown
    assert [(b.batch, b.step_s) for b in run.batches] == [(1, 0.006), (64, 0.006), (256, 0.006)]
    assert run.batch(64).prefill_s == pytest.approx(3.2) and run.batch(64).total_s == pytest.approx(
        3.2 + 1.53
    )
    # The benchmark loads a tokenizer even for random ids: a local one is written beside the config.
    model = Path(seen[0][seen[0].index("--model-path") + 1])
    assert (model / "tokenizer.json").is_file() and (model / "config.json").is_file()


def test_a_batch_the_sglang_benchmark_skipped_is_an_error_not_a_missing_row(tmp_path):
    run = run_sglang(request(), tmp_path, sglang_launch((1, 64), []))
    assert run.status == "error" and "without a result for batch 256" in (run.reason or "")
    assert "max batch size limit" in (run.reason or "")  # its own line says why


def test_decode_step_is_the_difference_of_two_output_lengths():
    # prefill 0.1 s; 256 tokens = prefill + 255 steps of 6 ms
    s = summarise({"batch": 64, "t1_s": [0.1, 0.2, 0.1], "tn_s": [1.63, 1.63, 1.70]}, 256)
    assert s["prefill_s"] == 0.1 and s["total_s"] == 1.63
    assert s["step_s"] == pytest.approx(0.006)
    assert s["batch_latency_mean_s"] == pytest.approx((1.63 + 1.63 + 1.70) / 3)
    assert "step_s" not in summarise({"batch": 1, "t1_s": [0.1], "tn_s": [0.1]}, 1)


def test_a_decode_no_longer_than_its_prefill_is_not_measured_never_a_figure():
    # The figures of a CI run beside the unit tests (vLLM CPU, batch 1, 16 new tokens): the 1-token calls'
    # median was longer than the 16-token calls'. A clamped difference gave a decode rate of 15 / 1e-9 tok/s.
    s = summarise({"batch": 1, "t1_s": [0.107, 0.112, 0.098], "tn_s": [0.045, 0.051, 0.044]}, 16)
    assert "step_s" not in s and "decode_s" not in s
    assert s["unmeasured"].startswith("decode not measured: 16 new tokens took 0.0450 s")
    assert (
        "prefill alone (0.1070 s; medians of 3 runs)" in s["unmeasured"]
        and "quiet machine" in s["unmeasured"]
    )
    # equal medians are no decode time either
    assert "unmeasured" in summarise({"batch": 1, "t1_s": [0.05], "tn_s": [0.05]}, 16)


def clock(times: list[float]):
    """A timed call that returns the next of ``times``; the list it took them from shows how many ran."""
    it = iter(times)
    return lambda: next(it)


def test_pairs_are_timed_again_while_the_machine_is_too_busy_to_order_them():
    # Two noisy 1-token calls first, then quiet ones: pairs are added until the N-token median is the longer.
    got = time_pairs(clock([0.3, 0.3, 0.01, 0.01, 0.01]), clock([0.05] * 5), iters=3, new_tokens=16)
    assert got == {"t1_s": [0.3, 0.3, 0.01, 0.01, 0.01], "tn_s": [0.05] * 5}
    assert summarise({"batch": 1, **got}, 16)["step_s"] == pytest.approx(0.04 / 15)
    # A machine that never quiets: iters + EXTRA_PAIRS pairs, then the row says it was not measured.
    n = 3 + EXTRA_PAIRS
    got = time_pairs(clock([0.3] * n), clock([0.05] * n), iters=3, new_tokens=16)
    assert len(got["t1_s"]) == len(got["tn_s"]) == n
    assert "unmeasured" in summarise({"batch": 1, **got}, 16)
    # One new token has no decode: the pairs asked for, no more.
    assert len(time_pairs(clock([0.3] * 3), clock([0.05] * 3), iters=3, new_tokens=1)["t1_s"]) == 3


def test_the_childs_answer_is_the_marked_line():
    assert parse_vllm_answer("INFO noise\n" + RESULT_MARK + '{"rows": []}\nmore noise\n') == {"rows": []}
    assert parse_vllm_answer("Traceback ...\nModuleNotFoundError: xgrammar\n") is None


def test_cpu_engine_runs_in_process_with_a_cache_the_size_of_the_bench(monkeypatch):
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    assert vllm_env("cpu")["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in vllm_env("cuda")  # GPU: vLLM's own engine process
    small = cpu_kv_cache_bytes(request(batches=(1,), prompt_len=8, new_tokens=4))
    assert small == 64 << 20
    # qwen3-0.6b: 28 layers x 8 kv heads x 128 x 2 (k, v) x 2 bytes = 114,688 bytes a token
    big = cpu_kv_cache_bytes(request())
    assert big == 2 * 256 * (128 + 256 + 16) * 114_688


@pytest.mark.parametrize(
    ("env", "index"),
    [
        ({}, 0),
        ({"CUDA_VISIBLE_DEVICES": "3,1"}, 3),
        ({"HIP_VISIBLE_DEVICES": "5"}, 5),
        ({"CUDA_VISIBLE_DEVICES": "GPU-8d3f"}, None),
    ],
)
def test_driver_index_of_the_engines_device(env, index):
    assert driver_index(env) == index


def test_peak_sampler_reports_what_the_run_added():
    readings = iter([10, 10, 50, 30] + [30] * 10_000)
    with PeakSampler(lambda: next(readings), interval_s=0.001) as sampler:
        import time

        time.sleep(0.05)
    assert sampler.baseline == 10 and sampler.peak_bytes == 40


def test_an_engine_child_that_fails_on_a_gpu_says_what_its_process_saw(tmp_path, monkeypatch, capsys):
    # This interpreter has no vLLM and torch counts no GPU: the child fails, and says so before the traceback.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    req = tmp_path / "request.json"
    req.write_text('{"device": "cuda", "batches": [1]}')
    with pytest.raises(ImportError):
        engine_child.main(["engine_child", str(req)])
    line = capsys.readouterr().out.strip()
    assert line == f"{VISIBILITY_MARK} the engine's process: 0 GPU(s) visible, CUDA_VISIBLE_DEVICES='1'"


def test_a_failed_engine_run_names_what_its_process_saw_first():
    # The tail of a vLLM start whose process was given a mask that names no GPU of the node.
    out = f"{VISIBILITY_MARK} the engine's process: 0 GPU(s) visible, CUDA_VISIBLE_DEVICES='1'\n"
    err = "Traceback (most recent call last):\nRuntimeError: No CUDA GPUs are available\n"
    run = ToolRun(argv=("python3",), returncode=1, stdout=out, stderr=err, seconds=9.0)
    row = failed("vllm", ["python3"], run, "(engine start or run failed)")
    assert row.reason is not None and row.reason.startswith(
        "vllm exited 1 (engine start or run failed) (the engine's process: 0 GPU(s) visible, "
        "CUDA_VISIBLE_DEVICES='1'): "
    )
    assert row.reason.endswith("RuntimeError: No CUDA GPUs are available")
