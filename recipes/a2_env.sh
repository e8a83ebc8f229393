#!/usr/bin/env bash
# Environment for verl on Atlas 800T A2 nodes (8 x Ascend 910B, 64 GB each).
# Sourced by every recipe and by ray_start_head.sh / ray_start_worker.sh: Ray workers inherit the
# environment of the `ray start` process on their node, so the same values must be set there too.
# Every value can be overridden from the calling environment.

# CANN: the toolkit's set_env.sh must be sourced before torch_npu can load. Without it, with
# torch_npu >= 2.5, `import torch` itself fails (torch loads torch_npu at import); older torch_npu
# fail later. Only sourced when present and not already done.
if [ -z "${ASCEND_HOME_PATH:-}" ] && [ -f "${ASCEND_TOOLKIT_ENV:-/usr/local/Ascend/ascend-toolkit/set_env.sh}" ]; then
  # shellcheck disable=SC1090
  source "${ASCEND_TOOLKIT_ENV:-/usr/local/Ascend/ascend-toolkit/set_env.sh}"
fi

# HCCL and Gloo must use the same, real interface on every node; one set without the other gives
# "Gloo connectFullMesh failed" / HCCL error 9. Default: the interface of the default route.
if [ -z "${SOCKET_IFNAME:-}" ]; then
  SOCKET_IFNAME=$(ip -o -4 route show to default 2>/dev/null | awk '{print $5; exit}')
  SOCKET_IFNAME=${SOCKET_IFNAME:-eth0}
fi
export HCCL_SOCKET_IFNAME=${HCCL_SOCKET_IFNAME:-$SOCKET_IFNAME}
export GLOO_SOCKET_IFNAME=${GLOO_SOCKET_IFNAME:-$SOCKET_IFNAME}
# HCCL reads "=eth0" as exactly eth0 (Gloo takes a name as is): the same interface. Which interfaces a
# prefix or a "^" exclusion selects is judged on the node by `verl-ascend doctor` (core/ifname.py).
if [ "${HCCL_SOCKET_IFNAME#=}" != "$GLOO_SOCKET_IFNAME" ]; then
  echo "a2_env.sh: warning: HCCL_SOCKET_IFNAME=$HCCL_SOCKET_IFNAME differs from GLOO_SOCKET_IFNAME=$GLOO_SOCKET_IFNAME; set both to the same interface (SOCKET_IFNAME=...)" >&2
fi

# Large models load and reshard for a long time before the first collective: the 120 s defaults
# time out on 16 nodes (the 128-NPU run in docs/field-reports.md uses 3600 s).
export HCCL_CONNECT_TIMEOUT=${HCCL_CONNECT_TIMEOUT:-3600}
export HCCL_EXEC_TIMEOUT=${HCCL_EXEC_TIMEOUT:-3600}
export HCCL_IF_BASE_PORT=${HCCL_IF_BASE_PORT:-64000}
export HCCL_ASYNC_ERROR_HANDLING=${HCCL_ASYNC_ERROR_HANDLING:-0}
# Operator dispatch queue: 2 in eager mode, 1 with graph mode.
export TASK_QUEUE_ENABLE=${TASK_QUEUE_ENABLE:-2}
# Megatron's overlap of TP communication assumes a single device queue.
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-1}
# Ray must not blank ASCEND_RT_VISIBLE_DEVICES for actors that hold no NPU.
export RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=${RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES:-1}
export RAY_DEDUP_LOGS=${RAY_DEDUP_LOGS:-0}
export HYDRA_FULL_ERROR=${HYDRA_FULL_ERROR:-1}

# Hundreds of checkpoint shards and Ray sockets per process exceed the usual 1024 open files.
ulimit -n "${NOFILE_LIMIT:-32768}" 2>/dev/null \
  || echo "a2_env.sh: warning: could not raise the open-file limit to ${NOFILE_LIMIT:-32768} (now $(ulimit -n)); raise the hard limit (limits.conf / docker --ulimit nofile=...)" >&2

# Cluster shape, shared by the recipes and the Ray scripts.
NPUS_PER_NODE=${NPUS_PER_NODE:-8}
RAY_PORT=${RAY_PORT:-6166}
RAY_DASHBOARD_PORT=${RAY_DASHBOARD_PORT:-8260}

