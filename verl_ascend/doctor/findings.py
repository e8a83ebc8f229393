"""Doctor's findings (the record every command uses) and how a list of them is shown: text or JSON.

Each check id (``network.hccl_socket_ifname``, ...) is the finding's subject. A check names itself by
its function: ``ok(check_port_base, ...)``, and :data:`.checks.CHECKS` gives that function's id, so the
table is the one place an id is spelled. ``skip``: could not be checked here (no NPU, tool missing,
...), with the reason; never a pass.
"""

import json

from verl_ascend.core.findings import ERROR, OK, SKIP, WARNING, Finding, counts, exit_code, lines, summary, verdict

JSON_SCHEMA_VERSION = 2  # 2: findings as {severity, subject, message, fix, keys, code}; "warn" became "warning"


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
    """Key order and field names are part of the interface: scripts parse this."""
    payload = {
        "schema": JSON_SCHEMA_VERSION,
        "context": context,
        "summary": {**counts(findings), "exit_code": exit_code(findings)},
        "findings": [f.as_dict() for f in findings],
    }
    return json.dumps(payload, indent=2, sort_keys=True)


def render(findings, context: dict) -> str:
    head = (f"verl-ascend doctor on {context.get('host', '?')}"
            + (f" (expecting {context['nnodes']} node(s) x {context['npus_per_node']} NPU)"
               if context.get("nnodes") else ""))
    return "\n".join([head, *lines(findings, indent="  "), summary(findings), verdict(exit_code(findings))])
