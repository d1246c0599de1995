"""The engine side of `bench rollout --rollout vllm`: one vLLM engine, every batch, timed in one process.

Run as ``python -m rocmstack.bench.engine_child REQUEST.json`` by ``gpu/engine_bench.run_vllm`` (own
process group, time limit). It builds one offline ``vllm.LLM`` with dummy weights from a config-only model folder,
then for each batch times ``generate`` at 1 and N new tokens (``ignore_eos``, no prefix cache, the
reference engine's prompts), so that prefill = t(1) and one decode step = (t(N) - t(1)) / (N - 1): the
per-call overheads of the offline API cancel out. t(N) is timed as ``vllm bench latency`` times a batch
(one ``generate`` of the whole batch, temperature/top-p as given, detokenising when there is a tokenizer),
which also turns the prefix cache off, so its "Avg latency" is the same figure. On a GPU, ``max_num_seqs`` =
the largest batch makes vLLM capture decode graphs up to twice that (capped at 512), so every batch decodes
in a graph. The answer is one marked JSON line on stdout.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from rocmstack.gpu.engine_bench import RESULT_MARK, VISIBILITY_MARK, time_pairs
from rocmstack.gpu.rollout import prompt_ids
from rocmstack.platform.masks import MASK_VARS, process_visibility

GPU_MEMORY_UTILIZATION = 0.85


def _timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run(req: dict[str, Any]) -> dict[str, Any]:
    import vllm
    from vllm import LLM, SamplingParams

    batches: list[int] = req["batches"]
    n, p = int(req["new_tokens"]), int(req["prompt_len"])
    t0 = time.perf_counter()
    llm = LLM(
        model=req["model_dir"],
        tokenizer=req.get("tokenizer"),
        skip_tokenizer_init=not req.get("tokenizer"),  # no tokenizer: token ids in and out, no detokenising
        load_format="dummy",
        dtype=req["dtype"],
        seed=int(req["seed"]),
        max_num_seqs=max(batches),
        max_model_len=p + n,
        enable_prefix_caching=False,  # repeated prompts must be prefilled every time, as `bench latency` does
        enforce_eager=req["device"] == "cpu",  # torch.compile alone takes minutes on a small CPU
        # CPU: a cache the size of the bench, not vLLM's default share of the host's memory. GPU: a share of
        # the device a little under vLLM's default (0.9+), since the bench's own process still holds a
        # context there; the cache's size does not change a decode step's time once the batch fits.
        **(
            {"kv_cache_memory_bytes": int(req["kv_cache_bytes"])}
            if req.get("kv_cache_bytes")
            else {"gpu_memory_utilization": GPU_MEMORY_UTILIZATION}
        ),
    )
    start_s = time.perf_counter() - t0

    def generate(prompts: list[dict[str, Any]], max_tokens: int) -> None:
        params = SamplingParams(
            temperature=float(req["temperature"]),
            top_p=float(req["top_p"]),
            max_tokens=max_tokens,
            ignore_eos=True,
            detokenize=bool(req.get("tokenizer")),
        )
        outs = llm.generate(prompts, params, use_tqdm=False)
        got = {len(o.outputs[0].token_ids) for o in outs}
        if got != {max_tokens}:  # a short answer would make every figure below wrong
            raise RuntimeError(f"asked for {max_tokens} tokens per sequence, got {sorted(got)}")

    rows = []
    vocab = int(req["vocab_size"])
    for batch in batches:
        ids = prompt_ids(vocab, batch, p, int(req["seed"]), "cpu").tolist()
        prompts = [{"prompt_token_ids": row} for row in ids]
        generate(prompts, 1)  # warm-up: this batch size's first scheduling, kernels, allocator
        generate(prompts, n)
        one, full = (
            partial(_timed, partial(generate, prompts, 1)),
            partial(_timed, partial(generate, prompts, n)),
        )
        pairs = time_pairs(one, full, int(req["iters"]), n)
        rows.append({"batch": batch, **pairs})
        print(f"rocmstack: {batch=} done", file=sys.stderr, flush=True)
    return {
        "engine": "vllm",
        "version": vllm.__version__,
        "engine_starts": 1,
        "start_s": start_s,
        "pid": os.getpid(),
        "rows": rows,
        # max RSS of this process, which holds the engine when it runs in-process (the CPU bench does)
        "max_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9,
    }


def _gpu_count() -> int | None:
    try:
        import torch

        return int(torch.cuda.device_count())
    except Exception:  # a broken torch is reported by the traceback itself
        return None


def main(argv: list[str]) -> int:
    req = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    try:
        result = run(req)
    except Exception:
        # An engine that finds no GPU says only that: name what hid it (nothing to add when it saw GPUs
        # and no mask was set).
        seen = None if req["device"] == "cpu" else _gpu_count()
        masked = any(os.environ.get(k) is not None for k in MASK_VARS)
        if req["device"] != "cpu" and (not seen or masked):
            print(
                f"{VISIBILITY_MARK} the engine's process: {process_visibility(os.environ, seen)}", flush=True
            )
        raise
    print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":  # vLLM may spawn its engine process: it re-imports this module
    sys.exit(main(sys.argv))
