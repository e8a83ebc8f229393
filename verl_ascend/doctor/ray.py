"""The Ray cluster this node belongs to, when its head runs here: NPU resources vs the plan (group ray).

Only a head on this node is contacted (an address of one of this host's interfaces); a worker
node's doctor says to run it on the head instead of talking to another host.
"""

import ipaddress
import json
import os
import socket
import subprocess
import sys

from .findings import error, ok, skip, warn


def address_file(env) -> str:
    """Where `ray start` records the cluster address (Ray's temp dir rules: RAY_TMPDIR, TMPDIR, /tmp)."""
    base = env.get("RAY_TMPDIR") or env.get("TMPDIR") or "/tmp"
    return os.path.join(base, "ray", "ray_current_cluster")


def discover(option: str, env):
    """(address or None, how it was found / why there is none)."""
    if option == "off":
        return None, "--ray-address off"
    if option not in ("", "auto"):
        return option, "--ray-address"
    from_env = env.get("RAY_ADDRESS", "")
    if from_env and from_env != "auto":
        return from_env, "RAY_ADDRESS"
    path = address_file(env)
    try:
        with open(path) as fh:
            text = fh.read().strip()
    except OSError:
        return None, f"no RAY_ADDRESS and no {path}: Ray is not started on this node"
    return (text or None), path


def host_of(address: str) -> str:
    address = address.split("://")[-1]
    host = address.rsplit(":", 1)[0] if address.count(":") == 1 or address.startswith("[") else address
    return host.strip("[]")


def is_local(host: str, local_ips) -> bool:
    if host in ("localhost", socket.gethostname()):
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False  # a name: resolving it could mean asking another host
    return host in local_ips


def probe(address: str, timeout: float):
    """(nodes, problem): the cluster's nodes via ray_probe in a child process."""
    try:
        proc = subprocess.run([sys.executable, "-m", "verl_ascend.doctor.ray_probe", address],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"no answer from the Ray cluster at {address} within {timeout:.0f} s"
    for line in reversed(proc.stdout.strip().splitlines()):
        try:
            return json.loads(line)["nodes"], ""
        except (ValueError, KeyError, TypeError):
            continue
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return None, f"could not join the Ray cluster at {address}: {tail}"


def check_ray(address, how, local_ips, nnodes, npus_per_node, timeout=60.0, basis="") -> list:
    """`basis`: where npus_per_node comes from (the detected platform's profile, or --npus-per-node)."""
    check = check_ray
    if address is None:
        return [skip(check, f"Ray cluster not checked ({how})",
                     "run doctor on the head node after `ray start`, with --nnodes N, to compare NPU resources")]
    host = host_of(address)
    if not is_local(host, local_ips):
        return [skip(check, f"the Ray cluster at {address} (from {how}) is not on this node: not contacted",
                     "run `verl-ascend doctor --nnodes N` on the head node")]
    nodes, problem = probe(address, timeout)
    if problem:
        return [error(check, problem, "check `ray status` on this node; restart the head with `ray start --head ...`")]
    alive = [n for n in nodes if n["alive"]]
    per_node = [(n["ip"], n["resources"].get("NPU", 0)) for n in alive]
    total = sum(count for _, count in per_node)
    shown = ", ".join(f"{ip}: {count:g} NPU" for ip, count in per_node)
    fix_resources = ("start every node with `ray start ... --resources='{\"NPU\": %d}'` "
                     "(as the 128-NPU run in docs/field-reports.md does)" % npus_per_node)
    if nnodes:
        expected = nnodes * npus_per_node
        if len(alive) != nnodes or total != expected:
            return [error(check, f"Ray sees {len(alive)} node(s) with {total:g} NPU ({shown}); "
                          f"--nnodes {nnodes} needs {nnodes} x {npus_per_node} = {expected}"
                          + (f" ({basis})" if basis else ""),
                          f"start the missing workers with `ray start --address=HEAD:PORT`; {fix_resources}")]
        return [ok(check, f"Ray sees {len(alive)} node(s) with {total:g} NPU as planned ({shown})")]
    short = [ip for ip, count in per_node if count != npus_per_node]
    if short:
        return [warn(check, f"Ray nodes without {npus_per_node} NPU{f' ({basis})' if basis else ''}: "
                     f"{', '.join(short)} ({shown})", fix_resources)]
    return [ok(check, f"Ray sees {len(alive)} node(s) with {total:g} NPU ({shown}); pass --nnodes to compare with the plan")]
