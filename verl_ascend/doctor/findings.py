"""A doctor finding, its severity, and how a list of them is shown (text or stable JSON)."""

import dataclasses
import json

from verl_ascend.core import findings as policy

OK = "ok"
WARN = "warn"
ERROR = "error"
SKIP = "skip"  # could not be checked here (no NPU, tool missing, ...): says why, never a pass
STATES = (OK, WARN, ERROR, SKIP)
_MARK = {OK: "ok", WARN: "WARN", ERROR: "ERROR", SKIP: "skip"}
JSON_SCHEMA_VERSION = 1


@dataclasses.dataclass
class Finding:
    check: str      # stable id, e.g. "network.hccl_socket_ifname"
    state: str      # one of STATES
    message: str    # what was seen, with the values
    fix: str = ""   # what to do; empty for ok

    def __post_init__(self):
        if self.state not in STATES:
            raise ValueError(f"finding state {self.state!r} is not one of {STATES}")


def ok(check, message):
    return Finding(check, OK, message)


def warn(check, message, fix):
    return Finding(check, WARN, message, fix)


def error(check, message, fix):
    return Finding(check, ERROR, message, fix)


def skip(check, message, fix=""):
    return Finding(check, SKIP, message, fix)


def exit_code(findings) -> int:
    """The one policy of every command (verl_ascend/cli.py): 0 all ok (or not checkable here), 1 warnings,
    2 errors found (bad input is 2 as well, decided before any check runs)."""
    return policy.exit_code(f.state for f in findings)


def counts(findings) -> dict:
    return {state: sum(1 for f in findings if f.state == state) for state in STATES}


def to_json(findings, context: dict) -> str:
    """Key order and field names are part of the interface: scripts parse this."""
    payload = {
        "schema": JSON_SCHEMA_VERSION,
        "context": context,
        "summary": {**counts(findings), "exit_code": exit_code(findings)},
        "findings": [dataclasses.asdict(f) for f in findings],
    }
    return json.dumps(payload, indent=2, sort_keys=True)


def render(findings, context: dict) -> str:
    lines = [f"verl-ascend doctor on {context.get('host', '?')}"
             + (f" (expecting {context['nnodes']} node(s) x {context['npus_per_node']} NPU)"
                if context.get("nnodes") else "")]
    width = max([len(f.check) for f in findings] or [5])
    for f in findings:
        lines.append(f"  [{_MARK[f.state]:>5}] {f.check:<{width}}  {f.message}")
        if f.fix:
            lines.append(f"  {'':>7} {'':<{width}}  fix: {f.fix}")
    c = counts(findings)
    lines.append(f"{c[OK]} ok, {c[WARN]} warning(s), {c[ERROR]} error(s), {c[SKIP]} not checked here")
    return "\n".join(lines)
