#!/usr/bin/env bash
# DAPO on gsm8k, Qwen2.5-7B-Instruct, 1 node x 8 Atlas 800T A2 (910B, 64 GB).
# Megatron actor (TP2, DP4) + vLLM rollout (TP2, 4 replicas); decoupled clip (0.2/0.28), dynamic
# sampling (filter_groups on accuracy), token-level loss, overlong reward shaping, no KL / no ref.
# Where it runs (dapo_common.sh): verl >= 0.9 runs DAPO in its own `python -m verl.trainer.main_ppo`
# (no source tree needed); with VERL_SRC pointing at a verl checkout holding recipe/dapo/main_dapo.py
# (verl <= 0.7.0 in-tree; verl-recipe submodule later: git submodule update --init recipe) it runs
# `python -m recipe.dapo.main_dapo` there instead, as verl 0.7/0.8 require. Overrides only. Check:
#   verl-ascend check recipes/dapo_qwen2_5_7b_a2.sh [--verl-src $VERL_SRC]
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/a2_env.sh"
source "$HERE/megatron_bridge.sh"
source "$HERE/dapo_common.sh"

MODEL_PATH=${MODEL_PATH:-$HOME/models/Qwen2.5-7B-Instruct}
DIST_CKPT_PATH=${DIST_CKPT_PATH:-$HOME/models/Qwen2.5-7B-Instruct-mcore}
DATA_DIR=${DATA_DIR:-$HOME/data/gsm8k}
CKPTS_DIR=${CKPTS_DIR:-$HOME/ckpts/dapo_qwen2_5_7b_a2}

NNODES=${NNODES:-1}
TRAIN_TP=${TRAIN_TP:-2}
TRAIN_PP=${TRAIN_PP:-1}
GEN_TP=${GEN_TP:-2}
TRAIN_BATCH_SIZE=${TRAIN_BATCH_SIZE:-64}
GEN_BATCH_SIZE=${GEN_BATCH_SIZE:-$((TRAIN_BATCH_SIZE * 2))}
PPO_MINI_BATCH_SIZE=${PPO_MINI_BATCH_SIZE:-32}
MICRO_BATCH_SIZE=${MICRO_BATCH_SIZE:-2}
N_RESP=${N_RESP:-8}
MAX_PROMPT_LENGTH=${MAX_PROMPT_LENGTH:-1024}
MAX_RESPONSE_LENGTH=${MAX_RESPONSE_LENGTH:-2048}
OVERLONG_BUFFER_LEN=${OVERLONG_BUFFER_LEN:-512}
GPU_MEMORY_UTILIZATION=${GPU_MEMORY_UTILIZATION:-0.6}
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
    actor_rollout_ref.actor.megatron.use_dist_checkpointing=True \
    actor_rollout_ref.actor.megatron.dist_checkpointing_path="$DIST_CKPT_PATH" \
    actor_rollout_ref.actor.megatron.param_offload="$OFFLOAD" \
    actor_rollout_ref.actor.megatron.optimizer_offload="$OFFLOAD" \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.n="$N_RESP" \
    actor_rollout_ref.rollout.temperature=1.0 \
    actor_rollout_ref.rollout.top_p=1.0 \
    actor_rollout_ref.rollout.tensor_model_parallel_size="$GEN_TP" \
    actor_rollout_ref.rollout.gpu_memory_utilization="$GPU_MEMORY_UTILIZATION" \
    actor_rollout_ref.rollout.max_num_batched_tokens=8192 \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8 \
    "${DAPO_REWARD_ARGS[@]}" \
    "${BRIDGE_ARGS[@]}" \
    trainer.device=npu \
    trainer.critic_warmup=0 \
    trainer.logger='["console"]' \
    trainer.project_name=verl_ascend_gsm8k \
    trainer.experiment_name=dapo_qwen2_5_7b_a2 \
    trainer.nnodes="$NNODES" \
    trainer.n_gpus_per_node="$NPUS_PER_NODE" \
    trainer.default_local_dir="$CKPTS_DIR" \
    trainer.save_freq=50 \
    trainer.test_freq=10 \
    trainer.total_epochs=15 \
    "$@"
