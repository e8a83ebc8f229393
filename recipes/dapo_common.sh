#!/usr/bin/env bash
# Shared by the DAPO recipes: where DAPO runs from, and which config keys carry its reward settings.
# DAPO's reward keys moved when the recipes left verl: verl <= 0.7.0's in-tree recipe/dapo reads
# reward_model.reward_manager / reward_model.overlong_buffer.*; verl-recipe (verl >= 0.7.1) reads
# reward.reward_manager.name / reward.reward_kwargs.*. DAPO_LAYOUT=reward_model|reward picks one;
# by default it is read from the DAPO config in VERL_SRC (verl-ascend check sets it from the
# installed verl when no tree is given).

VERL_SRC=${VERL_SRC:-$HOME/verl}

# DAPO's hydra config names its parent as file://verl/trainer/config, relative to the working
# directory: python -m recipe.dapo.main_dapo must start in the verl checkout.
dapo_enter_verl_src() {
  if [ -f "$VERL_SRC/recipe/dapo/main_dapo.py" ]; then
    cd "$VERL_SRC"
  else
    echo "dapo: warning: VERL_SRC=$VERL_SRC has no recipe/dapo/main_dapo.py; set VERL_SRC to a verl source checkout (verl >= 0.7.1: git submodule update --init recipe)" >&2
  fi
}

# dapo_reward_args MAX_RESPONSE_LENGTH OVERLONG_BUFFER_LEN -> DAPO_REWARD_ARGS (array of overrides)
dapo_reward_args() {
  local max_resp=$1 buffer=$2 config="$VERL_SRC/recipe/dapo/config/dapo_megatron_trainer.yaml"
  if [ -z "${DAPO_LAYOUT:-}" ]; then
    if grep -qs '^reward:' "$config"; then DAPO_LAYOUT=reward
    elif [ -f "$config" ]; then DAPO_LAYOUT=reward_model
    else DAPO_LAYOUT=reward; fi
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
    *)
      echo "dapo: DAPO_LAYOUT=$DAPO_LAYOUT: use reward_model (verl <= 0.7.0 in-tree recipe) or reward (verl-recipe)" >&2
      return 2 ;;
  esac
}
