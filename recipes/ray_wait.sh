#!/usr/bin/env bash
# ray_wait_for_npus NNODES [TIMEOUT_S]: poll `ray status` until the cluster shows NNODES x
# NPUS_PER_NODE NPU, or fail after TIMEOUT_S with what it saw. Sourced by the Ray start scripts.
ray_wait_for_npus() {
  local nnodes=$1 timeout=${2:-600}
  local want=$((nnodes * NPUS_PER_NODE)) waited=0 have=0 status_out
  while :; do
    status_out=$(timeout 60 ray status 2>/dev/null || true)
    # "Total Usage" (newer Ray) / "Usage" lines read " 0.0/16.0 NPU": take the total after the slash.
    have=$(printf '%s\n' "$status_out" | awk '$2 == "NPU" { split($1, a, "/"); printf "%d", a[2]; exit }')
    have=${have:-0}
    if [ "$have" -ge "$want" ]; then
      echo "ray cluster ready: $have NPU (wanted $nnodes nodes x $NPUS_PER_NODE = $want)"
      return 0
    fi
    if [ "$waited" -ge "$timeout" ]; then
      echo "ray cluster NOT ready after ${timeout}s: 'ray status' shows $have NPU, the job needs $want ($nnodes nodes x $NPUS_PER_NODE)." >&2
      echo "Start ray_start_worker.sh HEAD_IP on the missing nodes, check they reach the head on port $RAY_PORT and that 'npu-smi info' lists $NPUS_PER_NODE NPUs on each; raise RAY_WAIT_TIMEOUT to wait longer." >&2
      return 1
    fi
    echo "waiting for NPUs: $have/$want (${waited}s/${timeout}s)"
    sleep "${RAY_WAIT_INTERVAL:-10}"
    waited=$((waited + ${RAY_WAIT_INTERVAL:-10}))
  done
}
