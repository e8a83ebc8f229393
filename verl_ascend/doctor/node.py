"""The facts doctor judges, read from this node the first time a check asks for them, so that a
skipped group's facts are never read (``--skip npu`` runs no npu-smi, ``--skip patches`` imports no
verl). A test hands in canned facts instead: ``Node(env={...}, smi=(0, text))``."""

import os
import sys

DEFAULT_HCCN_CONF = "/etc/hccn.conf"


class Node:
    def __init__(self, env=None, skipped=(), nnodes=None, npus_per_node=None, hccn_conf=None,
                 ray_address="auto", ray_timeout=60.0, **given):
        self.env = dict(os.environ if env is None else env)
        self.skipped = set(skipped)
        self.nnodes, self.npus_per_node, self.ray_timeout = nnodes, npus_per_node, ray_timeout
        self.hccn_conf = hccn_conf or DEFAULT_HCCN_CONF
        self.ray_option = ray_address
        self._facts = dict(given)

    @classmethod
    def from_args(cls, args, env=None):
        return cls(env, args.skip, args.nnodes, args.npus_per_node, args.hccn_conf, args.ray_address, args.ray_timeout)

    def __getattr__(self, name):
        # only reached for facts (the attributes set in __init__ are found first); each is read once
        if name.startswith("__"):
            raise AttributeError(name)
        facts = self.__dict__.get("_facts")
        if facts is None:
            raise AttributeError(name)
        if name not in facts:
            read = getattr(type(self), f"_read_{name}", None)
            if read is None:
                raise AttributeError(f"doctor has no fact {name!r}")
            facts[name] = read(self)
        return facts[name]

    # ---- the facts ----
    def _read_evidence(self):
        from verl_ascend.core import platform

        return platform.ascend_evidence()

    def _read_ascend(self):
        return bool(self.evidence)

    def _read_python_version(self):
        return sys.version_info

    def _read_versions(self):
        from verl_ascend.core import platform

        from .versions import DISTS

        return platform.installed_versions(*DISTS)

    def _read_megatron_path(self):
        from verl_ascend.core import megatron_path

        return megatron_path.facts()

    def _read_torch_version(self):
        return self.versions["torch"]

    def _read_torch_npu(self):
        from .torch import torch_npu_facts

        return torch_npu_facts()

    def _read_smi(self):
        from .npu import run_npu_smi

        return run_npu_smi()

    def _read_chip_map(self):
        from .npu import layout_from_chip_map, run_chip_map

        return layout_from_chip_map(run_chip_map()) if self.smi and self.smi[0] == 0 else None

    def _read_npu_layout(self):
        """(rank devices, profile name) from npu-smi; (None, None) when the npu group is skipped."""
        from .npu import ranks_and_profile

        return (None, None) if "npu" in self.skipped else ranks_and_profile(self.smi, self.chip_map)

    def _read_npu_count(self):
        return self.npu_layout[0]

    def _read_profile(self):
        return self.npu_layout[1]

    def _read_ranks_per_node(self):
        from verl_ascend.core.profiles import PROFILES

        return self.npus_per_node or (PROFILES[self.profile].ranks_per_node if self.profile else 8)

    def _read_ranks_basis(self):
        """Where the per-node NPU count the Ray check expects comes from."""
        from verl_ascend.core.profiles import PROFILES

        if self.npus_per_node:
            return "--npus-per-node"
        if self.profile:
            p = PROFILES[self.profile]
            return f"{p.name} profile: {p.ranks_per_node} {p.rank_word}s per node"
        return "default, no npu-smi here"

    def _read_hccn_text(self):
        try:
            with open(self.hccn_conf) as fh:
                return fh.read()
        except FileNotFoundError:
            return None

    def _read_verl_probe(self):
        from .board_probe import verl_probes_board

        return verl_probes_board()

    def _read_interfaces(self):
        from .network import local_interfaces

        return local_interfaces()

    def _read_local_ips(self):
        from .network import local_addresses

        return local_addresses(self.interfaces)

    def _read_ephemeral(self):
        from .hccl import ephemeral_port_range

        return ephemeral_port_range()

    def _read_tcp_tables(self):
        from .hccl import read_tables

        return read_tables() or []

    def _read_nofile(self):
        import resource

        return resource.getrlimit(resource.RLIMIT_NOFILE)

    def _read_ptrace(self):
        from verl_ascend.proc import info

        from .env import CAP_SYS_PTRACE

        try:
            with open("/proc/self/status") as fh:
                status = fh.read()
        except OSError:
            status = ""
        caps = next((line.split()[1] for line in status.splitlines() if line.startswith("CapEff:")), "0")
        return {"pyspy": info.py_spy(), "scope": info.ptrace_scope(),
                "cap": bool(int(caps, 16) >> CAP_SYS_PTRACE & 1), "root": os.geteuid() == 0}

    def _read_verl_verdict(self):
        from verl_ascend.core import support

        return support.installed_verdict()

    def _read_patch_report(self):
        from verl_ascend.core import status

        return status.collect(import_targets=True)  # no import if torch fails

    def _read_ray_found(self):
        from .ray import discover

        return discover(self.ray_option, self.env)

    def _read_ray_address(self):
        return self.ray_found[0]

    def _read_ray_how(self):
        return self.ray_found[1]
