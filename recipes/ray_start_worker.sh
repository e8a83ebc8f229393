#!/usr/bin/env bash
# Join an A2 node to the Ray cluster started by ray_start_head.sh:
#   NNODES=16 bash recipes/ray_start_worker.sh HEAD_IP
# Waits (RAY_WAIT_TIMEOUT s, default 900) until the whole cluster shows NNODES x NPUS_PER_NODE NPU,
# so a node that joined but sees no peers says so instead of idling.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/a2_env.sh"
source "$HERE/ray_wait.sh"
HEAD_IP=${1:-${HEAD_IP:-}}
if [ -z "$HEAD_IP" ]; then
  echo "usage: NNODES=N $0 HEAD_IP   (the address of the node running ray_start_head.sh)" >&2
  exit 2
fi
NNODES=${NNODES:-1}
ray start --address="$HEAD_IP:$RAY_PORT" --resources="{\"NPU\": $NPUS_PER_NODE}"
ray_wait_for_npus "$NNODES" "${RAY_WAIT_TIMEOUT:-900}"
