"""The first table: CANN environment, file handles, Ray without NPUs, HCCL link setup and execution, NPU memory
and runtime errors (each written from the public threads it cites)."""

from .model import GH, Family, Rule

HCCL_RESULT = {  # HcclResult in CANN's hccl_types.h: the number in "HCCL function error: ..., error code is N"
    1: "HCCL_E_PARA", 2: "HCCL_E_PTR", 3: "HCCL_E_MEMORY", 4: "HCCL_E_INTERNAL", 5: "HCCL_E_NOT_SUPPORT",
    6: "HCCL_E_NOT_FOUND", 7: "HCCL_E_UNAVAIL", 8: "HCCL_E_SYSCALL", 9: "HCCL_E_TIMEOUT",
    10: "HCCL_E_OPEN_FILE_FAILURE", 11: "HCCL_E_TCP_CONNECT", 12: "HCCL_E_ROCE_CONNECT",
    13: "HCCL_E_TCP_TRANSFER", 14: "HCCL_E_ROCE_TRANSFER", 15: "HCCL_E_RUNTIME", 16: "HCCL_E_DRV",
    17: "HCCL_E_PROFILING", 18: "HCCL_E_CCE", 19: "HCCL_E_NETWORK", 20: "HCCL_E_AGAIN", 21: "HCCL_E_REMOTE",
    22: "HCCL_E_SUSPENDING",
}

FAMILIES = {f.id: f for f in (
    Family(
        "cann_not_sourced", 10, "CANN environment not loaded in the process",
        "torch_npu could not load CANN's libraries (libhccl.so, libascendcl.so, ...): the shell that started "
        "this process (for Ray workers: the shell that ran `ray start` on that node) never sourced CANN's set_env.sh.",
        "On every node, in the shell that runs `ray start`: `source /usr/local/Ascend/ascend-toolkit/set_env.sh` "
        "(and `source /usr/local/Ascend/nnal/atb/set_env.sh` for vllm-ascend / MindSpeed), then `ray stop` and "
        "`ray start` again; check with `python -c 'import torch, torch_npu; print(torch.npu.is_available())'` on each node.",
        (GH + "vllm-project/vllm-ascend/issues/262", GH + "flashserve/flash-linear-attention-npu/issues/2"),
    ),
    Family(
        "file_handles", 15, "Out of file handles",
        "The process hit its open-file limit (errno 24): Ray workers, HCCL sockets, dataloader workers and "
        "checkpoint shards each hold descriptors, and `ray start` passes its shell's `ulimit -n` to every worker.",
        "`ulimit -n 65536` in the shell that runs `ray start` on every node (raise the hard limit in "
        "/etc/security/limits.conf: `* - nofile 65536`), then restart Ray; `verl-ascend doctor` checks it.",
        (GH + "verl-project/verl/issues/3642", GH + "verl-project/verl/issues/2047"),
    ),
    Family(
        "ray_no_npu", 20, "Ray does not see the NPUs",
        "Ray scheduled the worker without NPU resources: the node's raylet registered no `NPU` resource (CANN not "
        "sourced when `ray start` ran, or the resource not declared), or the actor was placed as CPU-only.",
        "`ray status` on the head must list `NPU` = nodes x 8. Start each node with CANN sourced and "
        "`ray start ... --resources='{\"NPU\": 8}'`, with `export RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1` "
        "set before it; submit with `ray job submit` only to a cluster started that way.",
        (GH + "verl-project/verl/issues/6741", GH + "ray-project/ray/issues/55137", GH + "vllm-project/vllm-ascend/issues/3114"),
    ),
    Family(
        "hccp_busy", 25, "Previous job still holds the NPU",
        "HCCL could not start its HCCP process on the device (EJ0001): a process of an earlier run still owns the NPU.",
        "`npu-smi info` lists the processes on each card: stop the leftover ones (by pid) or `ray stop --force` on "
        "that node, wait ~10 s, start again.",
        (GH + "verl-project/verl/pull/332",),
    ),
    Family(
        "port_in_use", 30, "HCCL / rendezvous port already in use",
        "A port HCCL (from HCCL_IF_BASE_PORT, default 60000, one per device) or torch's rendezvous "
        "(MASTER_PORT) needs is held by another process: another job on the same node or a leftover of this one.",
        "Find the holder: `ss -ltnp | grep :<port>` (the port is printed above); stop it, or give each job on a "
        "shared node its own range on every node: `export HCCL_IF_BASE_PORT=61000` (jobs at least 16 ports apart); "
        "for the rendezvous port choose another `MASTER_PORT`. `verl-ascend doctor` checks the range.",
        (GH + "vllm-project/vllm-ascend/issues/405", GH + "vllm-project/vllm-ascend/issues/11968",
         GH + "vllm-project/vllm-ascend/pull/16205", GH + "vllm-project/vllm-ascend/issues/4725"),
    ),
    Family(
        "tls_mismatch", 35, "TLS switch differs between NPUs",
        "HCCL's link setup needs the same TLS switch on both ends; with one device enabled and another disabled "
        "the socket handshake fails and both ends time out.",
        "On every node: `for i in {0..7}; do hccn_tool -i $i -tls -g | grep switch; done`; make them equal, e.g. "
        "`for i in {0..7}; do hccn_tool -i $i -tls -s enable 0; done` where `tls switch[1]` (or enable 1 everywhere).",
        (GH + "vllm-project/vllm-ascend/issues/9447", GH + "vllm-project/vllm-ascend/issues/1955"),
    ),
    Family(
        "wrong_nic", 40, "Wrong host network interface for HCCL / Gloo",
        "HCCL or Gloo picked a host interface the other nodes cannot reach (docker0, a management NIC, or HCCL "
        "and Gloo on different interfaces), so the rendezvous sockets never connect.",
        "`ip -4 addr` on every node: take the interface carrying the address the nodes reach each other by (the Ray "
        "head / MASTER_ADDR network), then on every node before `ray start`: `export HCCL_SOCKET_IFNAME=<if>` and "
        "`export GLOO_SOCKET_IFNAME=<if>` (the same interface), or `export HCCL_IF_IP=<this node's IP>`; "
        "`verl-ascend doctor --nnodes N` checks both.",
        (GH + "gpustack/gpustack/pull/3311", GH + "pytorch/pytorch/pull/14065", GH + "aws-samples/aws-do-eks/pull/51",
         "https://www.hiascend.com/document/detail/zh/CANNCommunityEdition/80RC3alpha003/apiref/envref/envref_07_0075.html"),
    ),
    Family(
        "device_network", 45, "NPU device network (RoCE) not usable between ranks",
        "The device-side link between two ranks could not be created: device IPs (/etc/hccn.conf) on another "
        "segment or duplicated, a port down, or the peer NPU unhealthy.",
        "On every node: `cat /etc/hccn.conf` / `for i in {0..7}; do hccn_tool -i $i -ip -g; done` (distinct IPs, "
        "reachable subnets), `hccn_tool -i $i -link -g` (UP), `hccn_tool -i $i -net_health -g` (Success), "
        "`hccn_tool -i 0 -ping -g address <peer device IP>`; fix the addresses with `hccn_tool -i $i -ip -s address "
        "<ip> netmask <mask>`.",
        (GH + "vllm-project/vllm-ascend/issues/3162", GH + "verl-project/verl/issues/3947"),
    ),
    Family(
        "npu_oom", 50, "NPU out of memory",
        "An allocation on the NPU failed: the phase that failed (rollout KV cache, log-prob, update) needs more "
        "than the 64 GB HBM left after the other resident models / caches.",
        "Rollout: lower `actor_rollout_ref.rollout.gpu_memory_utilization` (e.g. 0.5) or `max_num_batched_tokens`; "
        "training: lower `ppo_micro_batch_size_per_gpu` / `log_prob_micro_batch_size_per_gpu`, turn on "
        "`actor_rollout_ref.actor.fsdp_config.param_offload=True` and `optimizer_offload=True` (Megatron: "
        "`actor_rollout_ref.actor.megatron.param_offload` etc.); reserved >> allocated (fragmentation): "
        "`export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True` only where no vLLM sleep mode runs in the process "
        "-- a colocated vLLM rollout in sleep mode (verl's default: `actor_rollout_ref.rollout.enable_sleep_mode`, "
        "`free_cache_engine` before verl 0.9) asserts on it in vllm-ascend (vllm-ascend PR 9242 is open); there "
        "keep `expandable_segments` off and lower `gpu_memory_utilization` / the micro batch sizes instead; "
        "check the HBM estimate and this combination with `verl-ascend check RECIPE.sh`.",
        (GH + "vllm-project/vllm-ascend/issues/1127", GH + "verl-project/verl/issues/2837",
         GH + "vllm-project/vllm-ascend/pull/9242"),
    ),
    Family(
        "npu_runtime", 55, "AI Core / NPU runtime error",
        "A kernel failed on the device (EZ9999 AI Core / vector core exception, ACL_ERROR_RT_*, aclnn error): an "
        "operator bug or an out-of-range input, or CANN, driver and torch_npu versions that do not match.",
        "Rerun with `export ASCEND_LAUNCH_BLOCKING=1` so the traceback names the failing operator; compare "
        "versions with `npu-smi info` (driver) and `verl-ascend doctor` (CANN, torch_npu); card health: "
        "`npu-smi info -t health -i <card>`; the device log under ~/ascend/log/debug/device-<id>/ names the kernel.",
        (GH + "vllm-project/vllm-ascend/issues/4859", GH + "Ascend/pytorch/issues/66", GH + "vllm-project/vllm-ascend/issues/4284"),
    ),
    Family(
        "hccl_connect_timeout", 60, "HCCL link setup timed out",
        "Not every rank connected within HCCL_CONNECT_TIMEOUT (default 120 s): either some rank reached "
        "communicator creation late (slow model loading, or it failed earlier), or the link cannot be made "
        "(wrong host NIC, device IPs unreachable, TLS differing).",
        "1) If the first and last reports (the `seen` line) are further apart than the timeout, a rank was late: "
        "`export HCCL_CONNECT_TIMEOUT=1800` on every node before `ray start`. 2) Otherwise set the interface: "
        "`export HCCL_SOCKET_IFNAME=<if>` and `GLOO_SOCKET_IFNAME=<if>` (same interface, every node). "
        "3) `for i in {0..7}; do hccn_tool -i $i -link -g; hccn_tool -i $i -tls -g | grep switch; "
        "hccn_tool -i $i -net_health -g; done` on every node: links UP, TLS equal, health Success.",
        (GH + "vllm-project/vllm-ascend/issues/1955", GH + "vllm-project/afd-plugin/issues/229",
         GH + "modelscope/ms-swift/pull/8281"),
    ),
    Family(
        "rollout_long_tail", 65, "Collective timed out while a rollout was still generating",
        "Training ranks waited in a collective while rollout was still generating the longest responses (a long "
        "tail): the wait outlasted HCCL_EXEC_TIMEOUT / the process-group timeout.",
        "`export HCCL_EXEC_TIMEOUT=7200` on every node before `ray start` and the process-group timeout to match: "
        "`actor_rollout_ref.nccl_timeout=7200` (600 s by default in verl 0.6.1 and 0.9.1); cap the tail (`data.max_response_length`); spread "
        "long prompts over rollout workers: `VERL_ASCEND_ROLLOUT_ORDER=tiled` (verl ≤ 0.6 sync rollout).",
        (GH + "verl-project/verl/issues/2995", GH + "vllm-project/vllm-ascend/issues/3413"),
    ),
    Family(
        "hccl_exec_timeout", 70, "Collective timed out: a rank arrived late",
        "A collective waited longer than HCCL_EXEC_TIMEOUT (default 1800 s) or the process-group timeout: the "
        "peer (see 'late rank') had not arrived — still busy (rollout, checkpoint), hung, or dead after an error.",
        "Look at the late rank and at any earlier error of another family first. If it was only slow: "
        "`export HCCL_EXEC_TIMEOUT=7200` on every node before `ray start` and `actor_rollout_ref.nccl_timeout=7200` "
        "(verl's process-group timeout, 600 s by default in 0.6.1 and 0.9.1: the watchdog's `Timeout(ms)` shows which "
        "one fired).",
        (GH + "vllm-project/vllm-ascend/issues/3413", GH + "vllm-project/vllm-ascend/issues/382",
         GH + "vllm-project/vllm-ascend/issues/486"),
    ),
    Family(
        "stream_sync_timeout", 75, "NPU stream synchronisation timed out",
        "The host waited for an NPU stream longer than allowed: a kernel or collective on it never finished "
        "(an HCCL wait behind it shows as EI0002 on the same rank).",
        "Rerun with `export ASCEND_LAUNCH_BLOCKING=1` to see the operator; if an HCCL wait is behind it, see the "
        "collective timeout finding (`HCCL_EXEC_TIMEOUT`); card health: `npu-smi info -t health -i <card>`.",
        (GH + "Ascend/pytorch/issues/66", GH + "hiyouga/LlamaFactory/issues/5551", GH + "vllm-project/vllm-ascend/issues/1443"),
    ),
    Family(
        "hccl_call_failed", 90, "HCCL call failed",
        "An HCCL API returned an error (the code's name is given); the specific reason is in the CANN log of the "
        "failing rank.",
        "On that rank's node: `grep -h ERROR ~/ascend/log/debug/plog/plog-<pid>_*.log | head` and run "
        "`verl-ascend diagnose` on that plog folder too; code 4 on a multi-node job: check the device network "
        "(`hccn_tool -i $i -link -g`, /etc/hccn.conf).",
        (GH + "vllm-project/vllm-ascend/issues/1704", GH + "verl-project/verl/issues/5074", GH + "vllm-project/vllm-ascend/issues/3008"),
    ),
)}

_HCCL_INIT = r"(?:hcclCommInitRootInfo\w*|HcclCommInitRootInfo\w*|HcclGetRootInfo|hcclCommInitRank\w*)\(.*error code is "

RULES = (
    # CANN not sourced
    Rule("cann_not_sourced", (".so: cannot open shared object",),
         r"lib(?:hccl|ascendcl|acl_op_compiler|ge_runner|graph|runtime|opapi|nnopbase|ascend_hal|msprofiler)\w*\.so[\w.]*: "
         r"cannot open shared object file"),
    Rule("cann_not_sourced", ("Failed to load the backend extension",),
         r"Failed to load the backend extension: torch_npu"),
    # limits
    Rule("file_handles", ("Too many open files",), r"Too many open files|\[Errno 24\]"),
    # Ray / device visibility
    Rule("ray_no_npu", ("(PlatformNPU)",), r"\(PlatformNPU\) is registered but not available", any_level=True),
    Rule("ray_no_npu", ("The following resource request cannot be scheduled",), r"cannot be scheduled right now: \{[^}]*'NPU'", any_level=True),
    Rule("ray_no_npu", ("No available node types can fulfill",), r"No available node types can fulfill resource request.*NPU",
         any_level=True),
    Rule("ray_no_npu", ("Total available GPUs",), r"Total available GPUs \d+ is less than total desired GPUs"),
    # previous process
    Rule("hccp_busy", ("EJ0001", "Failed to initialize the HCCP"), r"EJ0001|Failed to initialize the HCCP process"),
    # ports
    Rule("port_in_use", ("EJ0003", "Failed to bind the IP port"), r"EJ0003|Failed to bind the IP port"),
    Rule("port_in_use", ("EI0019",), r"EI0019|Bind_IP_Port"),
    Rule("port_in_use", ("ERROR] HCCL", "specific port["), r"listen on ip\[[^\]]*\] and specific port\[\d+\] fail"),
    Rule("port_in_use", ("start failed, port[",), r"nic listen start failed, port\[\d+\]"),
    Rule("port_in_use", ("EADDRINUSE", "Address already in use"), r"EADDRINUSE|Address already in use"),
    # TLS
    Rule("tls_mismatch", ("EI0016", "ERROR] HCCL"),
         r"EI0016|for config \"tls\" is invalid|rankList for disabled tls"),
    # NIC
    Rule("wrong_nic", ("Gloo connectFullMesh",), r"Gloo connectFullMesh failed"),
    Rule("wrong_nic", ("Unable to find address for",), r"Unable to find address for: \S+"),  # Gloo: no such interface
    Rule("wrong_nic", ("HCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "HCCL_IF_IP"),
         r"(?:HCCL_SOCKET_IFNAME|HCCL_IF_IP|GLOO_SOCKET_IFNAME)\W.*(?:invalid|not found|not exist|fail|no valid|error)"),
    # device network
    Rule("device_network", ("EI0009", "Transport init error"), r"EI0009|Transport init error"),
    Rule("device_network", ("HCCL function error",), _HCCL_INIT + r"4\b"),
    # memory
    Rule("npu_oom", ("NPU out of memory",), r"NPU out of memory\. Tried to allocate"),
    Rule("npu_oom", ("EL0004",), r"\bEL0004\b"),
    # device runtime
    Rule("npu_runtime", ("EZ9999",), r"\bEZ9999\b"),
    # the runtime refused an operator's launch arguments (a kernel launched with a grid it cannot have)
    Rule("npu_runtime", ("EE1001",), r"\bEE1001\b"),
    Rule("npu_runtime", ("The aicore execution", "The vector core execution"), r"The (?:aicore|vector core) execution is abnormal"),
    Rule("npu_runtime", ("ACL_ERROR_RT_",), r"ACL_ERROR_RT_(?!STREAM_SYNC_TIMEOUT)\w+"),
    Rule("npu_runtime", ("NPU function error",),
         r"(?:call aclnn\w+ failed|NPU function error: .*), error code is (?:50701[0-9]|50703[0-9]|561\d{3})\b"),
    # connect-stage timeouts
    Rule("hccl_connect_timeout", ("HCCL function error",), _HCCL_INIT + r"9\b"),
    Rule("hccl_connect_timeout", ("Getting socket times out",),
         r"Getting socket times out(?!\. Reason: Remote Rank did not send)"),
    Rule("hccl_connect_timeout", ("ERROR] HCCL",),
         r"wait socket establish timeout|topo exchange (?:server|agent) get socket timeout"),
    # execution-stage timeouts
    Rule("hccl_exec_timeout", ("EI0002", "ERROR] HCCL"), r"\bEI0002\b|The wait execution of the Notify register times out"),
    Rule("hccl_exec_timeout", ("Watchdog caught collective operation timeout",),
         r"Watchdog caught collective operation timeout: WorkHCCL"),
    Rule("hccl_exec_timeout", ("Remote Rank did not send",), r"Remote Rank did not send the data in time"),
    # the device's own report of an HCCL task that waited past HCCL_EXEC_TIMEOUT (EI9999 / EZ9999 text)
    Rule("hccl_exec_timeout", ("fftsplus task timeout",), r"hccl fftsplus task timeout occurred"),
    # stream sync
    Rule("stream_sync_timeout", ("SynchronizeStreamWithTimeout", "SynchronizeDeviceWithTimeout", "aclrtSynchronize", "EE1002",
                                 "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT"),
         r"Aclrt?Synchronize(?:Stream|Device)WithTimeout|aclrtSynchronize\w*, error code is 50704\d|\bEE1002\b|"
         r"Stream synchronize timeout|ACL_ERROR_RT_STREAM_SYNC_TIMEOUT"),
    # generic HCCL
    Rule("hccl_call_failed", ("ERR02200",), r"\bERR02200\b"),
    Rule("hccl_call_failed", ("HCCL function error",), r"HCCL function error: .*error code is \d+"),
)
