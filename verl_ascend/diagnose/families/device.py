"""Faults from torch_npu's troubleshooting cases (Ascend/pytorch docs/zh/troubleshooting) and vllm-ascend's FAQ:
operators, tensors and devices, initialisation, the NPU environment."""

from .model import GH, TORCH_NPU_DOCS, VERL_NPU_FAQ, VLLM_ASCEND_FAQ, Family, Rule

FAMILIES = {f.id: f for f in (
    Family(
        "npu_lib_mismatch", 8, "A torch_npu / CANN / NNAL library of another version set (undefined symbol)",
        "A shared library of torch_npu, the CANN toolkit or NNAL (ATB) was loaded next to libraries of another "
        "release and the dynamic linker found no symbol it needs (`<lib>.so: undefined symbol: ...`). torch, "
        "torch_npu, CANN and NNAL come as matching sets: a torch_npu built for another torch, a daily torch_npu "
        "against an older NNAL, or a CANN upgraded without its NNAL leaves one of them looking for a function the "
        "other does not have. Whatever imported it (a trainer, a vLLM worker, a helper that only warns) fails there.",
        "`pip show torch torch_npu`, `cat /usr/local/Ascend/ascend-toolkit/latest/*/ascend_toolkit_install.info` "
        "and `ls /usr/local/Ascend/nnal/atb`: install the torch_npu release made for the installed torch and CANN "
        "(torch_npu's README version table), the NNAL of the same CANN version, then `source` that CANN's and "
        "NNAL's `set_env.sh` before `ray start` on every node (`verl-ascend doctor` compares the versions).",
        (GH + "Ascend/pytorch/issues/99", GH + "Ascend/pytorch/issues/35"),
    ),
    Family(
        "npu_not_visible", 17, "torch_npu sees no NPU in this process",
        "torch_npu is installed but the process sees no device: ASCEND_RT_VISIBLE_DEVICES empty or naming devices "
        "this node lacks, the driver not loaded, or the container started without /dev/davinci*.",
        "`npu-smi info` on that node (driver and cards); `echo $ASCEND_RT_VISIBLE_DEVICES` in the shell that runs "
        "`ray start`; with Ray set `export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3,4,5,6,7` and "
        "`export RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1` before `ray start`, or let Ray assign them "
        "(both unset); in docker pass `--device /dev/davinci<N>` for each card.",
        (VERL_NPU_FAQ,),
    ),
    Family(
        "vllm_invalid_version", 19, "vllm-ascend cannot parse the vLLM version",
        "An editable / development install of vLLM reports a version string vllm-ascend cannot compare "
        "(`InvalidVersion`).",
        "`export VLLM_VERSION=X.Y.Z` (the vLLM release the checkout corresponds to) in the shell that runs "
        "`ray start` on every node, or install a released vLLM wheel.",
        (VLLM_ASCEND_FAQ,),
    ),
    Family(
        "cuda_on_ascend", 9, "A CUDA code path ran on the Ascend host",
        "Code chose CUDA on an NPU machine: a hard-coded `.cuda()` / `torch.cuda.*` call, a device detection that "
        "picked `cuda` (verl <= 0.8's `verl/utils/device.py` when `torch.cuda.is_available()` answers for the NPU "
        "under `transfer_to_npu`), the NCCL backend asked for instead of HCCL, or a checkpoint saved on GPUs loaded "
        "without `map_location`. torch itself has no CUDA here (`Torch not compiled with CUDA enabled`, `Found no "
        "NVIDIA driver`), so the first such call fails; the package and file that made it are named below.",
        "Find the call in the `raised at` frame (and the component named): replace `.cuda()` / `torch.cuda.X` by "
        "the device verl detects (`get_device_name()`, `torch.npu.X` with torch_npu imported), ask for the `hccl` "
        "backend, load checkpoints with `map_location='cpu'`; check that torch_npu is installed and imported in that "
        "process (`python -c 'import torch, torch_npu; print(torch.npu.is_available())'`) and that the package "
        "version supports Ascend (vllm-ascend, verl >= 0.5 with its NPU support); `verl-ascend status` shows the "
        "`device` patch, which makes verl <= 0.8 pick the NPU.",
        (GH + "verl-project/verl/issues/2920", GH + "vllm-project/vllm-ascend/issues/516",
         GH + "vllm-project/vllm-ascend/issues/780", GH + "modelscope/ms-swift/issues/3594"),
    ),
    Family(
        "op_binary_missing", 52, "No kernel binary for an operator (CANN kernels / ops package)",
        "An aclnn operator found no compiled kernel for these input types (`Cannot find bin of op`, ERR01100): the "
        "CANN kernels (ops) package matching the toolkit is not installed, or the dtype / format is not supported.",
        "Install the CANN kernels / ops package of the same version as the toolkit for this chip "
        "(`ls /usr/local/Ascend/ascend-toolkit/latest/opp/built-in/op_impl/ai_core/tbe/kernel`), source set_env.sh; "
        "if it is installed, cast the input to a supported dtype (the operator and types are in the message).",
        (TORCH_NPU_DOCS + "operator_called_error.md", GH + "hiyouga/LlamaFactory/issues/3779"),
    ),
    Family(
        "acl_init_failed", 53, "NPU initialisation failed in torch_npu",
        "torch_npu's device initialisation called into ACL and it failed (`AclSetCompileopt ... error code is "
        "500001`, ERR00100): CANN toolkit, driver and torch_npu versions that do not fit, or a device in a bad state.",
        "The plog of that process names the ACL error (`grep -h ERROR ~/ascend/log/debug/plog/plog-<pid>_*.log`); "
        "compare `npu-smi info` (driver), CANN version and torch_npu version with `verl-ascend doctor`; "
        "`npu-smi info -t health -i <card>`.",
        (TORCH_NPU_DOCS + "initialization_error.md",),
    ),
    Family(
        "mla_graph_heads", 54, "NPU graph mode with MLA needs 32/64/128 heads per KV head",
        "vllm-ascend's graph mode with MLA attention supports numHeads / numKvHeads in {32, 64, 128} only; after the "
        "tensor-parallel split this model has another ratio.",
        "Run the rollout eagerly (`actor_rollout_ref.rollout.enforce_eager=True`) or choose "
        "`actor_rollout_ref.rollout.tensor_model_parallel_size` so heads / kv heads per rank is 32, 64 or 128.",
        (VLLM_ASCEND_FAQ,),
    ),
    Family(
        "tensor_not_contiguous", 80, "A collective got a non-contiguous tensor",
        "HCCL collectives need contiguous tensors (`Tensors must be contiguous`, ERR02002).",
        "At the line of the traceback, pass `tensor.contiguous()` to the collective (a transposed / sliced view is "
        "not contiguous).",
        (TORCH_NPU_DOCS + "communication_operator_transfers_Non-contiguous_tensors.md",),
    ),
    Family(
        "tensor_device_mismatch", 81, "Operator inputs on different devices",
        "An operator got a CPU tensor and an NPU tensor (`Expected all tensors to be on the same device`, ERR01002).",
        "At the line of the traceback, move both inputs to the NPU (`.npu()` / `.to(device)`); with custom code "
        "loaded through `transfer_to_npu`, check tensors created on CPU by default.",
        (TORCH_NPU_DOCS + "failed_verify_op_parameters.md",),
    ),
    Family(
        "op_unsupported", 82, "Operator not supported on the NPU",
        "The operator has no NPU implementation (ERR01007 `OPS feature not supported`; the warning before it names "
        "it: `... is not currently supported on the NPU backend and will fall back to run on the CPU`), and the CPU "
        "fallback failed.",
        "Replace the call at the line of the traceback with a supported torch / torch_npu API (the op-plugin "
        "custom-API list), or compute that step on CPU explicitly.",
        (TORCH_NPU_DOCS + "unsupported_op_called.md",),
    ),
    Family(
        "inplace_grad", 83, "A tensor needed for backward was modified in place",
        "Autograd found a saved tensor at a newer version than it recorded: an in-place op (`x += ...`, `.add_()`) "
        "changed it between forward and backward.",
        "At the line of the traceback make the op out-of-place (`y = x + 2` instead of `x += 2`); "
        "`torch.autograd.set_detect_anomaly(True)` names the forward op.",
        (TORCH_NPU_DOCS + "variables_used_gradient_computation_modified_by_in-place_op.md",),
    ),
)}

RULES = (
    # the first CUDA-only call on the Ascend host (docs/field-reports.md "235B: converter picks CUDA")
    Rule("cuda_on_ascend", ("not compiled with CUDA", "NVIDIA driver", "torch.cuda.is_available() is False",
                            "NCCL built in", "ProcessGroupNCCL is only supported with GPUs"),
         r"Torch not compiled with CUDA enabled|Found no NVIDIA driver on your system|"
         r"Attempting to deserialize object on a CUDA device but torch\.cuda\.is_available\(\) is False|"
         r"Distributed package doesn't have NCCL built in|ProcessGroupNCCL is only supported with GPUs"),
    Rule("npu_not_visible", ("NPU device is not available",), r"torch_npu detected, but NPU device is not available"),
    Rule("vllm_invalid_version", ("InvalidVersion",), r"\bInvalidVersion\b"),
    # any level: a helper may print it as a warning of its own ("mmengine - WARNING - ... undefined symbol")
    Rule("npu_lib_mismatch", ("undefined symbol",),
         r"(?:torch_npu|Ascend|nnal|/atb/|libhccl|libascend|libacl|libopapi)\S*\.so[\w.]*: undefined symbol", any_level=True),
    Rule("op_binary_missing", ("Cannot find bin", "Cannot find binary", "any binary"),
         r"Cannot find bin(?:ary)? (?:of|for) op|\bOp \w+ does not ha(?:s|ve) any binary"),
    Rule("acl_init_failed", ("AclSetCompileopt",), r"AclSetCompileopt\(.*error code is \d+"),
    Rule("mla_graph_heads", ("MLA only support",), r"numHeads / numKvHeads = \d+, MLA only support"),
    Rule("tensor_not_contiguous", ("Tensors must be contiguous", "ERR02002"), r"Tensors must be contiguous|\bERR02002\b"),
    Rule("tensor_device_mismatch", ("Expected all tensors to be on the same device", "ERR01002"),
         r"Expected all tensors to be on the same device|\bERR01002\b"),
    Rule("op_unsupported", ("ERR01007",), r"\bERR01007\b"),
    Rule("inplace_grad", ("modified by an inplace operation",), r"modified by an inplace operation"),
    # vllm-ascend FAQ 6: the NNAL / CANN environment missing in the vLLM process
    Rule("cann_not_sourced", ("Failed to infer device type",), r"Failed to infer device type"),
    Rule("cann_not_sourced", (".so: cannot",), r"lib(?:atb|atb_speed|lcal)\w*\.so[\w.]*: cannot open shared object"),
)

EXTRA_SOURCES = {  # more public pages for families of the first table
    "cann_not_sourced": (VLLM_ASCEND_FAQ,),
    "port_in_use": (TORCH_NPU_DOCS + "port_number_distributed_task_in_use.md",),
    "hccl_exec_timeout": (TORCH_NPU_DOCS + "HCCL_timeout.md",),
    "hccl_connect_timeout": (TORCH_NPU_DOCS + "communication_domain_link_establishment_timeout.md",),
    "npu_oom": (VLLM_ASCEND_FAQ,),
    "hccp_busy": (GH + "hiyouga/LlamaFactory/issues/3839",),
}
