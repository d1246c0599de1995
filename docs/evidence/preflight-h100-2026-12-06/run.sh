#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# verl 0.9.1's own launcher, a lab's GRPO job on Qwen3-30B-A3B (MoE) with FP8 rollout on vLLM, TP 1, shrunk by
# the preflight with a 7-minute limit so that the step's own time is seen against the issue's 5 (`pass`); or the
# same job with a value the engine rejects at its start (`fault`). From the checkout root:
#   bash docs/evidence/preflight-h100-2026-12-06/run.sh OUT pass|fault
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"
job=(python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo
  data.train_files=/data/gsm8k/train.parquet data.val_files=/data/gsm8k/test.parquet
  data.train_batch_size=512 data.max_prompt_length=1024 data.max_response_length=2048
  data.filter_overlong_prompts=True data.truncation=error
  actor_rollout_ref.model.path=/models/Qwen3-30B-A3B actor_rollout_ref.actor.optim.lr=1e-6
  actor_rollout_ref.model.use_remove_padding=False +actor_rollout_ref.model.override_config.attn_implementation=sdpa
  actor_rollout_ref.actor.ppo_mini_batch_size=128 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4
  actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_coef=0.001
  actor_rollout_ref.actor.kl_loss_type=low_var_kl actor_rollout_ref.actor.entropy_coeff=0
  actor_rollout_ref.model.enable_gradient_checkpointing=True
  actor_rollout_ref.actor.fsdp_config.param_offload=False actor_rollout_ref.actor.fsdp_config.optimizer_offload=False
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 actor_rollout_ref.rollout.tensor_model_parallel_size=1
  actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.quantization=fp8
  actor_rollout_ref.rollout.gpu_memory_utilization=0.4 actor_rollout_ref.rollout.n=5
  actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4 actor_rollout_ref.ref.fsdp_config.param_offload=True
  algorithm.use_kl_in_reward=False trainer.critic_warmup=0 'trainer.logger=["console","wandb"]'
  trainer.project_name=grpo_gsm8k trainer.experiment_name=qwen3_30b_a3b_fp8
  trainer.n_gpus_per_node=1 trainer.nnodes=1 trainer.save_freq=20 trainer.test_freq=5 trainer.total_epochs=15)
pf() { python3 -m rocmstack preflight --model-config tests/fixtures/preflight/qwen3-30b-a3b.config.json \
  --env VLLM_USE_FLASHINFER_SAMPLER=0 --timeout 7m --json "$@"; }
if [ "${2:-pass}" = pass ]; then
  step verl-fp8 pf --work-dir /tmp/pf-verl -- "${job[@]}"
  cp /tmp/pf-verl/step.log "$out/verl-fp8.log"
  tar czf "$out/verl-fp8-masks.tgz" -C /tmp pf-verl/masks
else
  fault=("${job[@]/gpu_memory_utilization=0.4/gpu_memory_utilization=1.5}")
  step verl-fault pf --work-dir /tmp/pf-fault -- "${fault[@]}"
  cp /tmp/pf-fault/step.log "$out/verl-fault.log"
fi
