"""Run one engine in a fresh process and print its peak resident memory above the idle baseline (JSON).

Used by test_gpu_memory.py: a fresh process, because the peak (VmHWM) only ever grows.
"""

from __future__ import annotations

import json
import sys


def _status(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def main(args: dict) -> dict:
    import torch

    from rocmstack.gpu.engine import ReferenceEngine

    dtype = getattr(torch, args["dtype"])
    batch, prompt, new = args["batch"], args["prompt_len"], args["new_tokens"]
    # Load the libraries and warm the kernels on a one-layer model, so the baseline holds them.
    warm = ReferenceEngine(
        dict(args["config"], num_hidden_layers=1), device="cpu", dtype=dtype, max_seq_len=8
    )
    warm.generate(torch.zeros(1, 2, dtype=torch.long), 2)
    del warm
    if args["engine"] == "hf":
        from transformers import Qwen3Config, Qwen3ForCausalLM  # imported before the baseline
    base = _status("VmRSS:")
    ids = torch.zeros(batch, prompt, dtype=torch.long)
    if args["engine"] == "reference":
        engine = ReferenceEngine(
            args["config"], device="cpu", dtype=dtype, max_batch=batch, max_seq_len=prompt + new
        )
        engine.generate(ids, new, top_p=args["top_p"])
    else:
        fields = {k: v for k, v in args["config"].items() if k != "model_type"}
        model = Qwen3ForCausalLM._from_config(Qwen3Config(**fields), dtype=dtype).eval()
        with torch.no_grad():
            model(ids, use_cache=True)
            model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, pad_token_id=0,
                eos_token_id=None, do_sample=True, top_k=0, top_p=args["top_p"],
            )  # fmt: skip
    return {"peak_bytes": _status("VmHWM:") - base}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
