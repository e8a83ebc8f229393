"""HCCL's own settings on this node (group hccl): its timeouts, the base of its host ports, and whether
those ports are free.

Timeouts: the 128-NPU run in docs/field-reports.md#235b-cluster-start-up sets both to 3600 s; a short
connect timeout fails a large job whose ranks reach the first collective minutes apart.

Ports: HCCL takes 16 host ports from HCCL_IF_BASE_PORT (default 60000). When another job, or a leftover of
this one, holds one of them, communicator creation fails with EJ0003 / EI0019 ("Failed to bind the
IP port", "host nic listen start failed, port[60000]"): vllm-ascend issues #405 and #11968, PR #16205.
The kernel's socket tables (/proc/net/tcp, /proc/net/tcp6) say which local ports are taken; nothing
is opened or bound to find out.
"""

from .findings import error, ok, skip, warn

HCCL_DEFAULT_CONNECT = 120  # seconds, as HCCL's own EI0006 error text says (docs/field-reports.md#32b-hccl-error-code-9-and-gloo)
RECOMMENDED_TIMEOUT = 3600  # what the 16-node run uses for both (docs/field-reports.md#235b-cluster-start-up)

HCCL_DEFAULT_BASE = 60000
HCCL_PORTS = 16
TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
_FREE_STATES = {"06", "07"}  # TIME_WAIT, CLOSE: do not stop a new listener with SO_REUSEADDR


def _timeout(check, var, env, nnodes):
    value = env.get(var, "")
    if value == "":
        if nnodes == 1:
            return [ok(check, f"{var} unset (CANN default); fine on one node")]
        return [warn(check, f"{var} unset: the CANN default is short for a large multi-node job, "
                     "where ranks reach the first collective minutes apart (weight loading)",
                     f"export {var}={RECOMMENDED_TIMEOUT} on every node before `ray start` "
                     "(as the 128-NPU run in docs/field-reports.md does)")]
    try:
        seconds = int(value)
    except ValueError:
        return [error(check, f"{var}={value!r} is not an integer (seconds)", f"export {var}={RECOMMENDED_TIMEOUT}")]
    if seconds <= 0:
        return [error(check, f"{var}={seconds} must be a positive number of seconds", f"export {var}={RECOMMENDED_TIMEOUT}")]
    if var == "HCCL_CONNECT_TIMEOUT" and seconds < HCCL_DEFAULT_CONNECT:
        return [warn(check, f"{var}={seconds} is below HCCL's default {HCCL_DEFAULT_CONNECT} s",
                     f"export {var}={RECOMMENDED_TIMEOUT}")]
    return [ok(check, f"{var}={seconds}")]


def check_connect_timeout(env, nnodes=None) -> list:
    return _timeout(check_connect_timeout, "HCCL_CONNECT_TIMEOUT", env, nnodes)


def check_exec_timeout(env, nnodes=None) -> list:
    return _timeout(check_exec_timeout, "HCCL_EXEC_TIMEOUT", env, nnodes)


def check_timeouts(env, nnodes=None) -> list:
    return check_connect_timeout(env, nnodes) + check_exec_timeout(env, nnodes)


def ephemeral_port_range(path="/proc/sys/net/ipv4/ip_local_port_range"):
    try:
        with open(path) as fh:
            low, high = (int(x) for x in fh.read().split()[:2])
        return low, high
    except (OSError, ValueError):
        return None


def check_port_base(env, port_range=None) -> list:
    """HCCL_IF_BASE_PORT: first of the 16 host ports HCCL listens on (default 60000; 1024-65520)."""
    check = check_port_base
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


def ports_in_use(tables) -> dict:
    """local port -> state code, from the text of /proc/net/tcp-style tables."""
    used = {}
    for text in tables:
        for line in text.splitlines()[1:]:
            fields = line.split()
            if len(fields) < 4 or ":" not in fields[1]:
                continue
            state = fields[3].upper()
            if state in _FREE_STATES:
                continue
            try:
                port = int(fields[1].rsplit(":", 1)[1], 16)
            except ValueError:
                continue
            used.setdefault(port, state)
    return used


def read_tables(paths=TCP_TABLES):
    texts = []
    for path in paths:
        try:
            with open(path) as fh:
                texts.append(fh.read())
        except OSError:
            continue
    return texts or None


def _base(env):
    try:
        return int(env.get("HCCL_IF_BASE_PORT") or HCCL_DEFAULT_BASE)
    except ValueError:
        return None  # check_port_base reports the bad value


def free_base(used, avoid=None, start=61000, stop=65520):
    """A base with HCCL_PORTS free ports, outside the ephemeral range ``avoid`` (lo, hi)."""
    for base in range(start, stop, HCCL_PORTS):
        span = range(base, base + HCCL_PORTS)
        if avoid and not (span[-1] < avoid[0] or span[0] > avoid[1]):
            continue
        if not any(p in used for p in span):
            return base
    return None


def check_hccl_ports(env, tables=None, ephemeral=None) -> list:
    check = check_hccl_ports
    base = _base(env)
    if base is None:
        return []
    tables = read_tables() if tables is None else tables
    if not tables:
        return [skip(check, "no /proc/net/tcp here: cannot see which ports are taken")]
    used = ports_in_use(tables)
    span = range(base, base + HCCL_PORTS)
    taken = [p for p in span if p in used]
    if not taken:
        return [ok(check, f"HCCL host ports {span[0]}-{span[-1]} are free on this node")]
    listening = [p for p in taken if used[p] == "0A"]
    other = free_base(used, ephemeral)
    fix = (f"`ss -tanp 'sport >= :{span[0]} and sport <= :{span[-1]}'` names the holder: stop it, or give this job "
           f"another range on every node: `export HCCL_IF_BASE_PORT={other or '<free base>'}`")
    return [error(check, f"{len(taken)} of the HCCL host ports {span[0]}-{span[-1]} are taken on this node ("
                  + ", ".join(str(p) + (" listening" if p in listening else "") for p in taken[:8])
                  + (", ..." if len(taken) > 8 else "") + "): communicator creation will fail with EJ0003/EI0019",
                  fix)]
