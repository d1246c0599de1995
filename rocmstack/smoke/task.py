"""The toy task: "copy the first prompt digit", with a fixed token layout and a programmatic reward.

Prompt ``<bos> d1 d2 ... dk <sep>``; the answer is ``d1`` followed by ``<eos>``. A policy that ignores the
prompt can score at most 0.1 (always say the same digit), so a reward well above that proves the model
attends back to position 1 through its (KV-cached) attention. Reward: 1.0 if the first response token is
``d1``, else 0.0.
"""

from __future__ import annotations

import torch

SPECIALS = ("<pad>", "<bos>", "<sep>", "<eos>")  # ids 0-3; the digits 0-9 follow them
# Embedding rows are padded to a multiple of 8 (as real checkpoints do); the extra ids are never in a
# prompt, but the random model can sample them and gets no reward for them.
VOCAB_SIZE = 16
PAD, BOS, SEP, EOS = range(4)
DIGIT0 = len(SPECIALS)
# The policy-blind ceiling: always emitting one digit is right 1 time in 10.
BLIND_CEILING = 0.1


def make_prompts(num_prompts: int, num_digits: int, generator: torch.Generator) -> torch.Tensor:
    """``[num_prompts, num_digits + 2]`` token ids: <bos>, random digits, <sep>."""
    digits = torch.randint(0, 10, (num_prompts, num_digits), generator=generator) + DIGIT0
    bos = torch.full((num_prompts, 1), BOS)
    sep = torch.full((num_prompts, 1), SEP)
    return torch.cat([bos, digits, sep], dim=1)


def response_mask(responses: torch.Tensor) -> torch.Tensor:
    """1 for each response token up to and including the first <eos>, 0 after it."""
    is_eos = (responses == EOS).int()
    after_eos = (torch.cumsum(is_eos, dim=1) - is_eos) > 0
    return (~after_eos).to(torch.float32)


def rewards(prompts: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
    """1.0 where the first response token equals the first prompt digit, else 0.0; ``[B]``."""
    return (responses[:, 0] == prompts[:, 1]).to(torch.float32)


def probe_batch(num_digits: int) -> torch.Tensor:
    """A fixed set of full sequences (prompt + correct answer) the sync canary scores on both sides."""
    gen = torch.Generator().manual_seed(12345)
    prompts = make_prompts(4, num_digits, gen)
    answer = torch.stack([prompts[:, 1], torch.full((4,), EOS)], dim=1)
    return torch.cat([prompts, answer], dim=1)
