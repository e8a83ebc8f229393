#!/usr/bin/env bash
# GRPO on gsm8k, Qwen2.5-32B-Instruct, 4 nodes x 8 Atlas 800T A2 (910B, 64 GB).
# Multi-node: start Ray first (ray_start_head.sh on this node, ray_start_worker.sh HEAD_IP on the others).
# Megatron actor (TP8 PP2, DP2) + vLLM rollout (TP4, 8 replicas); overrides of verl's own
# ppo_megatron_trainer config only. Check it anywhere first:
#   verl-ascend check recipes/grpo_qwen2_5_32b_a2.sh
# Every path and size below can be set from the environment; extra Hydra overrides can be appended
# on the command line (bash recipes/grpo_qwen2_5_32b_a2.sh trainer.total_epochs=1).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/a2_env.sh"
source "$HERE/megatron_bridge.sh"

MODEL_PATH=${MODEL_PATH:-$HOME/models/Qwen2.5-32B-Instruct}
# Megatron dist checkpoint, made once: python scripts/converter_hf_to_mcore.py --hf_model_path $MODEL_PATH --output_path $DIST_CKPT_PATH
DIST_CKPT_PATH=${DIST_CKPT_PATH:-$HOME/models/Qwen2.5-32B-Instruct-mcore}
DATA_DIR=${DATA_DIR:-$HOME/data/gsm8k}
CKPTS_DIR=${CKPTS_DIR:-$HOME/ckpts/grpo_qwen2_5_32b_a2}

NNODES=${NNODES:-4}
TRAIN_TP=${TRAIN_TP:-8}
TRAIN_PP=${TRAIN_PP:-2}
GEN_TP=${GEN_TP:-4}
TRAIN_BATCH_SIZE=${TRAIN_BATCH_SIZE:-128}
PPO_MINI_BATCH_SIZE=${PPO_MINI_BATCH_SIZE:-32}
MICRO_BATCH_SIZE=${MICRO_BATCH_SIZE:-2}
N_RESP=${N_RESP:-8}
MAX_PROMPT_LENGTH=${MAX_PROMPT_LENGTH:-1024}
MAX_RESPONSE_LENGTH=${MAX_RESPONSE_LENGTH:-2048}
GPU_MEMORY_UTILIZATION=${GPU_MEMORY_UTILIZATION:-0.6}
OFFLOAD=${OFFLOAD:-True}

python3 -m verl.trainer.main_ppo --config-path=config --config-name=ppo_megatron_trainer \
    algorithm.adv_estimator=grpo \
    algorithm.use_kl_in_reward=False \
    data.train_files="$DATA_DIR/train.parquet" \
    data.val_files="$DATA_DIR/test.parquet" \
    data.train_batch_size="$TRAIN_BATCH_SIZE" \
    data.max_prompt_length="$MAX_PROMPT_LENGTH" \
    data.max_response_length="$MAX_RESPONSE_LENGTH" \
    data.filter_overlong_prompts=True \
    data.truncation=error \
    actor_rollout_ref.model.path="$MODEL_PATH" \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.ppo_mini_batch_size="$PPO_MINI_BATCH_SIZE" \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu="$MICRO_BATCH_SIZE" \
    actor_rollout_ref.actor.use_kl_loss=True \
    actor_rollout_ref.actor.kl_loss_coef=0.001 \
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \
    actor_rollout_ref.actor.entropy_coeff=0 \
    actor_rollout_ref.actor.megatron.tensor_model_parallel_size="$TRAIN_TP" \
    actor_rollout_ref.actor.megatron.pipeline_model_parallel_size="$TRAIN_PP" \
    actor_rollout_ref.actor.megatron.use_dist_checkpointing=True \
    actor_rollout_ref.actor.megatron.dist_checkpointing_path="$DIST_CKPT_PATH" \
    actor_rollout_ref.actor.megatron.param_offload="$OFFLOAD" \
    actor_rollout_ref.actor.megatron.optimizer_offload="$OFFLOAD" \
    actor_rollout_ref.ref.megatron.tensor_model_parallel_size="$TRAIN_TP" \
    actor_rollout_ref.ref.megatron.pipeline_model_parallel_size="$TRAIN_PP" \
    actor_rollout_ref.ref.megatron.use_dist_checkpointing=True \
    actor_rollout_ref.ref.megatron.dist_checkpointing_path="$DIST_CKPT_PATH" \
    actor_rollout_ref.ref.megatron.param_offload="$OFFLOAD" \
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8 \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.n="$N_RESP" \
    actor_rollout_ref.rollout.tensor_model_parallel_size="$GEN_TP" \
    actor_rollout_ref.rollout.gpu_memory_utilization="$GPU_MEMORY_UTILIZATION" \
    actor_rollout_ref.rollout.max_num_batched_tokens=8192 \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8 \
    "${BRIDGE_ARGS[@]}" \
    trainer.device=npu \
    trainer.critic_warmup=0 \
    trainer.logger='["console"]' \
    trainer.project_name=verl_ascend_gsm8k \
    trainer.experiment_name=grpo_qwen2_5_32b_a2 \
    trainer.nnodes="$NNODES" \
    trainer.n_gpus_per_node="$NPUS_PER_NODE" \
    trainer.default_local_dir="$CKPTS_DIR" \
    trainer.save_freq=50 \
    trainer.test_freq=10 \
    trainer.total_epochs=15 \
    "$@"
