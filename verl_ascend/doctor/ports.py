"""Are the host ports HCCL will listen on free on this node?

HCCL takes 16 host ports from HCCL_IF_BASE_PORT (default 60000). When another job, or a leftover of
this one, holds one of them, communicator creation fails with EJ0003 / EI0019 ("Failed to bind the
IP port", "host nic listen start failed, port[60000]"): vllm-ascend issues #405 and #11968, PR #16205.
The kernel's socket tables (/proc/net/tcp, /proc/net/tcp6) say which local ports are taken; nothing
is opened or bound to find out.
"""

from .findings import error, ok, skip

HCCL_DEFAULT_BASE = 60000
HCCL_PORTS = 16
TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
_FREE_STATES = {"06", "07"}  # TIME_WAIT, CLOSE: do not stop a new listener with SO_REUSEADDR


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
        return None  # network.check_port_base reports the bad value


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
    check = "hccl.ports_free"
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
