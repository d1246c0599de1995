"""GRPO pure functions against hand-worked cases.

Sources of the formulas (verl is not importable in CI, so each case is worked by hand from them):
- advantages: verl verl/trainer/ppo/core_algos.py ``compute_grpo_outcome_advantage`` —
  (r - mean) / (torch.std + 1e-6), unbiased std, singleton group: mean 0, std 1.
- clipped loss: verl ``compute_policy_loss`` (vanilla) / DAPO arXiv:2503.14476 eq. 10 —
  max(-A rho, -A clip(rho, 1 - eps_low, 1 + eps_high)); clip fraction = share where the clipped term wins.
- k3: Schulman 2020 "Approximating KL divergence"; verl ``kl_penalty`` "low_var_kl": exp(d) - d - 1, d = ref - logp.
- token-mean: verl ``agg_loss(loss_agg_mode="token-mean")`` = masked_mean over all tokens of the batch.
"""

from __future__ import annotations

import math

import pytest
import torch

from rocmstack.smoke import grpo


def test_group_advantages_hand_worked():
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    adv = grpo.group_advantages(rewards, 4)
    # group 1: mean 0.25, unbiased std sqrt((0.75^2 + 3 * 0.25^2) / 3) = 0.5
    expected = torch.tensor([1.5, -0.5, -0.5, -0.5, 0.0, 0.0, 0.0, 0.0]) * (0.5 / (0.5 + 1e-6))
    torch.testing.assert_close(adv, expected)


def test_group_advantages_pair_uses_bessel_std():
    adv = grpo.group_advantages(torch.tensor([0.0, 1.0]), 2)
    # std of {0, 1} with Bessel's correction is sqrt(0.5); the population std (0.5) would give +-1.
    torch.testing.assert_close(adv, torch.tensor([-1.0, 1.0]) * 0.5 / (math.sqrt(0.5) + 1e-6))


def test_group_advantages_rejects_ragged_batch():
    with pytest.raises(ValueError, match="multiple of group_size"):
        grpo.group_advantages(torch.zeros(5), 4)


def test_zero_std_fraction():
    rewards = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 0.0])
    assert grpo.zero_std_fraction(rewards, 2) == pytest.approx(2 / 3)


def test_clipped_policy_loss_hand_worked():
    # rho: 1.5, 0.5, 0.5, 1.5, 1.25 with A = +1, +1, -1, -1, +1; eps_low 0.2, eps_high 0.28
    rho = torch.tensor([[1.5, 0.5, 0.5, 1.5, 1.25]])
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0, 1.0]])
    old = torch.zeros_like(rho)
    mask = torch.ones_like(rho)
    loss, clip = grpo.clipped_policy_loss(rho.log(), old, adv, mask, eps_low=0.2, eps_high=0.28)
    # per token: max(-1.5, -1.28) = -1.28 (clipped); max(-0.5, -0.8) = -0.5; max(0.5, 0.8) = 0.8 (clipped);
    # max(1.5, 1.28) = 1.5; 1.25 is inside [0.8, 1.28]: -1.25
    per_token = [-1.28, -0.5, 0.8, 1.5, -1.25]
    assert float(loss) == pytest.approx(sum(per_token) / 5, abs=1e-6)
    assert float(clip) == pytest.approx(2 / 5)


def test_clip_higher_differs_from_symmetric_clip():
    logp = torch.tensor([[math.log(1.25)]])
    zero, one = torch.zeros(1, 1), torch.ones(1, 1)
    sym, clip_sym = grpo.clipped_policy_loss(logp, zero, one[0], one, eps_low=0.2, eps_high=0.2)
    high, clip_high = grpo.clipped_policy_loss(logp, zero, one[0], one, eps_low=0.2, eps_high=0.28)
    assert float(sym) == pytest.approx(-1.2) and float(clip_sym) == 1.0
    assert float(high) == pytest.approx(-1.25) and float(clip_high) == 0.0


def test_policy_loss_masks_padding_and_gradient_sign():
    logp = torch.zeros(1, 3, requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    loss, _ = grpo.clipped_policy_loss(logp, torch.zeros(1, 3), torch.tensor([2.0]), mask)
    loss.backward()
    # d/dlogp of -A * rho / 2 tokens at rho = 1: -A / 2 on real tokens, 0 on padding
    torch.testing.assert_close(logp.grad, torch.tensor([[-1.0, -1.0, 0.0]]))


def test_k3_kl_hand_worked_and_zero_at_equal():
    logp = torch.tensor([math.log(0.5), math.log(0.3)])
    ref = torch.tensor([math.log(0.25), math.log(0.3)])
    kl = grpo.k3_kl(logp, ref)
    assert float(kl[0]) == pytest.approx(0.5 + math.log(2) - 1)
    assert float(kl[1]) == 0.0


def test_k3_kl_is_unbiased_for_exact_kl():
    p = torch.tensor([0.6, 0.3, 0.1])
    q = torch.tensor([0.2, 0.5, 0.3])
    expected = float((p * (p / q).log()).sum())
    assert float((p * grpo.k3_kl(p.log(), q.log())).sum()) == pytest.approx(expected, rel=1e-5)


def test_token_mean_counts_tokens_not_sequences():
    values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert float(grpo.masked_mean(values, mask)) == pytest.approx(7 / 3)  # seq-mean would be 2.75


def test_entropy_and_gather_logprobs():
    logits = torch.zeros(2, 16)
    torch.testing.assert_close(grpo.token_entropy(logits), torch.full((2,), math.log(16)))
    logits = torch.tensor([[0.0, math.log(3.0)]])
    torch.testing.assert_close(
        grpo.gather_logprobs(logits, torch.tensor([1])), torch.tensor([math.log(0.75)])
    )
