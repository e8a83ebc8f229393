"""`verl-ascend doctor`: gather this node's facts, judge them, print findings with fixes (verl_ascend/doctor/run.py)."""

import argparse

from verl_ascend.commands._args import comma_names, positive_int
from verl_ascend.doctor.checks import GROUPS
from verl_ascend.doctor.run import DEFAULT_HCCN_CONF


def _groups(text: str) -> list:
    names = comma_names(text)
    unknown = [n for n in names if n not in GROUPS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown check group(s) {', '.join(unknown)}; choose from {', '.join(GROUPS)}")
    return names


def run(args) -> int:
    from verl_ascend.doctor import run as doctor

    return doctor.run(args)


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
    p.set_defaults(func=run)
