"""Doctor's findings (the record every command uses) and how a list of them is shown: text or JSON.

Each check id (``network.hccl_socket_ifname``, ...) is the finding's subject. A check names itself by
its function: ``ok(check_port_base, ...)``, and :data:`.checks.CHECKS` gives that function's id, so the
table is the one place an id is spelled. ``skip``: could not be checked here (no NPU, tool missing,
...), with the reason; never a pass.
"""

from verl_ascend.core.findings import ERROR, OK, SKIP, WARNING, Finding, counts, exit_code, lines, summary, verdict
from verl_ascend.core.findings import to_json as envelope_json


def _id(check) -> str:
    from .checks import id_of  # at call time: the table imports the modules that call these makers

    return id_of(check)


def ok(check, message):
    return Finding(OK, _id(check), message)


def warn(check, message, fix):
    return Finding(WARNING, _id(check), message, fix)


def error(check, message, fix):
    return Finding(ERROR, _id(check), message, fix)


def skip(check, message, fix=""):
    return Finding(SKIP, _id(check), message, fix)


def to_json(findings, context: dict) -> str:
    """The shared envelope (``core.findings.to_json``) with the host's ``context`` and the ``summary`` counts."""
    return envelope_json("doctor", findings, context=context, summary=counts(findings))


def render(findings, context: dict) -> str:
    head = (f"verl-ascend doctor on {context.get('host', '?')}"
            + (f" (expecting {context['nnodes']} node(s) x {context['npus_per_node']} NPU)"
               if context.get("nnodes") else ""))
    return "\n".join([head, *lines(findings, indent="  "), summary(findings), verdict(exit_code(findings))])
