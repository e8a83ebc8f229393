"""Whose failure it is: the package and file that raised the first failure, its version where the log prints it,
its public tracker and the words to search there for.

The component comes from the deepest traceback frame (``raised at``: the file's path names the package), else
from the line's own shape (vLLM's ``ERROR MM-DD hh:mm:ss [file.py:N]``, CANN's ``[ERROR] HCCL(...)``, torch_npu's
``ERRnnnnn`` header and glog files, Ray's exceptions, Hydra / OmegaConf errors), else from the family. Versions are
read from the lines engines print at start-up (vLLM's ``Initializing a V1 LLM engine (v0.9.1)``).
"""

import re
import urllib.parse

GH = "https://github.com/"
# (component, marker in a frame's path, public tracker); the first match wins, so a package inside another comes first
PACKAGES = (
    ("vllm-ascend", "/vllm_ascend/", GH + "vllm-project/vllm-ascend/issues"),
    ("vllm", "/vllm/", GH + "vllm-project/vllm/issues"),
    ("torch_npu", "/torch_npu/", GH + "Ascend/pytorch/issues"),
    ("Megatron-Bridge", "/megatron/bridge/", GH + "NVIDIA-NeMo/Megatron-Bridge/issues"),
    ("megatron-core", "/megatron/core/", GH + "NVIDIA/Megatron-LM/issues"),
    ("mbridge", "/mbridge/", GH + "ISEEKYAN/mbridge/issues"),
    ("MindSpeed-RL", "/mindspeed_rl/", "https://gitcode.com/Ascend/MindSpeed-RL/issues"),
    ("MindSpeed", "/mindspeed/", "https://gitcode.com/Ascend/MindSpeed/issues"),
    ("verl", "/verl/", GH + "verl-project/verl/issues"),
    ("ray", "/ray/", GH + "ray-project/ray/issues"),
    ("transformers", "/transformers/", GH + "huggingface/transformers/issues"),
    ("huggingface_hub", "/huggingface_hub/", GH + "huggingface/huggingface_hub/issues"),
    ("hydra", "/hydra/", GH + "facebookresearch/hydra/issues"),
    ("omegaconf", "/omegaconf/", GH + "omry/omegaconf/issues"),
    ("tensordict", "/tensordict/", GH + "pytorch/tensordict/issues"),
    ("torch", "/torch/", GH + "pytorch/pytorch/issues"),
)
TRACKER = {name: tracker for name, _, tracker in PACKAGES}
TRACKER["CANN"] = "https://www.hiascend.com/forum/"
# a line's own shape -> the component that printed it
_LINE = (
    ("CANN", re.compile(r"\[ERROR\] (?:HCCL|HCCP|RUNTIME|ASCENDCL|GE|TBE|DRV|TSDUMP|PROFILING)\(|\bE[A-Z0-9]\d{4}\b")),
    ("torch_npu", re.compile(r"\bERR\d{5}\b|compiler_depend\.ts|ProcessGroupHCCL|\bNPU out of memory\b|torch_npu")),
    ("vllm-ascend", re.compile(r"vllm_ascend|vllm-ascend|NPURayWorkerWrapper")),
    ("vllm", re.compile(r"\b(?:ERROR|CRITICAL|WARNING|INFO) \d\d-\d\d \d\d:\d\d:\d\d \[?[\w.]+\.py:\d+\]|EngineCore|"
                        r"\bvllm\b")),
    ("ray", re.compile(r"\bray\.exceptions\.|\(raylet\)|ActorDiedError|RayTaskError|RayActorError|Worker exit type|"
                       r"\bGCS\b")),
    ("hydra", re.compile(r"\bomegaconf\.errors\.|\bhydra\.errors\.|Could not override '|is not in struct")),
    ("torch", re.compile(r"ProcessGroupNCCL|\[c10d\]|torch\.distributed|torchrun|TCPStore")),
)
# the family's own component when neither the frames nor the line say
FAMILY = {
    "hccl_connect_timeout": "CANN", "hccl_exec_timeout": "CANN", "hccl_call_failed": "CANN", "peer_exited": "CANN",
    "roce_error_cqe": "CANN", "hccl_version_mismatch": "CANN", "hccl_port_taken": "CANN", "tls_mismatch": "CANN",
    "device_network": "CANN", "hccp_busy": "CANN", "npu_runtime": "CANN", "stream_sync_timeout": "CANN",
    "npu_oom": "torch_npu", "acl_init_failed": "torch_npu", "op_binary_missing": "CANN", "npu_not_visible": "torch_npu",
    "ray_node_died": "ray", "ray_actor_died": "ray", "ray_unschedulable": "ray", "host_oom_killed": "ray",
    "ray_no_npu": "ray", "ray_started_with_gpus": "ray", "config_invalid": "hydra", "collective_timeout": "torch",
    "rendezvous_unreachable": "torch", "vllm_invalid_version": "vllm-ascend", "mla_graph_heads": "vllm-ascend",
    "mindspeed_too_old": "MindSpeed", "weight_bucket_too_small": "verl", "ckpt_not_seen_on_resume": "verl",
}
# start-up lines that print a component's version: (component, pattern with the version as group 1)
VERSIONS = (
    ("vllm", re.compile(r"Initializing an? (?:V\d )?LLM engine \(v(\d[\w.+]*)\)|vLLM API server version (\d[\w.+]*)")),
    ("vllm-ascend", re.compile(r"vllm[-_]ascend(?: version)?[ =:]+v?(\d+\.\d+\.\d+\w*)")),
    ("torch_npu", re.compile(r"torch[-_]npu[ =:]+v?(\d+\.\d+\.\d+[\w.+]*)")),
)
VERSION_ANCHORS = ("LLM engine (v", "API server version", "vllm-ascend ", "vllm_ascend ", "torch-npu ", "torch_npu ")
_MESSAGE = re.compile(r"^(?:.*?\b(?:ERROR|CRITICAL)\b[^\]]*\]\s*)?(?:\(\w+ pid=\d+[^)]*\)\s*)*(?:\[rank\d+\]:\s*)?")
_VOLATILE = re.compile(r"0x[0-9a-fA-F]+|\b\d[\d.:,]*\b|'[^']{40,}'|/\S+")


def versions_in(text: str) -> list:
    """(component, version) pairs a start-up line names."""
    out = []
    for name, pattern in VERSIONS:
        m = pattern.search(text)
        if m:
            out.append((name, next(g for g in m.groups() if g)))
    return out


def of(text: str, raised_at: str = None, family: str = None):
    """(component, how it was decided) for a failing line, or (None, None)."""
    if raised_at:
        path = raised_at.replace("\\", "/")
        for name, marker, _ in PACKAGES:
            if marker in path:
                return name, f"deepest frame {raised_at}"
    for name, pattern in _LINE:
        if pattern.search(text):
            return name, "the line's own form"
    if family in FAMILY:
        return FAMILY[family], f"the family {family}"
    return None, None


def search_words(text: str) -> str:
    """The message to search the tracker for: the line without its prefixes, numbers, addresses and paths."""
    message = _MESSAGE.sub("", text.strip(), count=1)
    words = " ".join(_VOLATILE.sub(" ", message).split())
    return words[:120]


def describe(text: str, raised_at: str = None, family: str = None, versions: dict = None) -> dict:
    """``{name, why, version, tracker, search, search_url}`` for the first failure's line; ``{}`` when unknown."""
    name, why = of(text, raised_at, family)
    if name is None:
        return {}
    out = {"name": name, "why": why}
    if versions and versions.get(name):
        out["version"] = versions[name]
    tracker = TRACKER.get(name)
    words = search_words(text)
    if tracker:
        out["tracker"] = tracker
    if words:
        out["search"] = words
        if tracker and tracker.startswith(GH):
            out["search_url"] = tracker + "?q=" + urllib.parse.quote_plus(f'is:issue "{words[:80]}"')
    return out
