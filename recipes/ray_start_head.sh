#!/usr/bin/env bash
# Start the Ray head on the first A2 node and wait until all NNODES nodes have joined.
#   NNODES=16 bash recipes/ray_start_head.sh
# then run ray_start_worker.sh HEAD_IP on every other node; launch the recipe on this node once
# this script reports the cluster ready. RAY_WAIT_TIMEOUT (s, default 900) bounds the wait.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/a2_env.sh"
source "$HERE/ray_wait.sh"
NNODES=${NNODES:-1}
# Ray detects the head's NPUs itself (as in the 128-NPU run of docs/field-reports.md); workers declare theirs explicitly.
ray start --head --port "$RAY_PORT" --dashboard-host=0.0.0.0 --dashboard-port "$RAY_DASHBOARD_PORT"
ray_wait_for_npus "$NNODES" "${RAY_WAIT_TIMEOUT:-900}"
