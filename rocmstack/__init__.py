"""rocmstack: recipes -> deterministic Dockerfiles -> builds -> bring-up validation for ROCm RL stacks."""

__version__ = "0.1.0"
