"""``ssh`` to a node of a multi-node rehearsal: what ``ckpt sync --ssh`` and the per-node ``ckpt check`` use.

``python -m verl_ascend.rehearse.run.nodeshell --nodes-dir D --node-local PATH... --node HOST=K... [ssh options]
[user@]HOST COMMAND...`` takes the arguments ssh takes (as rsync's ``-e`` and ``ckpt sync`` pass them: ``-o``,
``-p``, ``-l`` with a value, other flags alone), and runs COMMAND with ``sh -c`` in node K's view: a mount
namespace of its own (util-linux ``unshare --mount``; with ``--user --map-root-user`` when not root) in which
``D/node<K>/<name>`` is bind-mounted over each node-local PATH, exactly as the node's Ray processes saw it
(:mod:`.cluster`). So ``ckpt sync`` runs its own code path (listing with ``find``, pushing with ``rsync`` from
the source node, ``ckpt check`` on each node) and only the transport differs from a cluster's. The node's folders
are made when missing (a supervisor reaches the nodes before the first run made them). COMMAND runs with node K's
``runlog.NODE_VAR`` (none for the head), as node K's Ray processes do: the nodes share this host's ``/proc``, and
``supervise``'s evidence gatherer keeps node K's processes by it. A host that is not a node of
the rehearsal exits 255, ssh's own "could not connect".
"""

import os
import shlex
import sys

from verl_ascend.core import runlog
from verl_ascend.rehearse.run.nodes import node_copy

UNREACHABLE = 255
_WITH_VALUE = {"-o", "-p", "-l", "-i", "-F", "-J", "-b", "-c", "-m", "-E", "-S", "-W", "-w", "-D", "-L", "-R"}


def argv_for(nodes_dir: str, node_local: list, nodes: dict, ssh_args: list) -> list:
    """The command that runs what ``ssh_args`` (options, host, command) ask for in that node's view."""
    args = list(ssh_args)
    while args and args[0].startswith("-"):
        flag = args.pop(0)
        if flag in _WITH_VALUE and args:
            args.pop(0)
    if not args:
        raise LookupError("no host given")
    host = args.pop(0).rpartition("@")[2]
    if host not in nodes:
        raise LookupError(f"{host} is not a node of this rehearsal (its nodes: {', '.join(sorted(nodes))})")
    index = nodes[host]
    # a node reached before its first run (a supervisor's `ssh NODE true`) has no folders yet: made as cluster.py does
    binds = [shlex.join(["mkdir", "-p", str(node_copy(nodes_dir, index, p)), p]) + " && "
             + shlex.join(["mount", "--bind", str(node_copy(nodes_dir, index, p)), p]) for p in node_local]
    command = " ".join(args) or "exec sh"
    # what runs in node K's view is of node K, as that node's Ray processes are (cluster.py): the same NODE_VAR
    tag = ["env", "-u", runlog.NODE_VAR] + ([f"{runlog.NODE_VAR}={index}"] if index else [])
    prefix = tag + ["unshare"] + ([] if os.geteuid() == 0 else ["--user", "--map-root-user"])
    return prefix + ["--mount", "--propagation", "private", "--", "sh", "-c",
                     " && ".join(binds + ['exec sh -c "$1"']), "node", command]


def ssh_command(nodes_dir: str, node_local: list, nodes: dict) -> str:
    """The ``--ssh`` value that reaches the nodes through this module."""
    parts = [sys.executable, "-m", "verl_ascend.rehearse.run.nodeshell", "--nodes-dir", nodes_dir]
    for path in node_local:
        parts += ["--node-local", path]
    for host, index in sorted(nodes.items(), key=lambda kv: kv[1]):
        parts += ["--node", f"{host}={index}"]
    return shlex.join(parts)


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    nodes_dir, node_local, nodes = "", [], {}
    while args and args[0] in ("--nodes-dir", "--node-local", "--node") and len(args) > 1:
        flag, value = args.pop(0), args.pop(0)
        if flag == "--nodes-dir":
            nodes_dir = value
        elif flag == "--node-local":
            node_local.append(value)
        else:
            host, _, index = value.partition("=")
            nodes[host] = int(index)
    try:
        argv_run = argv_for(nodes_dir, node_local, nodes, args)
    except LookupError as exc:
        print(f"ssh: {exc}", file=sys.stderr)
        return UNREACHABLE
    os.execvp(argv_run[0], argv_run)
    return UNREACHABLE  # not reached


if __name__ == "__main__":
    sys.exit(main())
