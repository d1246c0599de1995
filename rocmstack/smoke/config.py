"""Options of the GRPO smoke job and its model shapes (no heavy imports: the CLI loads this)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rocmstack.errors import InputError
from rocmstack.gpu.rollout import CATALOGUE, Catalogue
from rocmstack.output import check_output_dir

PLACEMENTS = ("colocated", "split")
DEVICES = ("auto", "cuda", "cpu")


def throughput_unit(device: object) -> str:
    """The unit of a smoke's rollout throughput: per GPU on a GPU, plain tokens per second on the CPU."""
    return "tokens/s" if str(device).lower() == "cpu" else "tokens/GPU/s"


# --decoder: the reference rollout's in-process decoders. --rollout: reference (rocmstack's own engine,
# gpu/engine.py), vllm (the image's vLLM through its offline API, gpu/vllm_rollout.py), sglang (the image's
# SGLang through its offline Engine, gpu/sglang_rollout.py). Both from the catalogue, in its order.
ENGINES = ("auto", *CATALOGUE.names(served=False))
ROLLOUTS = CATALOGUE.names(option=True)
INJECTS = ("skip-sync", "stale-weights", "zero-reward", "nan-loss", "logprob-mismatch")
# The verdict criterion each injected fault must trip.
INJECT_EXPECTS = {
    "skip-sync": "sync_canary",
    "stale-weights": "sync_canary",
    "zero-reward": "rewards_rise",
    "nan-loss": "all_finite",
}
# With an engine as the rollout, the engine's own criteria (verdict.decide_engine) name the faults.
ENGINE_INJECT_EXPECTS = {
    **INJECT_EXPECTS,
    "skip-sync": "engine_weight_version",
    "stale-weights": "engine_weight_version",  # the engine skips the load
    "logprob-mismatch": "rollout_logprob_diff",  # rollout in float16, trainer fp32 + perturbed embedding
}
# The step-0 bar on mean |trainer - rollout| log-prob of the sampled tokens (slime's --ci-test bound).
LOGPROB_BAR = 0.1
# The engine smoke's model starts with larger weights than the reference smoke's (init std 0.05, not
# 0.02): a random model's logits are then spread enough that a wrong model moves log-probs well past
# LOGPROB_BAR (measured on the CPU shape: a perturbed embedding moves them by 0.35-0.41; at 0.02, by at
# most 0.14, too close to the bar to prove anything).
ENGINE_INIT_STD = 0.05


def engine_for(catalogue: Catalogue, *, split: bool = False, cpu: bool = False) -> str:
    """The first --rollout engine that runs split (or on a CPU) where asked: the alternative a fix names."""
    return next(
        e.name
        for e in catalogue.entries
        if e.served and e.option and not (split and e.no_split) and not (cpu and e.no_cpu)
    )


def served(rollout: str, catalogue: Catalogue = CATALOGUE) -> bool:
    """Whether the --rollout named is an image's engine (its own criteria, sleep, weight loads)."""
    return catalogue.entry(rollout, flag=_label("rollout"), option=True).served


def expected_failure(rollout: str, inject: str | None, catalogue: Catalogue = CATALOGUE) -> str | None:
    if inject is None:
        return None
    return (ENGINE_INJECT_EXPECTS if served(rollout, catalogue) else INJECT_EXPECTS)[inject]


# Qwen3 shapes (random init). CPU keeps it tiny so two placements fit CI's 2 cores; the GPU shape is
# larger so the H200 run moves real bytes through the sync and real tokens through the KV cache.
SHAPES: dict[str, dict[str, int]] = {
    "tiny": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
    },
    "small": {
        "hidden_size": 128,
        "intermediate_size": 384,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
    },
    "medium": {
        "hidden_size": 256,
        "intermediate_size": 768,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 32,
    },
}


# Fields the CLI exposes as flags; the rest are set through the Python API (SmokeOptions).
_CLI_FLAGS = {
    **{n: f"--{n}" for n in ("steps", "placement", "device", "inject", "seed", "rollout")},
    "shape": "--size",
    "engine": "--decoder",
    "logprob_bar": "--logprob-bar",
    "prompts_per_step": "--prompts",
}


def _label(name: str) -> str:
    return _CLI_FLAGS.get(name, f"SmokeOptions.{name}")


@dataclass(frozen=True, kw_only=True)
class SmokeOptions:
    placement: str = "colocated"
    device: str = "auto"
    steps: int = 30
    prompts_per_step: int = 64
    group_size: int = 8
    num_digits: int = 4
    max_new_tokens: int = 3
    lr: float = 3e-3
    minibatches: int = 4
    eps_low: float = 0.2
    eps_high: float = 0.28
    kl_coef: float = 0.001
    max_grad_norm: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = 0
    shape: str = "auto"
    engine: str = "auto"
    inject: str | None = None
    rollout: str = "reference"
    logprob_bar: float = LOGPROB_BAR
    threads: int = 0  # torch threads per actor; 0 = runner.actor_threads()
    report_dir: Path | None = None

    def validated(self, catalogue: Catalogue = CATALOGUE) -> SmokeOptions:
        """Return self, or raise InputError naming the bad field and the fix. The engine names are the
        catalogue's (it refuses an unknown one)."""
        for name, allowed in (("placement", PLACEMENTS), ("device", DEVICES)):
            if getattr(self, name) not in allowed:
                raise InputError(f"{_label(name)} {getattr(self, name)!r} is not one of {', '.join(allowed)}")
        catalogue.entry(self.engine, flag=_label("engine"), auto=True, served=False)
        if self.shape not in (shapes := ("auto", *SHAPES)):
            raise InputError(f"{_label('shape')} {self.shape!r} is not one of {', '.join(shapes)}")
        rollout = catalogue.entry(self.rollout, flag=_label("rollout"), option=True)
        if self.inject is not None and self.inject not in INJECTS:
            raise InputError(f"--inject {self.inject!r} is not one of {', '.join(INJECTS)}")
        if rollout.no_split is not None and self.placement == "split":
            raise InputError(
                f"--rollout {rollout.name} with --placement split is not supported: {rollout.no_split}",
                fix=f"use --placement colocated, or --rollout {engine_for(catalogue, split=True)} for a split run",
            )
        if self.inject == "logprob-mismatch" and not rollout.served:
            raise InputError(
                "--inject logprob-mismatch needs an engine rollout (it runs the engine in float16)",
                fix=f"add --rollout {engine_for(catalogue)}",
            )
        if rollout.served and self.shape == "tiny":
            raise InputError(
                "--size tiny has head_dim 16, which vLLM's CPU attention does not support",
                fix="use --size small (the default for --rollout vllm) or medium",
            )
        if not self.logprob_bar > 0.0:
            raise InputError(f"--logprob-bar must be > 0, got {self.logprob_bar}")
        positive = ("steps", "prompts_per_step", "group_size", "num_digits", "max_new_tokens", "minibatches")
        for name in positive:
            if getattr(self, name) < 1:
                raise InputError(f"{_label(name)} must be >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise InputError(
                f"SmokeOptions.group_size must be >= 2 for group-normalised advantages, got {self.group_size}"
            )
        if (self.prompts_per_step * self.group_size) % self.minibatches:
            raise InputError("SmokeOptions.minibatches must divide prompts_per_step x group_size")
        if not 0.0 < self.top_p <= 1.0 or self.temperature <= 0.0:
            raise InputError("SmokeOptions.top_p must be in (0, 1] and temperature > 0")
        if self.lr <= 0.0 or self.eps_low <= 0.0 or self.eps_high <= 0.0 or self.kl_coef < 0.0:
            raise InputError("SmokeOptions.lr, eps_low, eps_high must be > 0 and kl_coef >= 0")
        if self.report_dir is not None:
            check_output_dir(self.report_dir, "--output")  # before minutes of training, not after
        return self

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["report_dir"] = str(self.report_dir) if self.report_dir else None
        return out


def model_config(
    shape: str, *, vocab_size: int, max_positions: int, init_std: float | None = None
) -> dict[str, Any]:
    """A transformers Qwen3 config dict (random init, untied head so every weight crosses the sync)."""
    from transformers import Qwen3Config

    extra = {} if init_std is None else {"initializer_range": init_std}
    cfg = Qwen3Config(
        **extra,
        vocab_size=vocab_size,
        max_position_embeddings=max_positions,
        tie_word_embeddings=False,
        attention_dropout=0.0,
        use_cache=True,
        **SHAPES[shape],
    )
    return dict(cfg.to_dict())
