#!/usr/bin/env bash
# Shared by the DAPO recipes: where DAPO runs from, and which config keys carry its reward settings.
# DAPO's reward keys moved when the recipes left verl: verl <= 0.7.0's in-tree recipe/dapo reads
# reward_model.reward_manager / reward_model.overlong_buffer.*; verl-recipe (verl >= 0.7.1) reads
# reward.reward_manager.name / reward.reward_kwargs.*. DAPO_LAYOUT=reward_model|reward picks one;
# by default it is read from the DAPO config in VERL_SRC (verl-ascend check sets it from the
# installed verl when no tree is given).

VERL_SRC=${VERL_SRC:-$HOME/verl}

# Where DAPO runs from (dapo_entry sets DAPO_ENTRY, the trainer call, and DAPO_FILTER_ARGS):
# - VERL_SRC holds recipe/dapo/main_dapo.py (verl <= 0.7.0 in-tree, or the verl-recipe submodule of
#   verl >= 0.7.1): `python -m recipe.dapo.main_dapo`, started in that checkout (its hydra config
#   names its parent as file://verl/trainer/config, relative to the working directory).
# - otherwise: verl's own `python -m verl.trainer.main_ppo` with ppo_megatron_trainer. verl >= 0.9
#   runs DAPO there itself: algorithm.filter_groups (the v1 trainer's replay buffer refills evicted
#   groups; max_num_gen_batches is main_dapo's knob, the replay buffer bounds concurrent generation
#   with max_inflight_gen_batches instead) and reward.reward_manager.name=dapo. verl 0.7/0.8 need
#   the source tree.
dapo_entry() {
  if [ -f "$VERL_SRC/recipe/dapo/main_dapo.py" ]; then
    cd "$VERL_SRC"
    DAPO_ENTRY=(-m recipe.dapo.main_dapo --config-name=dapo_megatron_trainer)
    DAPO_FILTER_ARGS=(algorithm.filter_groups.max_num_gen_batches="${MAX_NUM_GEN_BATCHES:-10}")
  else
    DAPO_ENTRY=(-m verl.trainer.main_ppo --config-path=config --config-name=ppo_megatron_trainer)
    DAPO_FILTER_ARGS=(algorithm.filter_groups.max_inflight_gen_batches="${MAX_INFLIGHT_GEN_BATCHES:-2}")
  fi
}

# dapo_reward_args MAX_RESPONSE_LENGTH OVERLONG_BUFFER_LEN -> DAPO_REWARD_ARGS (array of overrides)
dapo_reward_args() {
  local max_resp=$1 buffer=$2 config="$VERL_SRC/recipe/dapo/config/dapo_megatron_trainer.yaml"
  if [ -z "${DAPO_LAYOUT:-}" ]; then
    if grep -qs '^reward:' "$config"; then DAPO_LAYOUT=reward
    elif [ -f "$config" ]; then DAPO_LAYOUT=reward_model
    else DAPO_LAYOUT=main_ppo; fi
  fi
  case "$DAPO_LAYOUT" in
    reward_model)
      DAPO_REWARD_ARGS=(
        reward_model.reward_manager=dapo
        reward_model.overlong_buffer.enable=True
        reward_model.overlong_buffer.len="$buffer"
        reward_model.overlong_buffer.penalty_factor=1.0
      ) ;;
    reward)
      DAPO_REWARD_ARGS=(
        reward.reward_manager.name=dapo
        reward.reward_kwargs.overlong_buffer_cfg.enable=True
        reward.reward_kwargs.overlong_buffer_cfg.len="$buffer"
        reward.reward_kwargs.overlong_buffer_cfg.penalty_factor=1.0
        reward.reward_kwargs.max_resp_len="$max_resp"
      ) ;;
    main_ppo)
      # verl >= 0.9's main_ppo: reward_kwargs is no key of its config, hence the +; its dapo manager reads
      # every key of overlong_buffer_cfg (log too: found by the rehearsal, a KeyError at the first reward)
      DAPO_REWARD_ARGS=(
        reward.reward_manager.name=dapo
        +reward.reward_kwargs.overlong_buffer_cfg.enable=True
        +reward.reward_kwargs.overlong_buffer_cfg.len="$buffer"
        +reward.reward_kwargs.overlong_buffer_cfg.penalty_factor=1.0
        +reward.reward_kwargs.overlong_buffer_cfg.log=False
        +reward.reward_kwargs.max_resp_len="$max_resp"
      ) ;;
    *)
      echo "dapo: DAPO_LAYOUT=$DAPO_LAYOUT: use reward_model (verl <= 0.7.0 in-tree recipe), reward (verl-recipe) or main_ppo (verl >= 0.9, no source tree)" >&2
      return 2 ;;
  esac
}
