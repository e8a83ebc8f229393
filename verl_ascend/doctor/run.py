"""`verl-ascend doctor`'s run: judge this node check by check (doctor.checks.CHECKS), report the findings."""

import contextlib
import os
import socket
import sys

from verl_ascend.core.findings import BadInput
from verl_ascend.doctor.node import DEFAULT_HCCN_CONF  # run() and commands/doctor.py name it


class NoSuchFile(BadInput):
    pass


def examine(args, env=None) -> tuple:
    """(findings, context) for this node: every check of doctor.checks.CHECKS whose group is not
    skipped, in the table's order. Each fact is a local read; `ray` may join the local head."""
    from verl_ascend.doctor.checks import CHECKS
    from verl_ascend.doctor.node import Node

    node = Node.from_args(args, env)
    findings = [f for check in CHECKS if check.group not in node.skipped for f in check.judge(node)]
    context = {"host": socket.gethostname(), "ascend_host": node.evidence, "nnodes": args.nnodes,
               "npus_per_node": node.ranks_per_node, "platform": node.profile, "skipped": sorted(node.skipped)}
    return findings, context


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
