"""This node's network interfaces and the HCCL/Gloo variables that choose among them (group network).

The failure they prevent (the 32B field report, docs/field-reports.md#32b-hccl-error-code-9-and-gloo):
HCCL init fails with error code 4, then 9, until ``HCCL_SOCKET_IFNAME`` and ``GLOO_SOCKET_IFNAME`` select
the same real interface on every node; with only one of them set, Gloo's ``connectFullMesh`` fails
instead. What each variable selects is :mod:`verl_ascend.core.ifname`'s answer, the one ``check`` gives
for a launch script too. Everything here reads local state only: the interface table of this host,
never a packet to another one. ``scripts/hccl_check.py`` runs the same checks before its all-reduce.
Check ids and groups: :mod:`.checks`.
"""

import dataclasses
import ipaddress
import socket

from verl_ascend.core.ifname import GLOO, HCCL, disagreement, gloo_selected, hccl_selected

from .findings import error, ok, skip, warn

FIX_PAIR = ("export HCCL_SOCKET_IFNAME=<if> and GLOO_SOCKET_IFNAME=<if> with the same interface, "
            "the one carrying this node's cluster IP (see `ip -4 addr`), on every node before "
            "`ray start`/torchrun")


@dataclasses.dataclass
class Interface:
    name: str
    addresses: list  # IPv4 and IPv6 addresses as strings; None when unknown (no psutil)
    up: bool = True

    @property
    def ipv4(self):
        return [a for a in (self.addresses or []) if ":" not in a]


def local_interfaces() -> dict:
    """name -> Interface for this host (psutil when installed, else names only)."""
    try:
        import psutil
    except ImportError:
        return {name: Interface(name, None) for _, name in socket.if_nameindex()}
    stats = psutil.net_if_stats()
    found = {}
    for name, addrs in psutil.net_if_addrs().items():
        ips = [a.address.split("%")[0] for a in addrs if a.family in (socket.AF_INET, socket.AF_INET6)]
        found[name] = Interface(name, ips, stats[name].isup if name in stats else True)
    return found


def local_addresses(interfaces) -> set:
    ips = {"127.0.0.1", "::1", "localhost"}
    for iface in interfaces.values():
        ips.update(iface.addresses or [])
    return ips


def _judge_selected(check, var, value, selected, interfaces, nnodes):
    if not selected:
        have = ", ".join(sorted(interfaces)) or "none"
        return error(check, f"{var}={value!r} matches no interface on this node (have: {have})",
                     f"set {var} to one of this node's interfaces: {have}")
    if all(interfaces[n].addresses is None for n in selected):
        return skip(check, f"{var}={value!r} -> {', '.join(selected)}; addresses not checked",
                    "install psutil to let doctor read interface addresses")
    down = [n for n in selected if not interfaces[n].up]
    if down:
        return error(check, f"{var}={value!r}: interface {', '.join(down)} is down",
                     f"bring it up or point {var} at an interface that is up")
    with_ip = [n for n in selected if interfaces[n].ipv4]
    if not with_ip:
        return error(check, f"{var}={value!r} -> {', '.join(selected)}, which has no IPv4 address",
                     f"point {var} at the interface carrying this node's cluster IP")
    loop = [n for n in with_ip if all(ipaddress.ip_address(a).is_loopback for a in interfaces[n].ipv4)]
    shown = ", ".join(f"{n} ({', '.join(interfaces[n].ipv4)})" for n in with_ip)
    if loop and (nnodes or 2) > 1:
        return warn(check, f"{var}={value!r} -> {shown}: loopback only reaches this node",
                    f"for multi-node jobs set {var} to the interface with the cluster IP")
    return ok(check, f"{var}={value!r} -> {shown}")


def check_ifname_pair(env, interfaces, nnodes=None) -> list:
    hccl, gloo = env.get(HCCL, ""), env.get(GLOO, "")
    if not hccl and not gloo:
        if nnodes == 1:
            return [ok(check_ifname_pair, f"{HCCL}/{GLOO} unset; not needed on one node")]
        return [warn(check_ifname_pair, f"{HCCL} and {GLOO} are unset: HCCL and Gloo pick a default interface, "
                     "which can differ from the cluster network (docs/field-reports.md: HCCL error code 9)", FIX_PAIR)]
    if bool(hccl) != bool(gloo):
        have, missing = (HCCL, GLOO) if hccl else (GLOO, HCCL)
        return [error(check_ifname_pair, f"{have} is set ({hccl or gloo!r}) but {missing} is not: the other "
                      "library picks its own interface (docs/field-reports.md: Gloo connectFullMesh failed)", FIX_PAIR)]
    why = disagreement(hccl, gloo, interfaces)
    if why:
        return [error(check_ifname_pair, why, FIX_PAIR)]
    return [ok(check_ifname_pair, f"HCCL and Gloo use the same interface(s): {', '.join(hccl_selected(hccl, interfaces))}")]


def check_hccl_ifname(env, interfaces, nnodes=None) -> list:
    value = env.get(HCCL, "")
    if not value:
        return []  # the pair check says it is unset
    return [_judge_selected(check_hccl_ifname, HCCL, value, hccl_selected(value, interfaces), interfaces, nnodes)]


def check_gloo_ifname(env, interfaces, nnodes=None) -> list:
    value = env.get(GLOO, "")
    if not value:
        return []
    return [_judge_selected(check_gloo_ifname, GLOO, value, gloo_selected(value, interfaces), interfaces, nnodes)]


def check_socket_ifnames(env, interfaces, nnodes=None) -> list:
    """The three interface checks above, in the table's order (scripts/hccl_check.py prints them)."""
    return (check_ifname_pair(env, interfaces, nnodes) + check_hccl_ifname(env, interfaces, nnodes)
            + check_gloo_ifname(env, interfaces, nnodes))


def check_if_ip(env, interfaces) -> list:
    value = env.get("HCCL_IF_IP", "")
    check = check_if_ip
    if not value:
        return [ok(check, "HCCL_IF_IP unset (HCCL derives the host IP from the interface)")]
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return [error(check, f"HCCL_IF_IP={value!r} is not an IP address", "set it to this node's cluster IP or unset it")]
    if all(i.addresses is None for i in interfaces.values()):
        return [skip(check, f"HCCL_IF_IP={value}; local addresses not known", "install psutil")]
    if value not in local_addresses(interfaces):
        return [error(check, f"HCCL_IF_IP={value} is not an address of this node",
                      "set HCCL_IF_IP per node to that node's own IP (or unset it)")]
    return [ok(check, f"HCCL_IF_IP={value} belongs to this node")]
