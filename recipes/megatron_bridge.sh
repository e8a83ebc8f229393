#!/usr/bin/env bash
# Sourced by the Megatron recipes after a2_env.sh (not by the Ray start scripts: a node needs no bridge choice).
# Which bridge verl's Megatron workers build the model through (BRIDGE_ARGS, appended by every
# Megatron recipe). Our choice: mbridge. It is what our A2 install provides (docs/recipes.md: pip install
# mbridge, no Transformer Engine needed), what our converter writes checkpoints with, and the only bridge
# of verl <= 0.7. verl >= 0.8 defaults to NVIDIA Megatron-Bridge (megatron.vanilla_mbridge=False), which
# needs the megatron-bridge package on every node; verl <= 0.7 rejects the key. A launch script cannot tell
# which verl it meets, so `verl-ascend bridge NAME` (installed with verl-ascend) prints the overrides that
# select NAME on the installed verl: `vanilla_mbridge=True` there, nothing on verl <= 0.7.
#   MEGATRON_BRIDGE=mbridge           (default) mbridge
#   MEGATRON_BRIDGE=megatron-bridge   NVIDIA Megatron-Bridge (verl >= 0.8; the package on every node)
#   MEGATRON_BRIDGE=verl-default      pass nothing: whatever the installed verl defaults to
# `verl-ascend check` names the bridge the run will import and whether it is installed.
MEGATRON_BRIDGE=${MEGATRON_BRIDGE:-mbridge}
case "$MEGATRON_BRIDGE" in
  mbridge|megatron-bridge)
    if ! command -v verl-ascend >/dev/null; then
      echo "megatron_bridge.sh: MEGATRON_BRIDGE=$MEGATRON_BRIDGE needs verl-ascend on PATH (pip install verl-ascend), or set MEGATRON_BRIDGE=verl-default" >&2
      exit 2
    fi
    bridge_out=$(verl-ascend bridge "$MEGATRON_BRIDGE") || exit 2
    read -r -a BRIDGE_ARGS <<< "$bridge_out" ;;
  verl-default) BRIDGE_ARGS=() ;;
  *) echo "megatron_bridge.sh: MEGATRON_BRIDGE=$MEGATRON_BRIDGE: use mbridge, megatron-bridge, or verl-default" >&2
     exit 2 ;;
esac
