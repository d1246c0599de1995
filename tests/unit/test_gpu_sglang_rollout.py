"""SGLang's rollout adapter: how its offline Engine's answers are read. SGLang has no CPU engine, so the engine
itself runs only on a GPU (docs/evidence/engine-sglang-h200-2026-12-01); these pin the answer formats of
SGLang 0.5.17 that the GPU run consumed."""

from __future__ import annotations

import pytest

from rocmstack.gpu.sglang_rollout import prompt_logprobs, sampled_logprobs, update_ok


def generate_answer(ids: list[int], logprobs: list[float]) -> dict:
    # Engine.generate with skip_tokenizer_init and return_logprob=True: no "text"; each log-prob entry is
    # (log-prob, token id, None) (managers/tokenizer_manager.py: detokenize_logprob_tokens, decode_to_text off).
    return {
        "output_ids": ids,
        "meta_info": {"output_token_logprobs": [(lp, t, None) for lp, t in zip(logprobs, ids, strict=True)]},
    }


def test_sampled_tokens_and_their_logprobs():
    assert sampled_logprobs(generate_answer([5, 9, 2], [-0.5, -1.25, -3.0])) == (
        [5, 9, 2],
        [-0.5, -1.25, -3.0],
    )


def test_logprobs_of_other_tokens_than_the_sampled_ones_are_refused():
    answer = generate_answer([5, 9], [-0.5, -1.0])
    answer["output_ids"] = [5, 8]
    with pytest.raises(RuntimeError, match="do not match its output_ids"):
        sampled_logprobs(answer)


def test_prompt_logprobs_skip_the_first_token():
    # logprob_start_len=0: one entry per prompt token, the first without a log-prob
    # (managers/scheduler_components/logprob_result_processor.py: [None] + input_token_logprobs[:-1]).
    row = [3, 4, 5, 6]
    answer = {
        "meta_info": {
            "input_token_logprobs": [(None, 3, None), (-1.0, 4, None), (-2.0, 5, None), (-0.5, 6, None)]
        }
    }
    assert prompt_logprobs(answer, row) == [-1.0, -2.0, -0.5]


def test_prompt_logprobs_of_a_shorter_or_other_sequence_are_refused():
    answer = {"meta_info": {"input_token_logprobs": [(None, 3, None), (-1.0, 4, None)]}}
    with pytest.raises(RuntimeError, match="scored 2 prompt tokens of 3"):
        prompt_logprobs(answer, [3, 4, 5])
    with pytest.raises(RuntimeError):
        prompt_logprobs(answer, [3, 7])


def test_a_refused_weight_update_raises_with_sglangs_message():
    update_ok((True, "Succeeded to update model weights."))
    with pytest.raises(RuntimeError, match="refused the weight update: shape mismatch"):
        update_ok((False, "shape mismatch"))
