"""Calibrate the GRPO smoke task in one process (no Ray): reward curves per setting and seed.

Same worker classes and GRPO functions as `rocmstack smoke grpo`; the weight sync is a direct
state-dict copy. Usage: python docs/evidence/smoke-calibrate.py '{"lr": 3e-3}' [seeds] [steps]
"""

from __future__ import annotations

import json
import sys
import time

import torch

from rocmstack.smoke import grpo, task
from rocmstack.smoke.actors import RolloutWorker, TrainerWorker
from rocmstack.smoke.config import SmokeOptions, model_config


def run(overrides: dict, seed: int, steps: int) -> list[float]:
    opts = SmokeOptions(**dict(overrides, seed=seed, steps=steps, device="cpu", engine="auto")).validated()
    shape = opts.shape if opts.shape != "auto" else "tiny"
    payload = dict(opts.to_dict(), threads=2)
    p = opts.num_digits + 2
    cfg = model_config(shape, vocab_size=task.VOCAB_SIZE, max_positions=64)
    trainer = TrainerWorker(cfg, payload, "cpu", "float32")
    rollout = RolloutWorker(cfg, payload, "cpu", "float32")
    rollout.engine.load_hf_state_dict(trainer.model.state_dict())
    gen = torch.Generator().manual_seed(seed)
    curve = []
    for _ in range(steps):
        prompts = task.make_prompts(opts.prompts_per_step, opts.num_digits, gen).repeat_interleave(opts.group_size, 0)
        out = rollout.generate(prompts)
        mask = task.response_mask(out["tokens"])
        rewards = task.rewards(prompts, out["tokens"])
        seqs = torch.cat([prompts, out["tokens"]], 1)
        lp = trainer.compute_logprobs(seqs, p, mask)
        batch = {"seqs": seqs, "mask": mask, "advantages": grpo.group_advantages(rewards, opts.group_size),
                 "old_logp": lp["old_logp"], "ref_logp": lp["ref_logp"]}
        trainer.train(batch, p, None)
        rollout.engine.load_hf_state_dict(trainer.model.state_dict())
        curve.append(float(rewards.mean()))
    return curve


if __name__ == "__main__":
    overrides = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    seeds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    for seed in range(seeds):
        t = time.perf_counter()
        c = run(overrides, seed, steps)
        w = min(10, steps // 2)
        first, last = sum(c[:w]) / w, sum(c[-w:]) / w
        print(json.dumps({"overrides": overrides, "seed": seed, "first10": round(first, 3), "last10": round(last, 3),
                          "rise": round(last - first, 3), "max": round(max(c), 3),
                          "seconds": round(time.perf_counter() - t, 1), "curve": [round(x, 2) for x in c]}), flush=True)
