"""Whether a restart of the run may help, per family: the answer ``supervise`` acts on.

- ``transient``: an event, not a state: a node or actor died, a collective or link timed out, a port or device
  was still held by a process that has since gone. The same run started again may succeed.
- ``config``: the run is set up so that it fails the same way every time (a key, a path, a size, a timeout
  shorter than the run needs): nothing changes until the recipe does.
- ``resource``: the run needs more than it has (device or host memory, file handles, threads, Ray resources).
- ``environment``: the install, versions, drivers or node settings are wrong for this run (CANN not loaded,
  packages that do not fit, NICs or TLS set differently on the nodes); a restart on the same nodes fails again.
- ``unknown``: diagnose cannot tell (an unrecognised failure, a kernel that failed on the device).
"""

TRANSIENT, CONFIG, RESOURCE, ENVIRONMENT, UNKNOWN = "transient", "config", "resource", "environment", "unknown"
CLASSES = (TRANSIENT, CONFIG, RESOURCE, ENVIRONMENT, UNKNOWN)

_WHY = {
    TRANSIENT: "an event of this run (a process, node or link that failed or was late), not a state of its setup: "
               "a restart from the last checkpoint may succeed",
    CONFIG: "the recipe makes the run fail the same way every time: change it (the fix says what) before a restart",
    RESOURCE: "the run needs more memory / handles / threads / cluster resources than it has: a restart hits the "
              "same limit until the run needs less or gets more",
    ENVIRONMENT: "the install, versions, driver or node settings do not fit the run: a restart on the same nodes "
                 "fails again until they are fixed",
    UNKNOWN: "the cause is not known well enough to say whether a restart can help",
}

# family -> (class, what about this family decides it)
RETRY = {
    "ray_node_died": (TRANSIENT, "a node went away; started again on healthy nodes the run can resume"),
    "ray_actor_died": (TRANSIENT, "Ray's verdict on a dead worker; if the cause was memory, the next failure says so"),
    "peer_exited": (TRANSIENT, "a peer rank died or hung; the others only waited for it"),
    "hccl_exec_timeout": (TRANSIENT, "a collective waited for a late rank; a slow step or a rank that died"),
    "collective_timeout": (TRANSIENT, "a collective waited for a late or dead rank"),
    "stream_sync_timeout": (TRANSIENT, "the device waited for a stream that did not finish (usually a collective)"),
    "hccl_connect_timeout": (TRANSIENT, "the ranks did not connect in time; a late rank, or a link (then it recurs)"),
    "roce_error_cqe": (TRANSIENT, "a RoCE link dropped packets or a peer went away"),
    "hccl_call_failed": (TRANSIENT, "an HCCL call failed without a more specific cause; mostly links and timeouts"),
    "hccp_busy": (TRANSIENT, "a process of the previous run still held the NPU; it is gone once that run has ended"),
    "port_in_use": (TRANSIENT, "a port was held by another process (a leftover of an earlier run)"),
    "hccl_port_taken": (TRANSIENT, "the kernel lent an HCCL port to another process for a while"),
    "rendezvous_unreachable": (TRANSIENT, "rank 0's rendezvous was not up yet or went away"),
    "config_invalid": (CONFIG, "the command line does not compose into a config"),
    "data_path_missing": (CONFIG, "a data file named by the recipe does not exist"),
    "model_path_invalid": (CONFIG, "the model path named by the recipe is not a model folder"),
    "state_dict_mismatch": (CONFIG, "the checkpoint does not fit the model the recipe builds"),
    "size_not_divisible": (CONFIG, "a parallel size of the recipe does not divide the model"),
    "weight_bucket_too_small": (CONFIG, "the recipe's weight-sync bucket is smaller than a tensor"),
    "visible_devices_rewritten": (CONFIG, "device visibility is set two ways that disagree"),
    "wrong_nic": (CONFIG, "HCCL / Gloo use an interface the other nodes cannot reach"),
    "mla_graph_heads": (CONFIG, "graph mode is not supported for this head layout"),
    "tensor_not_contiguous": (CONFIG, "code passes a non-contiguous tensor to a collective"),
    "tensor_device_mismatch": (CONFIG, "code mixes CPU and NPU tensors"),
    "op_unsupported": (CONFIG, "code calls an operator the NPU does not implement"),
    "inplace_grad": (CONFIG, "code modifies a tensor autograd needs"),
    "rollout_long_tail": (CONFIG, "the timeouts are shorter than the rollout's longest step: it recurs"),
    "ckpt_not_seen_on_resume": (CONFIG, "the resume does not see the checkpoint on this node's disk"),
    "ckpt_missing_tensor": (CONFIG, "the checkpoint lacks a tensor the model loads"),
    "ckpt_metadata_missing": (CONFIG, "the checkpoint's metadata is on another node's disk"),
    "npu_oom": (RESOURCE, "device memory ran out"),
    "ray_object_store_full": (RESOURCE, "Ray's object store is too small for the objects the run passes"),
    "host_oom_killed": (RESOURCE, "host memory ran out and Ray killed a worker"),
    "thread_limit": (RESOURCE, "the process / thread limit was reached"),
    "file_handles": (RESOURCE, "the open-file limit was reached"),
    "ray_unschedulable": (RESOURCE, "the cluster lacks the devices / CPUs the run asks for"),
    "cann_not_sourced": (ENVIRONMENT, "CANN is not loaded in the process environment"),
    "npu_lib_mismatch": (ENVIRONMENT, "torch, torch_npu, CANN and NNAL installed from different version sets"),
    "ray_no_npu": (ENVIRONMENT, "Ray was started without the NPU resource"),
    "ray_started_with_gpus": (ENVIRONMENT, "Ray was started with GPUs instead of NPUs"),
    "npu_not_visible": (ENVIRONMENT, "the process sees no NPU"),
    "vllm_invalid_version": (ENVIRONMENT, "the installed vLLM reports a version vllm-ascend cannot read"),
    "mindspeed_too_old": (ENVIRONMENT, "the installed MindSpeed predates the model"),
    "hccl_version_mismatch": (ENVIRONMENT, "the nodes run different CANN versions"),
    "op_binary_missing": (ENVIRONMENT, "the CANN kernels package is missing or does not fit"),
    "acl_init_failed": (ENVIRONMENT, "CANN, driver and torch_npu do not fit or the device is in a bad state"),
    "tls_mismatch": (ENVIRONMENT, "the NPUs' TLS switches differ"),
    "device_network": (ENVIRONMENT, "the device network (RoCE addresses, links) does not connect the ranks"),
    "cuda_on_ascend": (ENVIRONMENT, "a CUDA-only code path runs on an Ascend host (a package or version without "
                                    "NPU support, or torch_npu not loaded)"),
    "npu_runtime": (UNKNOWN, "a kernel failed on the device: an operator bug recurs, a hardware fault may not"),
    "unrecognised_failure": (UNKNOWN, "no known family explains the failure"),
}


def reason(family: str) -> str:
    """``<class>: <what about this family decides it>; <what the class means for a restart>``."""
    cls, why = RETRY.get(family, (UNKNOWN, "not classified"))
    return f"{why}; {_WHY[cls]}"
