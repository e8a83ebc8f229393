"""Before a relaunch, where the Ray cluster outlives the command: its nodes are back (``trainer.nnodes`` alive).

A cluster formed by ``ray start`` on each node (recipes/ray_start_head.sh, ray_start_worker.sh) is not the command's:
its daemons carry no mark of the run and stay when the attempt is ended, and a node that died must have rejoined it
before the relaunch can place its workers. Its address is found as ``doctor`` finds it (``RAY_ADDRESS`` in the
command's environment, else the file ``ray start --head`` writes, ``$RAY_TMPDIR|$TMPDIR|/tmp/ray/ray_current_cluster``),
and its nodes are read from Ray's GCS with the public ``ray.nodes()`` (``NodeManagerAddress``, ``Alive``; its fields
are the same since Ray 1.x) by ``doctor``'s probe, a driver in a child process bounded by a timeout. ``ray status``
shows the same nodes, but as text for people, from the autoscaler's report (refreshed every few seconds, in two
formats: autoscaler v1 and v2) and by node id, without the addresses a missing node is named by.

No address, or nothing answering there once the attempt is ended: the command forms its own cluster (as a
rehearsal's ``rehearse/run/cluster.py`` does, with every node's ``ray start`` inside the attempt), which the relaunch
starts again with it; that is said once and not waited for.
"""

import socket
import time

from verl_ascend.doctor import ray as doctor_ray

PROBE_TIMEOUT = 60.0  # s for one look (ray.init of a driver on a loaded host: seconds; a half-dead GCS: longer)
PROBE_FLOOR = 20.0    # s a look always gets, even past the deadline (the wait ends after it)
_told = set()         # what was said once already (no cluster outside the command)


def wanted(settings: dict, nodes=()):
    """The nodes the run needs: ``trainer.nnodes``, else as many as ``--nodes`` lists; None when neither says."""
    value = (settings or {}).get("nnodes")
    try:
        return int(value) if value not in (None, "") else (len(nodes) or None)
    except (TypeError, ValueError):
        return len(nodes) or None


def answers(address: str, timeout: float = 3.0) -> bool:
    """Whether something listens at the GCS address (a cluster ended with the command leaves none)."""
    try:
        port = int(address.split("://")[-1].rsplit(":", 1)[1])
        with socket.create_connection((doctor_ray.host_of(address), port), timeout=timeout):
            return True
    except (OSError, ValueError, IndexError):
        return False


def outside(env: dict):
    """(address, how it was found) of a Ray cluster that outlives the command, or (None, why there is none)."""
    address, how = doctor_ray.discover("auto", env)
    if address is None:
        return None, f"no Ray cluster outside the command ({how})"
    if not answers(address):
        return None, f"nothing answers at {address} (from {how}): no Ray cluster outside the command"
    return address, how


def _is(host: str, node: dict) -> bool:
    if host in (node.get("ip"), node.get("hostname")):
        return True
    try:
        return socket.gethostbyname(host) == node.get("ip")
    except OSError:
        return False


def shortfall(nodes: list, want: int, hosts=()) -> str:
    """'' when at least ``want`` nodes are alive in Ray's table (``ray.nodes()``, as doctor's probe gives it: each
    {alive, ip}), else how many are and which are missing: nodes dead in the table (not back under the same
    address) and ``hosts`` (``--nodes``) that no live node is."""
    alive = [n for n in nodes if n.get("alive")]
    if len(alive) >= want:
        return ""
    live_ips = {n.get("ip") for n in alive}
    dead = sorted({n.get("ip") for n in nodes if not n.get("alive") and n.get("ip") not in live_ips})
    absent = [h for h in hosts if not any(_is(h, n) for n in alive)]
    return (f"Ray shows {len(alive)} of {want} node(s) alive ({', '.join(sorted(live_ips)) or 'none'})"
            + (f"; dead in Ray's table: {', '.join(dead)}" if dead else "")
            + (f"; not in the cluster: {', '.join(absent)}" if absent else ""))


def wait(address: str, want: int, hosts, deadline: float, poll: float = 10.0, probe=None) -> str:
    """Look at Ray's nodes until ``want`` are alive ('') or ``deadline`` (monotonic) passes (the last shortfall).
    ``probe(address, timeout)`` -> (nodes, problem): doctor's by default."""
    probe = probe or doctor_ray.probe
    while True:
        nodes, problem = probe(address, max(PROBE_FLOOR, min(PROBE_TIMEOUT, deadline - time.monotonic())))
        why = problem or shortfall(nodes, want, hosts)
        if not why or time.monotonic() >= deadline:
            return why
        time.sleep(max(0.0, min(poll, deadline - time.monotonic())))


def say_once(say, text: str) -> None:
    if text not in _told:
        _told.add(text)
        say(text)
