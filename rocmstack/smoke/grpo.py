"""GRPO as pure tensor functions: advantages, clipped policy loss, k3 KL, token-mean aggregation.

Formulas follow verl ``verl/trainer/ppo/core_algos.py`` (``compute_grpo_outcome_advantage``,
``compute_policy_loss`` "vanilla", ``kl_penalty`` "low_var_kl", ``agg_loss`` "token-mean") and the DAPO
paper (arXiv:2503.14476, eq. 10: clip-higher with separate eps_low / eps_high). The unit tests pin each
function to hand-worked numbers derived from those sources.

Shapes: ``[B, N]`` for per-token tensors (B responses of N tokens), ``mask`` is 1 for response tokens
that count (up to and including EOS) and 0 for padding after it.
"""

from __future__ import annotations

import torch

# verl's default epsilon in the std denominator (TRL uses 1e-4).
ADV_EPS = 1e-6


def group_advantages(rewards: torch.Tensor, group_size: int, *, eps: float = ADV_EPS) -> torch.Tensor:
    """Group-normalised outcome advantages, one per response: (r - mean_g) / (std_g + eps).

    ``rewards`` is ``[B]`` with the G responses of one prompt adjacent. std is the unbiased (Bessel) one,
    as ``torch.std`` in verl and TRL; a group of identical rewards gets advantage 0.
    """
    if rewards.dim() != 1 or rewards.numel() % group_size:
        raise ValueError(f"rewards must be [B] with B a multiple of group_size={group_size}")
    grouped = rewards.float().view(-1, group_size)
    mean = grouped.mean(dim=1, keepdim=True)
    std = grouped.std(dim=1, keepdim=True) if group_size > 1 else torch.ones_like(mean)
    mean = mean if group_size > 1 else torch.zeros_like(mean)  # verl: a singleton group is left as is
    return ((grouped - mean) / (std + eps)).view(-1)


def zero_std_fraction(rewards: torch.Tensor, group_size: int) -> float:
    """Fraction of groups whose rewards are all equal (they carry no learning signal)."""
    grouped = rewards.float().view(-1, group_size)
    return float((grouped.max(dim=1).values == grouped.min(dim=1).values).float().mean())


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Token-mean aggregation: sum over every unmasked token of the batch / their count (verl token-mean)."""
    mask = mask.to(values.dtype)
    return (values * mask).sum() / mask.sum().clamp_min(1.0)


def clipped_policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO/GRPO clipped surrogate with clip-higher; returns (token-mean loss, clip fraction).

    per token: -min(rho * A, clip(rho, 1 - eps_low, 1 + eps_high) * A), rho = exp(logp - old_logp).
    ``advantages`` is ``[B]`` (one per response, broadcast to its tokens) or ``[B, N]``.
    Clip fraction: share of tokens where the clipped term is the one taken (verl ``pg_clipfrac``).
    """
    adv = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
    ratio = torch.exp(logp - old_logp)
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)
    per_token = torch.maximum(unclipped, clipped)
    clip_frac = masked_mean((clipped > unclipped).float(), mask)
    return masked_mean(per_token, mask), clip_frac.detach()


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(pi || ref): exp(ref - logp) - (ref - logp) - 1 (>= 0, unbiased).

    Schulman, "Approximating KL divergence" (2020); verl ``kl_penalty(..., "low_var_kl")`` (which also
    clamps to [-10, 10]; we keep the raw value so a blow-up stays visible).
    """
    delta = ref_logp - logp
    return torch.exp(delta) - delta - 1.0


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the categorical distribution at each position: logsumexp(z) - sum softmax(z) * z."""
    logits = logits.float()
    probs = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (probs * logits).sum(dim=-1)


def gather_logprobs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[token] at each position, in fp32."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
