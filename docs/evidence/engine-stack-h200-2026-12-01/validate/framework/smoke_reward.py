"""Smoke reward (made by rocmstack): the share of the completion's characters that are digits of the
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


def reward(completions, reward_model=None, **kwargs):
    """TRL's reward-function signature: one float per completion."""
    out = []
    for i, completion in enumerate(completions):
        if isinstance(completion, list):  # conversational: a list of messages
            completion = "".join(m.get("content", "") for m in completion)
        truth = (reward_model[i] or {}).get("ground_truth", "") if reward_model else ""
        out.append(float(_score(completion, truth)))
    return out
