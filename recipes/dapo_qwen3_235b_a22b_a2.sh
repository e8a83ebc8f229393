#!/usr/bin/env bash
# DAPO on gsm8k, Qwen3-235B-A22B (MoE, 94 layers, 128 experts), 16 nodes x 8 Atlas 800T A2 (910B, 64 GB).
# The parallel layout of the Qwen3-235B-on-A2 field report (docs/field-reports.md): Megatron actor TP4 PP8 EP4, 11 layers on
# the first and last pipeline stage (94 = 11 + 6 x 12 + 11), full recompute, parameter/optimizer
# offload; vLLM rollout TP8 with expert parallel over TP x DP = 64 cards (2 replicas). DAPO:
# decoupled clip (0.2/0.28), dynamic sampling (filter_groups on accuracy), token-level loss,
# overlong reward shaping, no KL / no reference model.
# Where it runs (dapo_common.sh): verl >= 0.9 runs DAPO in its own `python -m verl.trainer.main_ppo`
# (no source tree needed); with VERL_SRC pointing at a verl checkout holding recipe/dapo/main_dapo.py
# (verl <= 0.7.0 in-tree; verl-recipe submodule later: git submodule update --init recipe) it runs
# `python -m recipe.dapo.main_dapo` there instead, as verl 0.7/0.8 require. Overrides only.
# Multi-node: NNODES=16 bash recipes/ray_start_head.sh here, NNODES=16 bash
# recipes/ray_start_worker.sh HEAD_IP on the 15 others, then this script on the head. Check:
#   verl-ascend check recipes/dapo_qwen3_235b_a22b_a2.sh [--verl-src $VERL_SRC]
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/a2_env.sh"
source "$HERE/megatron_bridge.sh"
source "$HERE/dapo_common.sh"

MODEL_PATH=${MODEL_PATH:-$HOME/models/Qwen3-235B-A22B}
DIST_CKPT_PATH=${DIST_CKPT_PATH:-$HOME/models/Qwen3-235B-A22B-mcore}
DATA_DIR=${DATA_DIR:-$HOME/data/gsm8k}
CKPTS_DIR=${CKPTS_DIR:-$HOME/ckpts/dapo_qwen3_235b_a22b_a2}

NNODES=${NNODES:-16}
TRAIN_TP=${TRAIN_TP:-4}
TRAIN_PP=${TRAIN_PP:-8}
TRAIN_EP=${TRAIN_EP:-4}
FIRST_STAGE_LAYERS=${FIRST_STAGE_LAYERS:-11}
LAST_STAGE_LAYERS=${LAST_STAGE_LAYERS:-11}
GEN_TP=${GEN_TP:-8}
GEN_DP=${GEN_DP:-8}
TRAIN_BATCH_SIZE=${TRAIN_BATCH_SIZE:-128}
GEN_BATCH_SIZE=${GEN_BATCH_SIZE:-$((TRAIN_BATCH_SIZE * 2))}
PPO_MINI_BATCH_SIZE=${PPO_MINI_BATCH_SIZE:-64}
MICRO_BATCH_SIZE=${MICRO_BATCH_SIZE:-1}
N_RESP=${N_RESP:-16}
MAX_PROMPT_LENGTH=${MAX_PROMPT_LENGTH:-2048}
MAX_RESPONSE_LENGTH=${MAX_RESPONSE_LENGTH:-8192}
OVERLONG_BUFFER_LEN=${OVERLONG_BUFFER_LEN:-2048}
GPU_MEMORY_UTILIZATION=${GPU_MEMORY_UTILIZATION:-0.5}
OFFLOAD=${OFFLOAD:-True}

dapo_entry
dapo_reward_args "$MAX_RESPONSE_LENGTH" "$OVERLONG_BUFFER_LEN"

python3 "${DAPO_ENTRY[@]}" \
    algorithm.adv_estimator=grpo \
    algorithm.use_kl_in_reward=False \
    algorithm.kl_ctrl.kl_coef=0.0 \
    algorithm.filter_groups.enable=True \
    algorithm.filter_groups.metric=acc \
    "${DAPO_FILTER_ARGS[@]}" \
    data.train_files="$DATA_DIR/train.parquet" \
    data.val_files="$DATA_DIR/test.parquet" \
    data.train_batch_size="$TRAIN_BATCH_SIZE" \
    data.gen_batch_size="$GEN_BATCH_SIZE" \
    data.max_prompt_length="$MAX_PROMPT_LENGTH" \
    data.max_response_length="$MAX_RESPONSE_LENGTH" \
    data.filter_overlong_prompts=True \
    data.truncation=left \
    actor_rollout_ref.model.path="$MODEL_PATH" \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.optim.weight_decay=0.1 \
    actor_rollout_ref.actor.ppo_mini_batch_size="$PPO_MINI_BATCH_SIZE" \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu="$MICRO_BATCH_SIZE" \
    actor_rollout_ref.actor.use_kl_loss=False \
    actor_rollout_ref.actor.kl_loss_coef=0.0 \
    actor_rollout_ref.actor.clip_ratio_low=0.2 \
    actor_rollout_ref.actor.clip_ratio_high=0.28 \
    actor_rollout_ref.actor.clip_ratio_c=10.0 \
    actor_rollout_ref.actor.loss_agg_mode=token-mean \
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
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.n="$N_RESP" \
    actor_rollout_ref.rollout.temperature=1.0 \
    actor_rollout_ref.rollout.top_p=1.0 \
    actor_rollout_ref.rollout.tensor_model_parallel_size="$GEN_TP" \
    actor_rollout_ref.rollout.data_parallel_size="$GEN_DP" \
    actor_rollout_ref.rollout.expert_parallel_size=$((GEN_TP * GEN_DP)) \
    actor_rollout_ref.rollout.gpu_memory_utilization="$GPU_MEMORY_UTILIZATION" \
    actor_rollout_ref.rollout.max_num_batched_tokens=4096 \
    actor_rollout_ref.rollout.enable_chunked_prefill=True \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 \
    "${DAPO_REWARD_ARGS[@]}" \
    "${BRIDGE_ARGS[@]}" \
    trainer.device=npu \
    trainer.critic_warmup=0 \
    trainer.logger='["console"]' \
    trainer.project_name=verl_ascend_gsm8k \
    trainer.experiment_name=dapo_qwen3_235b_a22b_a2 \
    trainer.nnodes="$NNODES" \
    trainer.n_gpus_per_node="$NPUS_PER_NODE" \
    trainer.default_local_dir="$CKPTS_DIR" \
    trainer.save_freq=50 \
    trainer.test_freq=5 \
    trainer.total_epochs=15 \
    trainer.val_before_train=False \
    "$@"
