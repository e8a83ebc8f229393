"""Ray on Ascend: a cluster started with GPUs instead of NPUs, Ray rewriting the visible devices, Ray's memory monitor."""

from verl_ascend.core import runlog

from .model import GH, Family, Rule

# Ray's line when a node stops answering (the driver's WARNING, the GCS's error); group 1 is the node's address when
# Ray gives it (scan.py reads it for the headline)
NODE_MARKED_DEAD = (r"node (?:with )?(?:node|client) (?:id|ID):? .+? (?:and (?:address|ip): (\S+) .*?)?has been marked dead "
                    r"because the (?:detector|monitor) has missed too many heartbeats")
# the rehearsal's own verdict on a worker node it killed (rehearse --fault worker-node; rehearse/cluster.py writes it,
# tests/process/test_rehearse_nodes_fault.py reads a real one back through diagnose); group 1 is the address
OWN_VERDICT = runlog.own_verdict_pattern()

# How late Ray's line can be: the GCS marks a node dead after health_check_failure_threshold (5) failed checks, each
# failing at once (a refused connection; checks health_check_period_ms = 3 s apart) or after health_check_timeout_ms
# (10 s: a machine gone): 15-50 s after the death with Ray's defaults, plus 10 s (a margin, not measured) for the
# line's way to the driver. Meanwhile the actors that called into the node fail first (`ActorUnavailableError ...
# failed to connect to all addresses`, 3 s before Ray's line in a CI run of this project's two-node rehearsal):
# those lines are the death's echo.
RAY_HEALTH_CHECK = GH + "ray-project/ray/blob/master/src/ray/common/ray_config_def.h"
HEALTH_CHECK_LAG = 5 * 10 + 10

FAMILIES = {f.id: f for f in (
    Family(
        "host_oom_killed", 16, "Ray's memory monitor killed a worker (host RAM)",
        "The node's host memory passed Ray's threshold (RAY_memory_usage_threshold, 0.95 by default) and Ray killed "
        "a worker to save the node: model loading, CPU offload or a large dataset in one process.",
        "Give the run more host RAM or need less of it (fewer `data.dataloader_num_workers`, offload off, a smaller "
        "rollout batch); to let the run use the memory anyway: `export RAY_memory_usage_threshold=0.99` before "
        "`ray start` (`RAY_memory_monitor_refresh_ms=0` turns the monitor off; the kernel's OOM killer then decides).",
        ("https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html", GH + "verl-project/verl/issues/6741",
         GH + "ray-project/ray/pull/27716", GH + "ray-project/ray/pull/30312", GH + "primihub/primihub-platform/issues/122",
         GH + "ray-project/ray/issues/28778", GH + "flwrlabs/flower/issues/2157"),
    ),
    Family(
        "ray_started_with_gpus", 21, "Ray was started with GPUs, so no NPU resource exists",
        "`ray start --num-gpus=N` registers N `GPU` and no `NPU`: vLLM-Ascend and verl ask Ray for `NPU`, find none "
        "on the node (`current_node_resource={... 'GPU': 8.0}`) and stop.",
        "`ray stop` on every node, then `ray start --head --resources='{\"NPU\": 8}'` (workers: `ray start "
        "--address=<head>:6379 --resources='{\"NPU\": 8}'`) without `--num-gpus`; `ray status` must list `NPU`.",
        (GH + "vllm-project/vllm-ascend/issues/3114", GH + "vllm-project/vllm-ascend/issues/2879",
         GH + "vllm-project/vllm-ascend/issues/8306"),
    ),
    Family(
        "ray_node_died", 34, "Ray lost a node: every actor on it died with it",
        "Ray's GCS stopped hearing from a node's raylet and marked the node dead (`The node with node id: ... and "
        "address: <ip> ... has been marked dead because the detector has missed too many heartbeats from it`): the "
        "machine went down, its raylet was killed (the kernel's OOM killer, a `ray stop` there) or it could not "
        "answer in time (a saturated host, a network partition). Every actor on that node died with it: the "
        "trainer's ranks there, rollout servers, TransferQueue storage units. verl does not replace them; on its "
        "TransferQueue path (verl 0.9's default `trainer.use_v1`) a put to a dead storage unit is retried before "
        "the loop fails (TransferQueue 0.1.11: `TQ_SIMPLE_STORAGE_MAX_ATTEMPTS` tries, 3, of "
        "`TQ_SIMPLE_STORAGE_SEND_RECV_TIMEOUT` s, 200, both read from the environment; measured in a rehearsal: "
        "3 x 200 s), so the run can look hung rather than failed.",
        "On the node named here: `dmesg -T | grep -i -E 'killed process|out of memory'`, its "
        "/tmp/ray/session_latest/logs/raylet.out, and whether it is up at all. Then restart Ray there "
        "(`ray_start_worker.sh <head ip>`), copy the last checkpoint to every node (`verl-ascend ckpt sync <ckpt dir> "
        "--nodes ...`) and resume. A node that was only slow: give it headroom (fewer CPU-heavy processes) or raise "
        "`RAY_health_check_failure_threshold` on the head before `ray start`.",
        (GH + "ray-project/ray/issues/44680", GH + "ray-project/ray/issues/59193", GH + "ray-project/ray/issues/15128",
         GH + "ray-project/ray/issues/18449", RAY_HEALTH_CHECK, "https://pypi.org/project/TransferQueue/0.1.11/"),
        lag=HEALTH_CHECK_LAG,
    ),
    Family(
        "visible_devices_rewritten", 26, "Ray's ASCEND_RT_VISIBLE_DEVICES does not match what the launcher expects",
        "Ray rewrites ASCEND_RT_VISIBLE_DEVICES for each actor to the NPUs it assigned, unless "
        "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1 was exported before `ray start`. A launcher that indexes "
        "devices the other way then asks for a device the process cannot see (`Invalid device ID`, `Error setting "
        "ASCEND_RT_VISIBLE_DEVICES: local range ...`) or puts tensors on npu:0 in every actor.",
        "Choose one mode on every node and restart Ray: verl's Ray trainer lets Ray set the variable (unset "
        "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES, leave ASCEND_RT_VISIBLE_DEVICES unset); vLLM-Ascend's own "
        "Ray executor wants `export RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1` with "
        "`ASCEND_RT_VISIBLE_DEVICES=0,...,7` on every node before `ray start`.",
        (GH + "vllm-project/vllm-ascend/issues/2879", GH + "verl-project/verl/pull/7507",
         GH + "verl-project/verl-omni/pull/227", GH + "vllm-project/vllm-ascend/issues/168"),
    ),
    Family(
        "ray_object_store_full", 49, "Ray's object store is full",
        "A task or actor call put an object into Ray's shared-memory object store and it did not fit "
        "(`ObjectStoreFullError`, `Failed to put object ... in object store because it is full. Object size is N "
        "bytes`): the store holds objects still referenced, or the object is larger than the store (by default 30 % "
        "of the node's memory, inside /dev/shm).",
        "`ray memory` lists what holds the store; pass less through Ray per call (verl moves each step's batch "
        "between the trainer and its workers: a smaller `data.train_batch_size` or `actor_rollout_ref.rollout.n`), "
        "or give the store more with `ray start --object-store-memory=<bytes>` on every node (within /dev/shm: "
        "`df -h /dev/shm`, docker `--shm-size`).",
        (GH + "ray-project/ray/issues/13443",),
    ),
)}

RULES = (
    Rule("host_oom_killed", ("running low on memory", "OutOfMemoryError: Task was killed"),
         r"killed due to the node running low on memory|Task was killed due to the node"),
    # the raylet's own line when its memory monitor kills a worker (printed by the driver as "(raylet) ...")
    Rule("host_oom_killed", ("System memory low at node",), r"System memory low at node with IP [\d.]+\..*killing"),
    Rule("host_oom_killed", ("killed due to memory pressure",),
         r"[1-9]\d* Workers \(tasks / actors\) killed due to memory pressure \(OOM\)"),
    # Ray prints it at WARNING in the driver (worker.py) and as the GCS's error; the address names the node
    Rule("ray_node_died", ("has been marked dead because the",), NODE_MARKED_DEAD, any_level=True),
    # the rehearsal's own verdict, written when it killed a worker node (rehearse --fault worker-node): the run
    # may have failed before Ray's line reached the driver's log
    Rule("ray_node_died", ("died mid-step",), OWN_VERDICT),
    Rule("ray_started_with_gpus", ("has no NPU available",), r"has no NPU available\..*'GPU': ?[1-9]"),
    Rule("ray_no_npu", ("has no NPU available",), r"has no NPU available\.(?!.*'GPU': ?[1-9])"),
    Rule("visible_devices_rewritten", ("Error setting ASCEND_RT_VISIBLE_DEVICES",),
         r"Error setting ASCEND_RT_VISIBLE_DEVICES"),
    Rule("visible_devices_rewritten", ("Invalid device ID",), r"Invalid device ID"),
    Rule("ray_object_store_full", ("ObjectStoreFullError", "Failed to put object"),
         r"ObjectStoreFullError|Failed to put object \S+ in object store because it is full"),
    Rule("visible_devices_rewritten", ("Expects tensor to be on the compute device",),
         r"Expects tensor to be on the compute device npu:\d+, was on npu:\d+"),
)
