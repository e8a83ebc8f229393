#!/usr/bin/env bash
# GRPO on gsm8k, Qwen3-235B-A22B (MoE, 94 layers, 128 experts), 16 nodes x 8 Atlas 800T A2 (910B, 64 GB).
# The configuration of the Qwen3-235B-on-A2 field report (docs/field-reports.md; 128 NPUs, ~2800 s/step): Megatron actor
# TP4 PP8 EP4 with 11 layers on the first and last pipeline stage (94 = 11 + 6 x 12 + 11), full
# recompute, parameter/optimizer offload; vLLM rollout TP8 with expert parallel over TP x DP = 64
# cards (2 replicas). Overrides of verl's own ppo_megatron_trainer config only.
# Multi-node: NNODES=16 bash recipes/ray_start_head.sh here, NNODES=16 bash recipes/ray_start_worker.sh
# HEAD_IP on the 15 others, then this script on the head. Check it anywhere first:
#   verl-ascend check recipes/grpo_qwen3_235b_a22b_a2.sh
# The reference model inherits the actor's override_transformer_config (pipeline split, flash
# attention): do not override ref.megatron.override_transformer_config.* key by key, that replaces
# the inherited dict and leaves the reference model with an uneven 94-layer / PP8 split.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/a2_env.sh"
source "$HERE/megatron_bridge.sh"

MODEL_PATH=${MODEL_PATH:-$HOME/models/Qwen3-235B-A22B}
# Megatron dist checkpoint, made once: python scripts/converter_hf_to_mcore.py --hf_model_path $MODEL_PATH --output_path $DIST_CKPT_PATH
DIST_CKPT_PATH=${DIST_CKPT_PATH:-$HOME/models/Qwen3-235B-A22B-mcore}
DATA_DIR=${DATA_DIR:-$HOME/data/gsm8k}
CKPTS_DIR=${CKPTS_DIR:-$HOME/ckpts/grpo_qwen3_235b_a22b_a2}

NNODES=${NNODES:-16}
TRAIN_TP=${TRAIN_TP:-4}
TRAIN_PP=${TRAIN_PP:-8}
TRAIN_EP=${TRAIN_EP:-4}
FIRST_STAGE_LAYERS=${FIRST_STAGE_LAYERS:-11}
LAST_STAGE_LAYERS=${LAST_STAGE_LAYERS:-11}
GEN_TP=${GEN_TP:-8}
GEN_DP=${GEN_DP:-8}
TRAIN_BATCH_SIZE=${TRAIN_BATCH_SIZE:-128}
PPO_MINI_BATCH_SIZE=${PPO_MINI_BATCH_SIZE:-128}
MICRO_BATCH_SIZE=${MICRO_BATCH_SIZE:-1}
N_RESP=${N_RESP:-16}
MAX_PROMPT_LENGTH=${MAX_PROMPT_LENGTH:-8192}
MAX_RESPONSE_LENGTH=${MAX_RESPONSE_LENGTH:-4096}
GPU_MEMORY_UTILIZATION=${GPU_MEMORY_UTILIZATION:-0.5}
OFFLOAD=${OFFLOAD:-True}

python3 -m verl.trainer.main_ppo --config-path=config --config-name=ppo_megatron_trainer \
    algorithm.adv_estimator=grpo \
    algorithm.use_kl_in_reward=False \
    data.train_files="$DATA_DIR/train.parquet" \
    data.val_files="$DATA_DIR/test.parquet" \
    data.train_batch_size="$TRAIN_BATCH_SIZE" \
    data.max_prompt_length="$MAX_PROMPT_LENGTH" \
    data.max_response_length="$MAX_RESPONSE_LENGTH" \
    data.filter_overlong_prompts=False \
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
    actor_rollout_ref.actor.megatron.expert_model_parallel_size="$TRAIN_EP" \
    actor_rollout_ref.actor.megatron.use_dist_checkpointing=True \
    actor_rollout_ref.actor.megatron.dist_checkpointing_path="$DIST_CKPT_PATH" \
    actor_rollout_ref.actor.megatron.param_offload="$OFFLOAD" \
    actor_rollout_ref.actor.megatron.optimizer_offload="$OFFLOAD" \
    ++actor_rollout_ref.actor.megatron.override_transformer_config.recompute_method=uniform \
    ++actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity=full \
    ++actor_rollout_ref.actor.megatron.override_transformer_config.recompute_num_layers=1 \
    ++actor_rollout_ref.actor.megatron.override_transformer_config.num_layers_in_first_pipeline_stage="$FIRST_STAGE_LAYERS" \
    ++actor_rollout_ref.actor.megatron.override_transformer_config.num_layers_in_last_pipeline_stage="$LAST_STAGE_LAYERS" \
    ++actor_rollout_ref.actor.megatron.override_transformer_config.use_flash_attn=True \
    actor_rollout_ref.ref.megatron.tensor_model_parallel_size="$TRAIN_TP" \
    actor_rollout_ref.ref.megatron.pipeline_model_parallel_size="$TRAIN_PP" \
    actor_rollout_ref.ref.megatron.expert_model_parallel_size="$TRAIN_EP" \
    actor_rollout_ref.ref.megatron.use_dist_checkpointing=True \
    actor_rollout_ref.ref.megatron.dist_checkpointing_path="$DIST_CKPT_PATH" \
    actor_rollout_ref.ref.megatron.param_offload="$OFFLOAD" \
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4 \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.n="$N_RESP" \
    actor_rollout_ref.rollout.tensor_model_parallel_size="$GEN_TP" \
    actor_rollout_ref.rollout.data_parallel_size="$GEN_DP" \
    actor_rollout_ref.rollout.expert_parallel_size=$((GEN_TP * GEN_DP)) \
    actor_rollout_ref.rollout.gpu_memory_utilization="$GPU_MEMORY_UTILIZATION" \
    actor_rollout_ref.rollout.max_num_batched_tokens=1024 \
    actor_rollout_ref.rollout.enable_chunked_prefill=True \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 \
    "${BRIDGE_ARGS[@]}" \
    trainer.device=npu \
    trainer.critic_warmup=0 \
    trainer.logger='["console"]' \
    trainer.project_name=verl_ascend_gsm8k \
    trainer.experiment_name=grpo_qwen3_235b_a22b_a2 \
    trainer.nnodes="$NNODES" \
    trainer.n_gpus_per_node="$NPUS_PER_NODE" \
    trainer.default_local_dir="$CKPTS_DIR" \
    trainer.save_freq=50 \
    trainer.test_freq=5 \
    trainer.total_epochs=15 \
    trainer.val_before_train=False \
    "$@"
