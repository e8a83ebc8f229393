"""`verl-ascend doctor`'s run: gather this node's facts group by group, judge them, report the findings."""

import contextlib
import os
import socket
import sys

from verl_ascend.core.findings import BadInput

GROUPS = ("python", "torch", "cann", "npu", "network", "hccl", "env", "versions", "patches", "ray")
DEFAULT_HCCN_CONF = "/etc/hccn.conf"


class NoSuchFile(BadInput):
    pass


def _read(path):
    try:
        with open(path) as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def examine(args, env=None) -> tuple:
    """(findings, context) for this node. Each group is a local read; `ray` may join the local head."""
    from verl_ascend.core import platform
    from verl_ascend.core.profiles import PROFILES
    from verl_ascend.doctor import board_probe, cluster, devices, environment, known_good, network, ports, software, trainer_loop

    env = dict(os.environ if env is None else env)
    evidence = platform.ascend_evidence()
    ascend = bool(evidence)
    skipped = set(args.skip)
    context = {"host": socket.gethostname(), "ascend_host": evidence, "nnodes": args.nnodes,
               "npus_per_node": args.npus_per_node, "platform": None, "skipped": sorted(skipped)}
    findings = []
    npu_count = None
    ranks_per_node = args.npus_per_node  # None: the detected profile's, else an A2's 8
    interfaces = network.local_interfaces()
    if "python" not in skipped:
        findings += software.check_python()
    if "torch" not in skipped:
        npu_version, npu_problem = software.torch_npu_facts()
        findings += software.check_torch(platform.installed_version("torch"), npu_version, npu_problem, ascend)
    if "cann" not in skipped:
        findings += software.check_cann(env, ascend)
    if "npu" not in skipped:
        smi = devices.run_npu_smi()
        chip_map = devices.layout_from_chip_map(devices.run_chip_map()) if smi and smi[0] == 0 else None
        findings += devices.check_npu_smi(smi, args.npus_per_node, chip_map)
        npu_count, profile = devices.ranks_and_profile(smi, chip_map)
        context["platform"] = profile
        if profile and not ranks_per_node:
            ranks_per_node = PROFILES[profile].ranks_per_node
        path = args.hccn_conf or DEFAULT_HCCN_CONF
        findings += devices.check_hccn_conf(path, _read(path), npu_count, ascend, profile)
        if smi is not None:
            findings += board_probe.check(env, board_probe.verl_probes_board())
    if "network" not in skipped:
        findings += network.check_socket_ifnames(env, interfaces, args.nnodes)
        findings += network.check_if_ip(env, interfaces)
    if "hccl" not in skipped:
        findings += environment.check_timeouts(env, args.nnodes)
        findings += network.check_port_base(env, network.ephemeral_port_range())
        findings += ports.check_hccl_ports(env, ephemeral=network.ephemeral_port_range())
    if "env" not in skipped:
        findings += environment.check_visible_devices(env, npu_count)
        findings += environment.check_nofile()
    if "versions" not in skipped:
        from verl_ascend.core import support

        findings += software.check_versions(software.installed_versions(), ascend, support.installed_verdict())
        findings += known_good.check({d: platform.installed_version(d) for d in ("vllm-ascend", "vllm", "torch")}
                                     | {"torch_npu": platform.installed_version("torch-npu")})
        findings += trainer_loop.check()
    if "patches" not in skipped:
        from verl_ascend.core import status

        findings += software.check_patches(status.collect(import_targets=True))  # no import if torch fails
    if "ray" not in skipped:
        address, how = cluster.discover(args.ray_address, env)
        findings += cluster.check_ray(address, how, network.local_addresses(interfaces), args.nnodes,
                                      ranks_per_node or 8, args.ray_timeout,
                                      basis=_basis(args.npus_per_node, context["platform"]))
    context["npus_per_node"] = ranks_per_node or 8
    return findings, context


def _basis(given, profile) -> str:
    """Where the per-node NPU count the Ray check expects comes from."""
    if given:
        return "--npus-per-node"
    if profile:
        from verl_ascend.core.profiles import PROFILES

        p = PROFILES[profile]
        return f"{p.name} profile: {p.ranks_per_node} {p.rank_word}s per node"
    return "default, no npu-smi here"


def run(args) -> int:
    """Examine this node; print the findings (text or JSON); the exit code."""
    from verl_ascend.core.findings import exit_code
    from verl_ascend.doctor import findings as F

    if args.hccn_conf and not os.path.isfile(args.hccn_conf):
        raise NoSuchFile(f"--hccn-conf {args.hccn_conf}: no such file (omit it to use {DEFAULT_HCCN_CONF})")
    # Imported packages may print (torch_npu warns about CANN on stdout): keep stdout for the report.
    with contextlib.redirect_stdout(sys.stderr):
        found, context = examine(args)
    print(F.to_json(found, context) if args.json else F.render(found, context))
    return exit_code(found)
