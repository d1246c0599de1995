"""The inputs of ``smoke framework``, made locally (nothing is downloaded anywhere):

- a tiny random-weight Qwen3 folder (config, safetensors, tokenizer files), seeded;
- a byte-level BPE tokenizer with a Qwen-like chat template (``rocmstack.gpu.tokenizer``);
- train/val parquet in verl's layout (data_source, prompt as chat messages, ability,
  reward_model {ground_truth, style}, extra_info), which TRL's GRPO reads too;
- a reward file a random policy can earn (so advantages, and the gradient, are not all zero): the share of
  the completion's characters that are digits of the prompt's number. It defines verl's
  ``compute_score``, a TRL-style batch ``reward`` and slime/vime's awaited ``async_reward``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from rocmstack.gpu.tokenizer import build_tokenizer

REWARD_MODULE = "smoke_reward"
REWARD_FN = "compute_score"
ASYNC_REWARD_FN = "async_reward"  # slime/vime: --custom-rm-path {reward_module}.async_reward
DATA_SOURCE = "rocmstack/digits"

REWARD_SOURCE = '''"""Smoke reward (made by rocmstack): the share of the completion's characters that are digits of the
prompt's number. A random policy earns some, unevenly, so GRPO's advantages are not all zero."""


def _score(text, ground_truth):
    text = str(text or "")
    if not text:
        return 0.0
    allowed = set(str(ground_truth))
    return sum(ch in allowed for ch in text) / len(text)


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    """verl's custom_reward_function signature."""
    return float(_score(solution_str, ground_truth))


async def async_reward(args, sample, **kwargs):
    """slime/vime's --custom-rm-path signature: awaited per sample; the label is the row's --label-key
    column (here reward_model, a dict holding ground_truth)."""
    label = sample.label
    truth = label.get("ground_truth", "") if isinstance(label, dict) else label
    return float(_score(sample.response, truth))


def reward(completions, reward_model=None, **kwargs):
    """TRL's reward-function signature: one float per completion."""
    out = []
    for i, completion in enumerate(completions):
        if isinstance(completion, list):  # conversational: a list of messages
            completion = "".join(m.get("content", "") for m in completion)
        truth = (reward_model[i] or {}).get("ground_truth", "") if reward_model else ""
        out.append(float(_score(completion, truth)))
    return out
'''


@dataclass(frozen=True)
class FrameworkInputs:
    model_dir: Path
    tokenizer_dir: Path
    train_parquet: Path
    val_parquet: Path
    reward_py: Path
    vocab_size: int


def build_model(directory: Path, *, vocab_size: int, eos_id: int, pad_id: int, seed: int = 0) -> None:
    """A seeded random-weight Qwen3 (2 layers, hidden 128, head_dim 64) saved in bfloat16."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a bar for a 700 KB file is noise in the smoke's output

    config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        bos_token_id=eos_id,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(directory))
    if model.generation_config is not None:
        model.generation_config.save_pretrained(str(directory))


def rows(n: int, split: str, seed: int) -> list[dict[str, object]]:
    rng = random.Random(seed)
    out: list[dict[str, object]] = []
    for i in range(n):
        number = "".join(rng.choice("0123456789") for _ in range(rng.randint(3, 5)))
        out.append(
            {
                "data_source": DATA_SOURCE,
                "prompt": [{"role": "user", "content": f"copy the number {number}"}],
                "ability": "copy",
                "reward_model": {"ground_truth": number, "style": "rule"},
                "extra_info": {"split": split, "index": i},
            }
        )
    return out


def write_parquet(path: Path, table_rows: list[dict[str, object]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(table_rows), str(path))


def make_inputs(work_dir: Path, *, train_rows: int = 32, val_rows: int = 8, seed: int = 0) -> FrameworkInputs:
    """Everything a framework's smoke command reads, under ``work_dir``."""
    model_dir = work_dir / "model"
    tokenizer_dir = work_dir / "tokenizer"
    n = build_tokenizer(tokenizer_dir, seed=seed)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    vocab = -(-n // 64) * 64  # rounded up: engines like a vocabulary divisible by 64
    build_model(model_dir, vocab_size=vocab, eos_id=tok.eos_token_id, pad_id=tok.pad_token_id, seed=seed)
    tok.save_pretrained(str(model_dir))  # the model folder is self-contained, as frameworks expect
    train = work_dir / "data" / "train.parquet"
    val = work_dir / "data" / "test.parquet"
    write_parquet(train, rows(train_rows, "train", seed))
    write_parquet(val, rows(val_rows, "test", seed + 1))
    reward_py = work_dir / f"{REWARD_MODULE}.py"
    reward_py.write_text(REWARD_SOURCE)
    return FrameworkInputs(model_dir, tokenizer_dir, train, val, reward_py, vocab)
