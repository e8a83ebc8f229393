"""Which network interfaces ``HCCL_SOCKET_IFNAME`` and ``GLOO_SOCKET_IFNAME`` select, and whether the
two select the same ones: the one answer ``doctor`` (on the node, against its real interfaces) and
``check`` (on a launch script, anywhere) both give.

The two variables are written differently for the same choice: HCCL reads ``eth,enp`` as name
prefixes, ``=eth0`` as exact names, ``^...`` / ``^=...`` as exclusions (CANN's HCCL environment
variable guide); Gloo reads a comma-separated list of exact names. So ``HCCL_SOCKET_IFNAME==eth0`` and
``GLOO_SOCKET_IFNAME=eth0`` agree although the strings differ. When they select different
interfaces, HCCL init fails with error code 9 or Gloo's ``connectFullMesh`` fails
(docs/field-reports.md#32b-hccl-error-code-9-and-gloo).
"""

HCCL = "HCCL_SOCKET_IFNAME"
GLOO = "GLOO_SOCKET_IFNAME"
# Stands for "an interface the script does not name" when no real interface table is at hand: an
# exclusion (`^lo`) selects it, an exact name never does. Not a valid interface name (a space).
_UNNAMED = "<another interface>"


def _hccl_rule(value: str):
    """(exclude, exact, names) of an HCCL_SOCKET_IFNAME value."""
    value = value.strip()
    exclude = value.startswith("^")
    body = value[1:] if exclude else value
    exact = body.startswith("=")
    names = [i.strip() for i in (body[1:] if exact else body).split(",") if i.strip()]
    return exclude, exact, names


def _gloo_names(value: str) -> list:
    return [i.strip() for i in value.split(",") if i.strip()]


def hccl_selected(value: str, names) -> list:
    """Interfaces of ``names`` that HCCL_SOCKET_IFNAME=value selects, sorted."""
    exclude, exact, items = _hccl_rule(value)

    def hit(name):
        return any(name == i if exact else name.startswith(i) for i in items)

    return sorted(n for n in names if hit(n) != exclude)


def gloo_selected(value: str, names) -> list:
    """Interfaces of ``names`` that GLOO_SOCKET_IFNAME=value selects (exact names), sorted."""
    return sorted(set(_gloo_names(value)) & set(names))


def written_names(hccl: str, gloo: str) -> list:
    """The interface names a script writes into the two variables, plus one it does not name: the
    interface table ``check`` judges against, having none of the cluster's."""
    return sorted(set(_hccl_rule(hccl)[2]) | set(_gloo_names(gloo))) + [_UNNAMED]


def shown(selected) -> str:
    return ", ".join("an interface it does not name" if n == _UNNAMED else n for n in selected) or "nothing"


def disagreement(hccl: str, gloo: str, names=None):
    """None when the two variables select the same interfaces, else why not (one sentence naming both
    values and what each selects). ``names``: this node's interfaces; None: the ones the values name
    (see :func:`written_names`). Unset or empty variables are the caller's case, not judged here."""
    names = written_names(hccl, gloo) if names is None else list(names)
    hsel, gsel = hccl_selected(hccl, names), gloo_selected(gloo, names)
    if hsel == gsel:
        return None
    return f"{HCCL}={hccl!r} selects {shown(hsel)} but {GLOO}={gloo!r} selects {shown(gsel)}"
