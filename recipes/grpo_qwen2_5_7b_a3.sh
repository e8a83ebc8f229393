#!/usr/bin/env bash
# GRPO on gsm8k, Qwen2.5-7B-Instruct, 1 node of Atlas 800T A3 (8 x 910C = 16 dies, 64 GB each).
# On A3 every die is a rank: n_gpus_per_node=16 (verl's Ascend quick start), Ray sees {"NPU": 16},
# ASCEND_RT_VISIBLE_DEVICES counts dies 0..15. Same training as grpo_qwen2_5_7b_a2.sh, twice the
# data-parallel ranks (actor TP2 -> DP8; rollout TP2 -> 8 replicas). Check it with the A3 profile:
#   verl-ascend check --device a3 recipes/grpo_qwen2_5_7b_a3.sh
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export NPUS_PER_NODE=${NPUS_PER_NODE:-16}
export TRAIN_BATCH_SIZE=${TRAIN_BATCH_SIZE:-128}
export PPO_MINI_BATCH_SIZE=${PPO_MINI_BATCH_SIZE:-64}
export EXPERIMENT_NAME=${EXPERIMENT_NAME:-grpo_qwen2_5_7b_a3}
exec bash "$HERE/grpo_qwen2_5_7b_a2.sh" "$@"
