"""A small tokenizer made locally for config-only models (nothing is downloaded): a byte-level BPE trained
with ``tokenizers`` on a few KB of generated text, with a Qwen-like chat template. "\\n" is one token (verl's
agent loop needs that; a WordLevel vocabulary would not do). Engines that insist on a tokenizer (SGLang's
one-batch benchmark) get this one; their inputs are token ids either way.
"""

from __future__ import annotations

import random
from pathlib import Path

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def corpus(seed: int = 0, lines: int = 400) -> list[str]:
    """A few KB of text shaped like the prompts and answers (digits, words, chat markers, newlines)."""
    rng = random.Random(seed)
    words = ("copy", "the", "number", "digits", "answer", "repeat", "please", "write", "it", "back", "is")
    out = []
    for _ in range(lines):
        number = "".join(rng.choice("0123456789") for _ in range(rng.randint(2, 6)))
        phrase = " ".join(rng.choice(words) for _ in range(rng.randint(2, 6)))
        out.append(f"<|im_start|>user\n{phrase} {number}<|im_end|>\n<|im_start|>assistant\n{number}\n")
    return out


def build_tokenizer(directory: Path, *, vocab_size: int = 512, seed: int = 0) -> int:
    """Train a byte-level BPE, save it as a transformers fast tokenizer; return its length."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(seed), trainer)
    if len(tok.encode("\n", add_special_tokens=False).ids) != 1:  # verl's agent loop splits on it
        raise RuntimeError("the smoke tokenizer does not encode a newline as one token")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None
    )
    fast.chat_template = CHAT_TEMPLATE
    directory.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(directory))
    return len(fast)
