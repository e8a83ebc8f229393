"""`verl-ascend doctor`: gather this node's facts, judge them, print findings with fixes."""

import argparse
import contextlib
import os
import socket
import sys

from verl_ascend.commands._args import comma_names, positive_int

GROUPS = ("python", "torch", "cann", "npu", "network", "hccl", "env", "versions", "patches", "ray")
DEFAULT_HCCN_CONF = "/etc/hccn.conf"


def _read(path):
    try:
        with open(path) as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def diagnose(args, env=None) -> tuple:
    """(findings, context) for this node. Each group is a local read; `ray` may join the local head."""
    from verl_ascend.check.profiles import PROFILES
    from verl_ascend.core import platform
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
        from verl_ascend.commands import status

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
        from verl_ascend.check.profiles import PROFILES

        p = PROFILES[profile]
        return f"{p.name} profile: {p.ranks_per_node} {p.rank_word}s per node"
    return "default, no npu-smi here"


def _groups(text: str) -> list:
    names = comma_names(text)
    unknown = [n for n in names if n not in GROUPS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown check group(s) {', '.join(unknown)}; choose from {', '.join(GROUPS)}")
    return names


def _run(args) -> int:
    from verl_ascend.core.findings import exit_code
    from verl_ascend.doctor import findings as F

    if args.hccn_conf and not os.path.isfile(args.hccn_conf):
        print(f"verl-ascend doctor: --hccn-conf {args.hccn_conf}: no such file (omit it to use {DEFAULT_HCCN_CONF})",
              file=sys.stderr)
        return 2
    # Imported packages may print (torch_npu warns about CANN on stdout): keep stdout for the report.
    with contextlib.redirect_stdout(sys.stderr):
        found, context = diagnose(args)
    print(F.to_json(found, context) if args.json else F.render(found, context))
    return exit_code(found)


def register(sub) -> None:
    p = sub.add_parser(
        "doctor",
        help="check this node for an Ascend verl job: NPUs, CANN, HCCL/Gloo network, limits, versions, Ray",
        description="Reads this node's state (environment variables, npu-smi, /etc/hccn.conf, network "
        "interfaces, limits, installed packages, the plugin's patches and, when its head runs here, the "
        "Ray cluster) and judges each item ok / warning / error with the fix; items that cannot be checked "
        "here (no NPU, no Ray) are listed as skipped. Contacts no other host. Exit 0 when all is well, "
        "1 when a warning needs attention, 2 when an error was found (or on bad arguments).",
    )
    p.add_argument("--json", action="store_true", help="print findings as JSON (stable keys: schema, context, summary, findings)")
    p.add_argument("--nnodes", type=positive_int, default=None,
                   help="nodes the job will use (enables the multi-node judgements and the Ray resource check)")
    p.add_argument("--npus-per-node", type=positive_int, default=None,
                   help="ranks per node (default: the detected platform's, 16 dies on an A3, 8 on A2/A5; 8 without npu-smi)")
    p.add_argument("--hccn-conf", default=None, metavar="PATH", help=f"device IP file (default {DEFAULT_HCCN_CONF})")
    p.add_argument("--ray-address", default="auto", metavar="ADDR|auto|off",
                   help="Ray cluster to inspect: auto (RAY_ADDRESS, else the address `ray start` recorded; default), an address, or off")
    p.add_argument("--ray-timeout", type=float, default=60.0, metavar="S", help="seconds to wait for the Ray cluster (default 60)")
    p.add_argument("--skip", type=_groups, default=[], metavar="GROUP,...",
                   help=f"check groups to leave out: {', '.join(GROUPS)}")
    p.set_defaults(func=_run)
