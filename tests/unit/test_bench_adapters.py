"""Parsers of vLLM's and SGLang's own benchmarks, on output published by their users (sources cited)."""

from __future__ import annotations

import pytest

from rocmstack.bench.adapters import (
    ParseError,
    engine_available,
    parse_sglang_one_batch,
    parse_vllm_throughput,
    run_engine,
    sglang_command,
    vllm_command,
    write_model_dir,
)
from rocmstack.gpu.shapes import BUILTIN_SHAPES

# vllm-project/vllm pull request #8914 (https://github.com/vllm-project/vllm/pull/8914), description:
# benchmark_throughput.py output before and after the change that split total and output tokens.
VLLM_BEFORE_8914 = "Throughput: 81.74 requests/s, 20926.37 tokens/s\n"
VLLM_AFTER_8914 = "Throughput: 89.27 requests/s, 22853.37 total tokens/s, 11426.69 output tokens/s\n"

# sgl-project/sglang pull request #30147 (https://github.com/sgl-project/sglang/pull/30147), a comment
# with `python -m sglang.bench_one_batch` output for Qwen3-0.6B, batch 1: warmup block, then benchmark.
SGLANG_PR_30147 = """\
Warmup ...
Prefill. latency: 0.02265 s, throughput:   2648.96 token/s
Decode 0. Batch size: 1, latency: 0.00637 s, throughput:    157.09 token/s
Decode 1. Batch size: 1, latency: 0.00595 s, throughput:    167.96 token/s
Decode 2. Batch size: 1, latency: 0.00585 s, throughput:    170.84 token/s
Decode 3. Batch size: 1, latency: 0.00602 s, throughput:    166.17 token/s
Decode 4. Batch size: 1, latency: 0.00572 s, throughput:    174.91 token/s
Decode.  median latency: 0.00585 s, median throughput:    170.84 token/s
Total. latency:  0.076 s, throughput:    923.17 token/s
Benchmark ...
Prefill. latency: 0.01014 s, throughput:   5916.43 token/s
Decode 0. Batch size: 1, latency: 0.00572 s, throughput:    174.85 token/s
Decode 1. Batch size: 1, latency: 0.00569 s, throughput:    175.87 token/s
Decode 2. Batch size: 1, latency: 0.00568 s, throughput:    176.18 token/s
Decode 3. Batch size: 1, latency: 0.00568 s, throughput:    175.91 token/s
Decode 4. Batch size: 1, latency: 0.00589 s, throughput:    169.70 token/s
Decode.  median latency: 0.00572 s, median throughput:    174.85 token/s
Total. latency:  0.062 s, throughput:   1122.76 token/s
"""


def test_vllm_both_historic_formats():
    new = parse_vllm_throughput("INFO ... warmup\n" + VLLM_AFTER_8914)
    assert (new.requests_per_s, new.total_tokens_per_s, new.output_tokens_per_s) == (
        89.27,
        22853.37,
        11426.69,
    )
    old = parse_vllm_throughput(VLLM_BEFORE_8914)
    assert old.total_tokens_per_s == 20926.37 and old.output_tokens_per_s is None


def test_sglang_reads_the_benchmark_block_not_the_warmup():
    s = parse_sglang_one_batch(SGLANG_PR_30147)
    assert s.prefill_latency_s == 0.01014 and s.prefill_tokens_per_s == 5916.43
    assert s.decode_median_latency_s == 0.00572 and s.decode_median_tokens_per_s == 174.85
    assert s.total_latency_s == 0.062 and s.total_tokens_per_s == 1122.76


@pytest.mark.parametrize(
    "text", ["", "Traceback (most recent call last):\n  RuntimeError: HIP out of memory\n"]
)
def test_missing_summaries_raise(text):
    with pytest.raises(ParseError):
        parse_vllm_throughput(text)
    with pytest.raises(ParseError):
        parse_sglang_one_batch(text)


def test_absent_engines_skip_with_the_reason():
    # Neither engine is installed in the test environment: the real availability check says so.
    for engine in ("vllm", "sglang"):
        reason = engine_available(engine)
        assert reason and "not installed" in reason
        run = run_engine(
            engine,
            BUILTIN_SHAPES["qwen3-0.6b"],
            batch=2,
            prompt_len=8,
            new_tokens=4,
            tokenizer=None,
            timeout_s=5,
        )
        assert run.status == "skip" and run.reason == reason and run.tokens_per_s is None


def test_commands_use_dummy_weights_and_the_bench_shape(tmp_path):
    model = write_model_dir(BUILTIN_SHAPES["qwen3-8b"], tmp_path / "m", "bfloat16")
    assert (model / "config.json").read_text().count("Qwen3ForCausalLM") == 1
    v = vllm_command(model, batch=64, prompt_len=128, new_tokens=256, tokenizer="/tok")
    assert v[1:3] == ["bench", "throughput"]
    assert v[v.index("--load-format") + 1] == "dummy" and v[v.index("--num-prompts") + 1] == "64"
    assert v[v.index("--tokenizer") + 1] == "/tok"
    s = sglang_command(model, batch=64, prompt_len=128, new_tokens=256, tokenizer=None)
    assert s[1:3] == ["-m", "sglang.bench_one_batch"] and s[s.index("--batch-size") + 1] == "64"
    assert "--tokenizer-path" not in s
