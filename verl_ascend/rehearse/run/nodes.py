"""A node of a multi-node rehearsal, as every part of it names it: its address, its name, its own disk.

Shared by the launcher (:mod:`.cluster`), the steps between the runs (:mod:`.multinode`) and the node
transport (:mod:`.nodeshell`). Worker node k is at SUBNET.(k+1) on the loopback (SUBNET drawn per rehearsal,
``127.A.B``); the head keeps this machine's own address. Node k's files are ``NODES_DIR/node<k>/<name>``.
"""

from pathlib import Path


def node_ip(index: int, head_ip: str = "", subnet: str = "127.0.0") -> str:
    """The head keeps this machine's own address (Ray's drivers find their node by it, as a cluster's driver on the
    head does); worker node k gets SUBNET.(k+1) on the loopback (all of 127/8 is this machine's)."""
    return head_ip if index == 0 else f"{subnet}.{index + 1}"


def node_name(index: int) -> str:
    return "head" if index == 0 else f"worker node {index}"


def node_copy(nodes_dir, index: int, path) -> Path:
    """Where node ``index``'s own copy of the node-local ``path`` lives, seen from outside the nodes."""
    return Path(nodes_dir) / f"node{index}" / Path(path).name


def binds(index: int, spec: dict) -> list:
    """``mount --bind`` commands that give node ``index`` its own folder at each node-local path (both made here
    when missing, before the first run and when commands.txt runs this again after the temp folder is gone)."""
    cmds = []
    for target in spec["node_local"]:
        source = node_copy(spec["nodes_dir"], index, target)
        source.mkdir(parents=True, exist_ok=True)
        Path(target).mkdir(parents=True, exist_ok=True)
        cmds.append(["mount", "--bind", str(source), target])
    return cmds
