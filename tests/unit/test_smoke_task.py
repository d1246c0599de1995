from __future__ import annotations

import pytest
import torch

from rocmstack.smoke import task


def test_prompts_layout():
    prompts = task.make_prompts(32, 4, torch.Generator().manual_seed(0))
    assert prompts.shape == (32, 6)
    assert (prompts[:, 0] == task.BOS).all() and (prompts[:, -1] == task.SEP).all()
    digits = prompts[:, 1:-1]
    assert digits.min() >= task.DIGIT0 and digits.max() < task.DIGIT0 + 10


def test_response_mask_keeps_first_eos_and_drops_the_rest():
    responses = torch.tensor([[7, task.EOS, 9], [task.EOS, task.EOS, 5], [5, 6, 7]])
    torch.testing.assert_close(
        task.response_mask(responses), torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    )


def test_reward_is_first_digit_copy():
    prompts = torch.tensor([[task.BOS, 7, 8, task.SEP]] * 3)
    responses = torch.tensor([[7, task.EOS], [8, task.EOS], [task.EOS, 7]])
    torch.testing.assert_close(task.rewards(prompts, responses), torch.tensor([1.0, 0.0, 0.0]))


def test_a_prompt_blind_policy_cannot_beat_the_ceiling():
    # Every constant answer scores ~0.1 on random prompts: reward above that needs attention to the prompt.
    prompts = task.make_prompts(20000, 4, torch.Generator().manual_seed(1))
    best = max(
        float(task.rewards(prompts, torch.full((20000, 1), tok)).mean()) for tok in range(task.VOCAB_SIZE)
    )
    assert best == pytest.approx(task.BLIND_CEILING, abs=0.01)


def test_probe_is_fixed_and_answers_correctly():
    a, b = task.probe_batch(4), task.probe_batch(4)
    assert torch.equal(a, b)
    assert torch.equal(a[:, 6], a[:, 1]) and (a[:, 7] == task.EOS).all()
