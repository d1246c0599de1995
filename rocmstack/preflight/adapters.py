"""How each framework's command line becomes its one-step preflight: the lab's own argv with the model,
data, step count, loggers and checkpoints replaced, and nothing else. Parallelism (TP/PP/EP, GPUs per node,
colocation), the engine, dtype, quantization, memory shares and kernel switches stay as the lab set them.

An adapter is data plus two pure functions, so a lab adds a framework with one entry in ADAPTERS
(docs/preflight.md). verl takes Hydra overrides (``key=value``, ``+key=value``); slime and vime take
Megatron-style flags (``--flag v1 v2``); vLLM and SGLang servers take their own flags.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rocmstack.errors import InputError, quoted

PROMPT_LEN = 128  # the made prompts are ~20 tokens under the chat template
RESPONSE_LEN = 32
MAX_MODEL_LEN = PROMPT_LEN + RESPONSE_LEN + 96


@dataclass(frozen=True)
class Inputs:
    """What the preflight made for the step (rocmstack.preflight.runner)."""

    model_dir: Path
    train_data: Path
    val_data: Path
    reward_module: str  # importable from work_dir: verl's compute_score, slime/vime's async_reward
    reward_py: Path
    work_dir: Path
    port: int = 0  # a server's port on 127.0.0.1


@dataclass(frozen=True)
class Step:
    """The rewritten command and how to tell it ran."""

    argv: tuple[str, ...]
    changed: tuple[str, ...]  # "data.train_files: /data/x -> work/data/train.parquet", one per replacement
    kind: str  # "framework": runs one step and exits; "server": serves, answers one request, is stopped
    env: Mapping[str, str] = field(default_factory=dict)  # set for the step (loggers off)
    # set for the step unless the job's environment sets them (the engine's own log level, warm-ups that only
    # shorten later steps)
    defaults: Mapping[str, str] = field(default_factory=dict)
    done: str | None = None  # a regex of the log line that proves the step ran (framework kind)
    gpus: int = 1  # GPUs per node the job asks for
    parallel: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Adapter:
    name: str
    matches: Callable[[Sequence[str]], bool]
    model_of: Callable[[Sequence[str]], str | None]  # the model path the job names, if any
    rewrite: Callable[[Sequence[str], Inputs], Step]
    weights: bool  # the step loads the model's weights (a trainer): the shrunk folder gets random ones
    data: bool = True  # the step reads a data set (a trainer); a server reads none


# vLLM logs every backend and kernel it selects at INFO (verl sets WARN for its workers unless the launching
# environment names a level); DeepGEMM's warm-up compiles every batch shape up front (111 s of a 7-minute
# FP8 MoE step on an H200): one step compiles the shapes it uses as it meets them
VLLM_DEFAULTS = {"VLLM_LOGGING_LEVEL": "INFO", "VLLM_DEEP_GEMM_WARMUP": "skip"}

# -- verl: Hydra overrides ---------------------------------------------------------------------------------


def _hydra(argv: Sequence[str]) -> tuple[list[str], dict[str, tuple[int, str]]]:
    """The launcher part (up to the first override) and each override's key -> (index, value)."""
    overrides: dict[str, tuple[int, str]] = {}
    for i, arg in enumerate(argv):
        if "=" in arg and not arg.startswith("-"):
            key, _, value = arg.partition("=")
            overrides[key.lstrip("+~")] = (i, value)
    return list(argv), overrides


def _is_verl(argv: Sequence[str]) -> bool:
    return any(re.fullmatch(r"verl\.trainer\.main_\w+|recipe\.[\w.]+\.main_\w+", a) for a in argv)


def _verl_model(argv: Sequence[str]) -> str | None:
    return _hydra(argv)[1].get("actor_rollout_ref.model.path", (0, None))[1]


def _int(text: str | None, default: int) -> int:
    try:
        return int(str(text).strip("'\""))
    except (TypeError, ValueError):
        return default


def _capture_sizes(sequences: int) -> str:
    """CUDA graphs for the batch sizes one step decodes (powers of two up to its sequences), as a Hydra list.

    The engine still compiles and captures, as the job's would; it skips the sizes the step never runs (an FP8
    MoE job captures 86 graphs, each compiling its own DeepGEMM shapes: about 70 s of a 5-minute step on an
    H200). A capture that fails only at a batch size the step does not reach is not seen.
    """
    sizes, size = [], 1
    while True:
        sizes.append(size)
        if size >= sequences:
            return "[" + ",".join(str(s) for s in sizes) + "]"
        size *= 2


def _verl(argv: Sequence[str], inputs: Inputs) -> Step:
    out, overrides = _hydra(argv)
    changed: list[str] = []
    gpus = _int(overrides.get("trainer.n_gpus_per_node", (0, "1"))[1], 1)
    n = min(_int(overrides.get("actor_rollout_ref.rollout.n", (0, "1"))[1], 1), 4)
    model = _verl_model(argv)

    def put(key: str, value: str, *, only_if_set: bool = False) -> None:
        if key in overrides:
            i, old = overrides[key]
            if old != value:
                prefix = out[i][: len(out[i]) - len(out[i].lstrip("+~"))]
                out[i] = f"{prefix}{key}={value}"
                changed.append(f"{key}: {old} -> {value}")
        elif not only_if_set:
            out.append(f"{key}={value}")
            changed.append(f"{key}: (unset) -> {value}")

    # every path that names the job's model (actor, critic, reward model, tokenizer) names the shrunk one
    for key, (_, value) in list(overrides.items()):
        if model and value.strip("'\"") == model.strip("'\"") and key != "actor_rollout_ref.model.path":
            put(key, str(inputs.model_dir))
    put("actor_rollout_ref.model.path", str(inputs.model_dir))
    put("data.train_files", str(inputs.train_data))
    put("data.val_files", str(inputs.val_data))
    put("data.train_batch_size", str(gpus))
    put("data.gen_batch_size", str(gpus), only_if_set=True)
    put("data.max_prompt_length", str(PROMPT_LEN))
    put("data.max_response_length", str(RESPONSE_LEN))
    put("data.filter_overlong_prompts", "False", only_if_set=True)
    put("actor_rollout_ref.rollout.n", str(max(n, 1)))
    put("actor_rollout_ref.actor.ppo_mini_batch_size", str(gpus))
    for key in (
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
        "critic.ppo_micro_batch_size_per_gpu",
    ):
        put(key, "1", only_if_set=True)
    put("actor_rollout_ref.rollout.max_num_batched_tokens", str(MAX_MODEL_LEN * 4), only_if_set=True)
    eager = overrides.get("actor_rollout_ref.rollout.enforce_eager", (0, "False"))[1].strip("'\"").lower()
    if eager != "true":
        put("actor_rollout_ref.rollout.cudagraph_capture_sizes", _capture_sizes(gpus * max(n, 1)))
    put("trainer.logger", "['console']")
    put("trainer.total_training_steps", "1")
    put("trainer.total_epochs", "1")
    put("trainer.val_before_train", "False")
    put("trainer.test_freq", "-1")
    put("trainer.save_freq", "-1")
    put("trainer.resume_mode", "disable")
    put("trainer.nnodes", "1")
    put("trainer.log_val_generations", "0", only_if_set=True)
    put("trainer.default_local_dir", str(inputs.work_dir / "checkpoints"))
    parallel = {
        "rollout_tp": _int(
            overrides.get("actor_rollout_ref.rollout.tensor_model_parallel_size", (0, "1"))[1], 1
        ),
        "actor_tp": _int(
            overrides.get("actor_rollout_ref.actor.megatron.tensor_model_parallel_size", (0, "1"))[1], 1
        ),
        "actor_pp": _int(
            overrides.get("actor_rollout_ref.actor.megatron.pipeline_model_parallel_size", (0, "1"))[1], 1
        ),
        "actor_ep": _int(
            overrides.get("actor_rollout_ref.actor.megatron.expert_model_parallel_size", (0, "1"))[1], 1
        ),
    }
    return Step(
        tuple(out),
        tuple(changed),
        "framework",
        env={"WANDB_MODE": "disabled", "HYDRA_FULL_ERROR": "1"},
        defaults=VLLM_DEFAULTS,
        done=r"(?:^|\s)step:1(?:\s|$)",  # verl's console logger: "step:1 - key:value - ..."
        gpus=gpus,
        parallel=parallel,
    )


# -- slime and vime: Megatron-style flags --------------------------------------------------------------------


def _flags(argv: Sequence[str]) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """(the launcher: everything before the first flag, [(flag, its values)]). A flag's values are the words
    up to the next ``--flag``; a ``--`` separator (``ray job submit ... -- python3 train.py``) starts over."""
    if "--" in argv:
        argv = argv[len(argv) - argv[::-1].index("--") :]
    head: list[str] = []
    flags: list[tuple[str, list[str]]] = []
    for word in argv:
        if word.startswith("--") and len(word) > 2:
            name, eq, value = word.partition("=")
            flags.append((name, [value] if eq else []))
        elif flags:
            flags[-1][1].append(word)
        else:
            head.append(word)
    return head, flags


def _is_megatron_rl(argv: Sequence[str]) -> bool:
    head, flags = _flags(argv)
    return any(Path(w).name == "train.py" for w in head) and any(f == "--hf-checkpoint" for f, _ in flags)


def _put_flag(flags: list[tuple[str, list[str]]], changed: list[str], name: str, *values: str) -> None:
    """Set ``name``'s values (in place where the command has the flag, else at the end) and say what changed."""
    for i, (flag, old) in enumerate(flags):
        if flag == name:
            if old != list(values):
                flags[i] = (flag, list(values))
                changed.append(f"{name}: {' '.join(old) or '(flag)'} -> {' '.join(values)}")
            return
    flags.append((name, list(values)))
    changed.append(f"{name}: (unset) -> {' '.join(values)}")


def _is_vime(argv: Sequence[str]) -> bool:
    return _is_megatron_rl(argv) and any("vime" in Path(w).parts for w in _flags(argv)[0])


def _is_slime(argv: Sequence[str]) -> bool:
    return _is_megatron_rl(argv) and not _is_vime(argv)


def _flag(flags: list[tuple[str, list[str]]], name: str) -> list[str] | None:
    return next((values for f, values in flags if f == name), None)


def _megatron_model(argv: Sequence[str]) -> str | None:
    values = _flag(_flags(argv)[1], "--hf-checkpoint")
    return values[0] if values else None


# What the step drops: loading and saving checkpoints, evaluation, loggers (W&B, TensorBoard).
_MEGATRON_DROP = re.compile(
    r"--(?:load|save|save-interval|eval-.*|n-samples-per-eval-prompt|use-wandb|wandb-.*|"
    r"use-tensorboard|tensorboard-.*|rm-type|rm-url|start-rollout-id)$"
)


def _megatron(argv: Sequence[str], inputs: Inputs) -> Step:
    head, flags = _flags(argv)
    changed: list[str] = []
    kept: list[tuple[str, list[str]]] = []
    for name, values in flags:
        if _MEGATRON_DROP.match(name):
            changed.append(f"{name}: dropped")
            continue
        kept.append((name, values))
    gpus = _int((_flag(kept, "--actor-num-gpus-per-node") or ["1"])[0], 1)
    samples = min(_int((_flag(kept, "--n-samples-per-prompt") or ["2"])[0], 2), 4)
    batch = max(gpus, 1)

    def put(name: str, *values: str) -> None:
        _put_flag(kept, changed, name, *values)

    put("--num-layers", "2")  # the Megatron architecture must match the shrunk config.json
    put("--hf-checkpoint", str(inputs.model_dir))
    put("--ref-load", str(inputs.model_dir))
    put("--prompt-data", str(inputs.train_data))
    put("--input-key", "prompt")
    put("--label-key", "reward_model")
    put("--custom-rm-path", f"{inputs.reward_module}.async_reward")
    put("--num-rollout", "1")
    put("--rollout-batch-size", str(batch))
    put("--n-samples-per-prompt", str(samples))
    put("--global-batch-size", str(batch * samples))
    put("--rollout-max-response-len", str(RESPONSE_LEN))
    out = [*head]
    for name, values in kept:
        out += [name, *values]
    parallel = {
        key: _int((_flag(kept, flag) or ["1"])[0], 1)
        for key, flag in (
            ("tp", "--tensor-model-parallel-size"),
            ("pp", "--pipeline-model-parallel-size"),
            ("ep", "--expert-model-parallel-size"),
            ("rollout_gpus_per_engine", "--rollout-num-gpus-per-engine"),
        )
    }
    return Step(
        tuple(out), tuple(changed), "framework", env={"WANDB_MODE": "disabled"}, gpus=gpus, parallel=parallel
    )


# -- vLLM and SGLang servers -----------------------------------------------------------------------------------


def _is_vllm(argv: Sequence[str]) -> bool:
    words = [Path(w).name for w in argv[:3]]
    return ("vllm" in words and "serve" in argv[:4]) or "vllm.entrypoints.openai.api_server" in argv


def _is_sglang(argv: Sequence[str]) -> bool:
    return "sglang.launch_server" in argv or (
        any(Path(w).name == "sglang" for w in argv[:2]) and "serve" in argv[:3]
    )


def _vllm_model(argv: Sequence[str]) -> str | None:
    _, flags = _flags(argv)
    given = _flag(flags, "--model")
    if given:
        return given[0]
    if "serve" in argv:
        i = list(argv).index("serve")
        if i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            return argv[i + 1]
    return None


def _server(argv: Sequence[str], inputs: Inputs, *, model_flag: str, len_flag: str) -> Step:
    argv = list(argv)
    changed: list[str] = []
    model = _vllm_model(argv) if model_flag == "--model" else _sglang_model(argv)
    if "serve" in argv and model_flag == "--model":
        i = argv.index("serve")
        if i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            argv[i + 1] = str(inputs.model_dir)
            changed.append(f"model: {model} -> {inputs.model_dir}")
    head, flags = _flags(argv)

    def put(name: str, *values: str) -> None:
        _put_flag(flags, changed, name, *values)

    if _flag(flags, model_flag) is not None or model_flag != "--model":
        put(model_flag, str(inputs.model_dir))
    for name in ("--tokenizer", "--tokenizer-path"):
        if _flag(flags, name) is not None:
            put(name, str(inputs.model_dir))
    put("--load-format", "dummy")
    put(len_flag, str(MAX_MODEL_LEN))
    put("--host", "127.0.0.1")
    put("--port", str(inputs.port))
    out = [*head]
    for name, values in flags:
        out += [name, *values]
    tp_flag = "--tensor-parallel-size" if model_flag == "--model" else "--tp-size"
    tp = _int((_flag(flags, tp_flag) or _flag(flags, "-tp") or ["1"])[0], 1)
    defaults = VLLM_DEFAULTS if model_flag == "--model" else {}
    return Step(tuple(out), tuple(changed), "server", defaults=defaults, gpus=tp, parallel={"tp": tp})


def _vllm(argv: Sequence[str], inputs: Inputs) -> Step:
    return _server(argv, inputs, model_flag="--model", len_flag="--max-model-len")


def _sglang(argv: Sequence[str], inputs: Inputs) -> Step:
    return _server(argv, inputs, model_flag="--model-path", len_flag="--context-length")


def _sglang_model(argv: Sequence[str]) -> str | None:
    values = _flag(_flags(argv)[1], "--model-path")
    return values[0] if values else None


ADAPTERS: Mapping[str, Adapter] = {
    "verl": Adapter("verl", _is_verl, _verl_model, _verl, weights=True),
    "slime": Adapter("slime", _is_slime, _megatron_model, _megatron, weights=True),
    "vime": Adapter("vime", _is_vime, _megatron_model, _megatron, weights=True),
    "vllm": Adapter("vllm", _is_vllm, _vllm_model, _vllm, weights=False, data=False),
    "sglang": Adapter("sglang", _is_sglang, _sglang_model, _sglang, weights=False, data=False),
}


def choose(argv: Sequence[str], framework: str | None) -> Adapter:
    """The adapter named, or the one that recognises the command line; one InputError line otherwise."""
    if framework is not None:
        if framework not in ADAPTERS:
            raise InputError(
                f"--framework {quoted(framework)} is not known", fix=f"one of {', '.join(ADAPTERS)}"
            )
        return ADAPTERS[framework]
    if not argv:
        raise InputError("no job command given", fix="rocmstack preflight [OPTIONS] -- COMMAND ARGS...")
    found = [a for a in ADAPTERS.values() if a.matches(argv)]
    if not found:
        raise InputError(
            f"cannot tell which framework runs {quoted(' '.join(argv[:4]))}",
            fix=f"name it with --framework ({', '.join(ADAPTERS)})",
        )
    return found[0]


def engine_args_argv(args: Mapping[str, object], engine: str) -> list[str]:
    """An engine-args file (a mapping, as vLLM's ``--config`` YAML) as the server's command line."""
    model = str(args.get("model") or args.get("model_path") or "")
    if engine == "vllm":
        argv = ["vllm", "serve", model]
        skip = {"model"}
    else:
        argv = ["python3", "-m", "sglang.launch_server", "--model-path", model]
        skip = {"model", "model_path"}
    for key, value in args.items():
        if key in skip or value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif isinstance(value, list | tuple):
            argv += [flag, *(str(v) for v in value)]
        elif isinstance(value, dict):
            import json

            argv += [flag, json.dumps(value)]
        else:
            argv += [flag, str(value)]
    return argv
