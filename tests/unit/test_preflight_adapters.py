"""Each framework's real command line, rewritten for its one-step preflight. The command lines are the
public scripts' own (tests/fixtures/preflight/SOURCES.md), expanded by bash exactly as they launch: only the
launch itself is replaced by printing its argv."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rocmstack.errors import InputError
from rocmstack.preflight.adapters import ADAPTERS, Inputs, choose, engine_args_argv

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "preflight"


def _inputs(tmp_path: Path) -> Inputs:
    return Inputs(
        tmp_path / "model", tmp_path / "train.parquet", tmp_path / "val.parquet", "smoke_reward",
        tmp_path / "smoke_reward.py", tmp_path, port=18000,
    )  # fmt: skip


def _argv(script: str, env: dict[str, str]) -> list[str]:
    out = subprocess.run(["bash", "-c", script], capture_output=True, env=env, check=True, timeout=30).stdout
    return [a.decode() for a in out.split(b"\0") if a]


def verl_argv() -> list[str]:
    text = (FIXTURES / "verl-run_qwen3-8b.sh").read_text()
    launch = "python3 -m verl.trainer.main_ppo"
    assert text.count(launch) == 1
    return _argv(
        text.replace(launch, f"printf '%s\\0' {launch}"), {"HOME": "/home/lab", "PATH": "/usr/bin:/bin"}
    )


def slime_argv() -> list[str]:
    text = (FIXTURES / "slime-run-qwen3-4B-amd.sh").read_text()
    # from the script's own settings on; the clean-up (pkill), `ray start` and `pip list` before the launch
    # stay out, and the sourced model arguments are the fixture's
    body = text[text.index("### AMD Support ###") :]
    body = body.replace(
        'source "${SCRIPT_DIR}/models/qwen3-4B.sh"', f'source "{FIXTURES}/models/qwen3-4B.sh"'
    )
    body = "\n".join(
        line for line in body.splitlines() if not line.startswith(("ray start", "MEGATRON_LM_PATH="))
    )
    assert body.count("ray job submit") == 1
    return _argv(body.replace("ray job submit", "printf '%s\\0' ray job submit"), {"PATH": "/usr/bin:/bin"})


def test_verl_keeps_the_jobs_parallelism_and_engine_and_replaces_model_data_and_steps(tmp_path):
    argv = verl_argv()
    assert "actor_rollout_ref.model.path=Qwen/Qwen3-8B" in argv and "data.train_batch_size=1024" in argv
    adapter = choose(argv, None)
    assert adapter.name == "verl" and adapter.model_of(argv) == "Qwen/Qwen3-8B"
    step = adapter.rewrite(argv, _inputs(tmp_path))
    out = list(step.argv)
    assert out[:3] == ["python3", "-m", "verl.trainer.main_ppo"]
    # the job's own choices stay
    for kept in (
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
        "actor_rollout_ref.model.use_remove_padding=True",
        "actor_rollout_ref.ref.fsdp_config.param_offload=True",
        "trainer.n_gpus_per_node=8",
        "algorithm.adv_estimator=grpo",
    ):
        assert kept in out, kept
    # what makes it one small, self-contained step
    for made in (
        f"actor_rollout_ref.model.path={tmp_path / 'model'}",
        f"data.train_files={tmp_path / 'train.parquet'}",
        "data.train_batch_size=8",
        "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
        "trainer.logger=['console']",
        "trainer.total_training_steps=1",
        "trainer.save_freq=-1",
        "trainer.test_freq=-1",
        "trainer.val_before_train=False",
        # 8 prompts x n 4 (the job's 5, at most 4): graphs for the batch sizes one step decodes, not 86
        "actor_rollout_ref.rollout.cudagraph_capture_sizes=[1,2,4,8,16,32]",
    ):
        assert made in out, made
    assert not any("wandb" in a for a in out)
    assert out.count("actor_rollout_ref.model.path=" + str(tmp_path / "model")) == 1
    assert (
        "data.train_files: /home/lab/data/gsm8k/train.parquet -> " + str(tmp_path / "train.parquet")
        in step.changed
    )
    assert (step.gpus, step.parallel["rollout_tp"], step.kind) == (8, 2, "framework")
    assert step.env["WANDB_MODE"] == "disabled" and step.done is not None


def test_verl_keeps_a_plus_prefix_and_points_every_copy_of_the_model_at_the_shrunk_one(tmp_path):
    argv = [
        "python3", "-m", "verl.trainer.main_ppo", "actor_rollout_ref.model.path=/models/m",
        "critic.model.path=/models/m", "+data.gen_batch_size=20", "trainer.n_gpus_per_node=2",
    ]  # fmt: skip
    out = ADAPTERS["verl"].rewrite(argv, _inputs(tmp_path)).argv
    assert f"critic.model.path={tmp_path / 'model'}" in out
    assert "+data.gen_batch_size=2" in out
    assert "actor_rollout_ref.rollout.cudagraph_capture_sizes=[1,2]" in out  # n unset: one per prompt
    eager = [*argv, "actor_rollout_ref.rollout.enforce_eager=True"]  # no graphs at all: none asked for
    assert not any("cudagraph" in a for a in ADAPTERS["verl"].rewrite(eager, _inputs(tmp_path)).argv)


def test_slime_keeps_megatron_parallelism_and_shrinks_layers_rollout_and_checkpoints(tmp_path):
    argv = slime_argv()
    assert argv[:2] == ["ray", "job"] and "--" in argv  # `ray job submit ... -- python3 train.py ...`
    adapter = choose(argv, None)
    assert adapter.name == "slime" and adapter.model_of(argv).endswith("/Qwen3-4B")
    step = adapter.rewrite(argv, _inputs(tmp_path))
    out = list(step.argv)
    assert out[:2] == ["python3", "train.py"]

    def value(flag: str) -> list[str]:
        i = out.index(flag)
        j = next((k for k in range(i + 1, len(out)) if out[k].startswith("--")), len(out))
        return out[i + 1 : j]

    assert value("--num-layers") == ["2"]  # Megatron's architecture matches the 2-layer config
    assert value("--hidden-size") == ["2560"] and value("--num-query-groups") == ["8"]  # the rest stays
    assert value("--tensor-model-parallel-size") == ["2"] and "--sequence-parallel" in out
    assert value("--rollout-num-gpus-per-engine") == ["2"] and value("--sglang-mem-fraction-static") == [
        "0.7"
    ]
    assert value("--hf-checkpoint") == [str(tmp_path / "model")] and value("--ref-load") == [
        str(tmp_path / "model")
    ]
    assert value("--num-rollout") == ["1"] and value("--rollout-batch-size") == ["8"]
    assert value("--global-batch-size") == [str(8 * int(value("--n-samples-per-prompt")[0]))]
    assert value("--custom-rm-path") == ["smoke_reward.async_reward"]
    for gone in ("--load", "--save", "--save-interval", "--eval-interval", "--eval-prompt-data", "--rm-type"):
        assert gone not in out, gone
    assert "--eval-prompt-data: dropped" in step.changed
    assert step.parallel == {"tp": 2, "pp": 1, "ep": 1, "rollout_gpus_per_engine": 2}


def test_vime_is_told_by_its_train_py(tmp_path):
    argv = ["python3", "/opt/src/vime/train.py", "--hf-checkpoint", "/m", "--num-layers", "36"]
    assert choose(argv, None).name == "vime"
    assert "--num-layers" in ADAPTERS["vime"].rewrite(argv, _inputs(tmp_path)).argv


@pytest.mark.parametrize(
    "argv",
    [
        ["vllm", "serve", "Qwen/Qwen3-8B", "--tensor-parallel-size", "2", "--kv-cache-dtype", "fp8"],
        ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/Qwen3-8B",
         "--tensor-parallel-size", "2", "--kv-cache-dtype", "fp8"],
    ],
)  # fmt: skip
def test_a_vllm_server_serves_the_shrunk_model_with_the_jobs_engine_args(tmp_path, argv):
    adapter = choose(argv, None)
    assert adapter.name == "vllm" and adapter.model_of(argv) == "Qwen/Qwen3-8B" and not adapter.weights
    step = adapter.rewrite(argv, _inputs(tmp_path))
    out = list(step.argv)
    assert "Qwen/Qwen3-8B" not in out and str(tmp_path / "model") in out
    for pair in (["--tensor-parallel-size", "2"], ["--kv-cache-dtype", "fp8"], ["--load-format", "dummy"],
                 ["--host", "127.0.0.1"], ["--port", "18000"]):  # fmt: skip
        i = out.index(pair[0])
        assert out[i : i + 2] == pair
    assert (step.kind, step.gpus) == ("server", 2)


def test_an_sglang_server_and_an_engine_args_file(tmp_path):
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", "/models/q", "--tp-size", "4",
            "--attention-backend", "aiter", "--mem-fraction-static", "0.8"]  # fmt: skip
    step = choose(argv, None).rewrite(argv, _inputs(tmp_path))
    out = list(step.argv)
    assert out[out.index("--model-path") + 1] == str(tmp_path / "model")
    assert out[out.index("--attention-backend") + 1] == "aiter" and step.gpus == 4
    assert out[out.index("--context-length") + 1].isdigit()
    made = engine_args_argv(
        {"model": "/models/q", "tensor_parallel_size": 2, "enforce_eager": True, "enable_prefix_caching": False,
         "compilation_config": {"level": 0}},
        "vllm",
    )  # fmt: skip
    assert made == ["vllm", "serve", "/models/q", "--tensor-parallel-size", "2", "--enforce-eager",
                    "--compilation-config", '{"level": 0}']  # fmt: skip


def test_an_unknown_command_or_framework_is_one_clear_line():
    with pytest.raises(InputError, match=r"cannot tell which framework runs 'torchrun train\.py'"):
        choose(["torchrun", "train.py"], None)
    with pytest.raises(InputError, match="--framework 'trl' is not known"):
        choose(["x"], "trl")
    with pytest.raises(InputError, match="no job command given"):
        choose([], None)
