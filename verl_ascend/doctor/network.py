"""This node's network interfaces and the HCCL/Gloo variables that choose among them.

Seed 000: HCCL init failed with error code 4, then 9, until ``HCCL_SOCKET_IFNAME`` and
``GLOO_SOCKET_IFNAME`` named the same real interface on every node (with only one of them set,
Gloo's ``connectFullMesh`` failed instead). Everything here reads local state only: the
interface table of this host, never a packet to another one. ``scripts/hccl_check.py`` runs the
same checks before its all-reduce.
"""

import dataclasses
import ipaddress
import socket

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


def hccl_selected(value: str, names) -> list:
    """Interfaces HCCL_SOCKET_IFNAME selects: `eth,enp` prefixes, `=eth0` exact, `^`/`^=` exclude."""
    value = value.strip()
    exclude = value.startswith("^")
    body = value[1:] if exclude else value
    exact = body.startswith("=")
    items = [i.strip() for i in (body[1:] if exact else body).split(",") if i.strip()]

    def hit(name):
        return any(name == i if exact else name.startswith(i) for i in items)

    return sorted(n for n in names if hit(n) != exclude)


def gloo_selected(value: str, names) -> list:
    """GLOO_SOCKET_IFNAME is a comma-separated list of exact interface names."""
    return sorted({i.strip() for i in value.split(",") if i.strip()} & set(names))


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


def check_socket_ifnames(env, interfaces, nnodes=None) -> list:
    hccl, gloo = env.get("HCCL_SOCKET_IFNAME", ""), env.get("GLOO_SOCKET_IFNAME", "")
    names = list(interfaces)
    found = []
    pair = "network.socket_ifname_pair"
    if not hccl and not gloo:
        if nnodes == 1:
            found.append(ok(pair, "HCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME unset; not needed on one node"))
        else:
            found.append(warn(pair, "HCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME are unset: HCCL and Gloo "
                              "pick a default interface, which can differ from the cluster network "
                              "(docs/field-reports.md: HCCL error code 9)", FIX_PAIR))
        return found
    if bool(hccl) != bool(gloo):
        have, missing = ("HCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME") if hccl else ("GLOO_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME")
        found.append(error(pair, f"{have} is set ({hccl or gloo!r}) but {missing} is not: "
                           "the other library picks its own interface (docs/field-reports.md: Gloo connectFullMesh failed)",
                           FIX_PAIR))
    if hccl:
        hsel = hccl_selected(hccl, names)
        found.append(_judge_selected("network.hccl_socket_ifname", "HCCL_SOCKET_IFNAME", hccl, hsel, interfaces, nnodes))
    if gloo:
        gsel = gloo_selected(gloo, names)
        found.append(_judge_selected("network.gloo_socket_ifname", "GLOO_SOCKET_IFNAME", gloo, gsel, interfaces, nnodes))
    if hccl and gloo:
        if set(hsel) != set(gsel):
            found.insert(0, error(pair, f"HCCL_SOCKET_IFNAME={hccl!r} selects {hsel or 'nothing'} but "
                                  f"GLOO_SOCKET_IFNAME={gloo!r} selects {gsel or 'nothing'}", FIX_PAIR))
        else:
            found.insert(0, ok(pair, f"HCCL and Gloo use the same interface(s): {', '.join(hsel)}"))
    return found


def check_if_ip(env, interfaces) -> list:
    value = env.get("HCCL_IF_IP", "")
    check = "network.hccl_if_ip"
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


def ephemeral_port_range(path="/proc/sys/net/ipv4/ip_local_port_range"):
    try:
        with open(path) as fh:
            low, high = (int(x) for x in fh.read().split()[:2])
        return low, high
    except (OSError, ValueError):
        return None


def check_port_base(env, port_range=None) -> list:
    """HCCL_IF_BASE_PORT: first of the 16 host ports HCCL listens on (default 60000; 1024-65520)."""
    check = "hccl.if_base_port"
    value = env.get("HCCL_IF_BASE_PORT", "")
    if not value:
        return [ok(check, "HCCL_IF_BASE_PORT unset (HCCL default 60000)")]
    try:
        base = int(value)
    except ValueError:
        return [error(check, f"HCCL_IF_BASE_PORT={value!r} is not an integer", "set a port number such as 60000, or unset it")]
    if not 1024 <= base <= 65520:
        return [error(check, f"HCCL_IF_BASE_PORT={base} is outside 1024-65520 (a privileged port, or no room "
                      "for HCCL's 16 ports)", "choose a base between 1024 and 65520, e.g. 60000")]
    if port_range and port_range[0] <= base <= port_range[1]:
        return [warn(check, f"HCCL_IF_BASE_PORT={base} lies in the kernel's ephemeral port range "
                     f"{port_range[0]}-{port_range[1]}: an outgoing connection can take the port first",
                     "choose a base outside net.ipv4.ip_local_port_range, or reserve it in net.ipv4.ip_local_reserved_ports")]
    return [ok(check, f"HCCL_IF_BASE_PORT={base}")]
