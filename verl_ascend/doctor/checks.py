"""Every check doctor runs, in one table: its id (the finding's subject), its ``--skip`` group, the
function that judges it and what it judges. The only place an id or a group is spelled: the CLI
takes its groups from here, each check function names itself (``ok(check_port_base, ...)``) and gets
its id from here, and tests/unit/test_doctor_table.py holds docs/doctor.md's table to it.

``function`` is ``module.name`` inside ``verl_ascend.doctor`` (the module is named for the group,
except the npu group's ``board_probe`` and the versions group's ``known_good`` data); ``facts`` are
the :class:`.node.Node` facts it is called with, in order. Kept as text so that reading the groups
(``verl-ascend --help``) imports no check module.
"""

import dataclasses
import functools
import importlib


@dataclasses.dataclass(frozen=True)
class Check:
    id: str
    group: str
    function: str   # "module.name" in verl_ascend.doctor
    facts: tuple    # Node attributes passed to it, in order
    doc: str

    def resolve(self):
        module, name = self.function.split(".")
        return getattr(importlib.import_module(f"verl_ascend.doctor.{module}"), name)

    def judge(self, node) -> list:
        return self.resolve()(*(getattr(node, fact) for fact in self.facts))


_NET = ("env", "interfaces", "nnodes")
_SMI = ("smi", "chip_map")

CHECKS = (
    Check("python", "python", "python.check_python", ("python_version",), "3.10+; newer than 3.11 warns"),
    Check("torch", "torch", "torch.check_torch", ("torch_version",), "torch is installed"),
    Check("torch_npu", "torch", "torch.check_torch_npu", ("torch_version", "torch_npu", "ascend"),
          "torch_npu imports and is built for the installed torch release"),
    Check("cann.env", "cann", "cann.check_cann", ("env", "ascend"),
          "the CANN toolkit variables: set, existing, one toolkit, on LD_LIBRARY_PATH"),
    Check("cann.nnal", "cann", "cann.check_nnal", ("env", "ascend"), "the NNAL/ATB environment is sourced"),
    Check("npu.devices", "npu", "npu.check_devices", ("smi", "npus_per_node", "chip_map"),
          "npu-smi's rank devices and HBM vs the ranks per node"),
    Check("npu.platform", "npu", "npu.check_platform", _SMI, "the platform npu-smi shows, as a check --device profile"),
    Check("npu.health", "npu", "npu.check_health", _SMI, "every rank device reports health OK"),
    Check("npu.hccn_conf", "npu", "npu.check_hccn_conf", ("hccn_conf", "hccn_text", "npu_count", "ascend", "profile"),
          "device IPs in hccn.conf: valid, distinct, one per rank device, A3 dies in different subnets"),
    Check("npu.verl_board_probe", "npu", "board_probe.check", ("env", "verl_probe"),
          "verl's `npu-smi info -t board` probe answers"),
    Check("network.socket_ifname_pair", "network", "network.check_ifname_pair", _NET,
          "HCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME both set, selecting the same interfaces"),
    Check("network.hccl_socket_ifname", "network", "network.check_hccl_ifname", _NET,
          "HCCL_SOCKET_IFNAME's interface exists, is up, has IPv4, is not loopback on several nodes"),
    Check("network.gloo_socket_ifname", "network", "network.check_gloo_ifname", _NET,
          "GLOO_SOCKET_IFNAME's interface, judged the same way"),
    Check("network.hccl_if_ip", "network", "network.check_if_ip", ("env", "interfaces"),
          "HCCL_IF_IP, when set, is an address of this node"),
    Check("hccl.connect_timeout", "hccl", "hccl.check_connect_timeout", ("env", "nnodes"),
          "HCCL_CONNECT_TIMEOUT: an integer, long enough on several nodes"),
    Check("hccl.exec_timeout", "hccl", "hccl.check_exec_timeout", ("env", "nnodes"),
          "HCCL_EXEC_TIMEOUT: an integer, set on several nodes"),
    Check("hccl.if_base_port", "hccl", "hccl.check_port_base", ("env", "ephemeral"),
          "HCCL_IF_BASE_PORT in 1024-65520, outside the ephemeral port range"),
    Check("hccl.ports_free", "hccl", "hccl.check_hccl_ports", ("env", "tcp_tables", "ephemeral"),
          "the 16 host ports HCCL listens on are free on this node"),
    Check("npu.visible_devices", "env", "env.check_visible_devices", ("env", "npu_count"),
          "ASCEND_RT_VISIBLE_DEVICES, when set, names existing devices"),
    Check("ray.noset_visible_devices", "env", "env.check_ray_noset", ("env",),
          "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1"),
    Check("limits.nofile", "env", "env.check_nofile", ("nofile",), "ulimit -n: 4096 at least, 32768 advised"),
    Check("limits.ptrace", "env", "env.check_ptrace", ("ptrace",),
          "py-spy installed and allowed to read other processes' stacks (supervise's evidence)"),
    Check("versions.verl", "versions", "versions.check_verl", ("versions", "verl_verdict"),
          "verl installed, in the range verl-ascend supports"),
    Check("versions.tensordict", "versions", "versions.check_tensordict", ("versions", "ascend"),
          "tensordict installed; < 0.10 warns on NPU"),
    Check("versions.vllm_ascend", "versions", "versions.check_vllm_ascend", ("versions", "ascend"),
          "vllm-ascend installed and released for the installed vllm"),
    Check("versions.mindspeed", "versions", "versions.check_mindspeed", ("versions", "ascend"),
          "MindSpeed beside megatron-core"),
    Check("versions.megatron_path", "versions", "versions.check_megatron_path", ("megatron_path", "ascend"),
          "MindSpeed or MegatronAdaptor + TransformerEngine-NPU; NVIDIA's TransformerEngine not on NPU, never both"),
    Check("versions.known_good", "versions", "known_good.check", ("versions",),
          "vllm, torch, torch_npu as the installed vllm-ascend release was tested with"),
    Check("versions.verl_stack", "versions", "known_good.check_verl_stack", ("versions", "python_version", "ascend"),
          "verl 0.9.x: Python, torch, torch_npu, transformers, vLLM, megatron-core as verl's install guide names them"),
    Check("versions.trainer_loop", "versions", "versions.check_trainer_loop", (),
          "verl's default trainer loop has its packages"),
    Check("plugin.patches", "patches", "patches.check_patches", ("patch_report",),
          "import verl works; no verl-ascend patch failed or was switched off"),
    Check("ray.cluster", "ray", "ray.check_ray",
          ("ray_address", "ray_how", "local_ips", "nnodes", "ranks_per_node", "ray_timeout", "ranks_basis"),
          "the local Ray head's nodes and NPU resources vs --nnodes x ranks per node"),
)
GROUPS = tuple(dict.fromkeys(c.group for c in CHECKS))  # in the order the checks run


@functools.lru_cache(maxsize=1)
def _ids() -> dict:
    return {c.resolve(): c.id for c in CHECKS}


def id_of(function) -> str:
    """The id of the check ``function`` judges; a function the table does not list is a bug here."""
    try:
        return _ids()[function]
    except KeyError:
        raise LookupError(f"{getattr(function, '__qualname__', function)!r} is not a check in doctor.checks.CHECKS: "
                          "add its row there") from None
