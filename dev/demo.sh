#!/usr/bin/env bash
# The main job on a machine without NPUs: everything a user does before booking an A2 cluster,
# including one rehearsal of a shipped recipe through verl's real training loop on CPU.
# Run inside a test environment:  dev/with-verl.sh 0.9.1 -- bash dev/demo.sh
# Outputs go to ${DEMO_OUT:-/tmp/verl-ascend-demo}.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${DEMO_OUT:-/tmp/verl-ascend-demo}
mkdir -p "$out"
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. plugin status in this environment (no NPU here: NPU-only patches say why they do not apply)"
verl-ascend status

recipe=recipes/grpo_qwen2_5_7b_a2.sh
step "2. check the shipped 7B GRPO A2 recipe against the installed verl (no NPU needed; nothing of it runs here)"
# every shipped recipe: for r in recipes/*_a2.sh; do verl-ascend check "$r"; done  (~20 s each on 2 cores)
verl-ascend check "$recipe" || { rc=$?; [ "$rc" -le 1 ] || { echo "recipe $recipe has errors" >&2; exit "$rc"; }; }

step "3. rehearse the 7B GRPO recipe as shipped: verl's real main_ppo and Megatron engine on CPU, tiny model, 2 steps + dist-ckpt save + resume"
rm -rf "$out/rehearsal"  # this demo's own folder: a rehearsal refuses to start over an earlier one's checkpoints
verl-ascend rehearse "$recipe" --out "$out/rehearsal"

step "4. gsm8k -> verl parquet from the sample shipped with verl-ascend (offline)"
python scripts/gsm8k.py --sample --local_dir "$out/gsm8k"

step "5. training-log analysis of a recorded A2 run (the field report's step line + synthetic steps)"
# the fixture holds two deliberately malformed step lines: exit 1 (skipped lines) is expected here
verl-ascend logs tests/fixtures/verl_steps.log --world-size 128 --csv "$out/steps.csv" --plot "$out/steps.png" \
  || [ $? -eq 1 ]

step "done: outputs in $out"
ls -la "$out" "$out/gsm8k"
