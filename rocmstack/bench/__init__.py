"""Rollout bench: the decode hot path against the memory roofline (`rocmstack bench rollout`)."""
