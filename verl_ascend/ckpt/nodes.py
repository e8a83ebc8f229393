"""The nodes of `ckpt sync`: what a node spec means, and every command we run on one (ssh + rsync).

A node is ``[user@]host[:port]``, reached with the ssh command of ``--ssh`` (default ``ssh``; an
alias from ``~/.ssh/config`` works as a host). DIR is the same absolute path on every node, as verl
assumes (every worker writes under ``trainer.default_local_dir``). Nothing of ours runs on a node
but ``find``, ``rsync`` and, for the re-check, ``python -m verl_ascend ckpt check``.

rsync cannot copy from one remote host to another, so a copy runs *on the source node* and pushes
to the destination (node-to-node ssh, as multi-node launches already need). rsync writes each file
to a temp name beside it and renames it when complete; without ``--partial`` (we pass
``--no-partial`` in case a user's popt file turns it on) a failed transfer deletes its temp file,
so a node never holds half a file under a real name.
"""

import dataclasses
import re
import shlex
import subprocess

_SPEC = re.compile(r"(?:(?P<user>[A-Za-z0-9_.][A-Za-z0-9_.-]*)@)?(?P<host>[A-Za-z0-9_][A-Za-z0-9_.-]*)"
                   r"(?::(?P<port>\d{1,5}))?")
# BatchMode: never stop at a password prompt (the copy runs unattended); the rest turns a dead
# host or link into an error in seconds instead of a hang.
SSH_OPTIONS = ("-o", "BatchMode=yes", "-o", "ConnectTimeout=15", "-o", "ServerAliveInterval=15",
               "-o", "ServerAliveCountMax=4")
UNREACHABLE = 255  # ssh's own exit status for "could not connect / authenticate"


class NodeError(Exception):
    """A node could not be reached or a command on it failed: names the node, the reason and the fix."""

    def __init__(self, node, message: str, fix: str):
        super().__init__(f"{node}: {message}")
        self.node, self.message, self.fix = node, message, fix


@dataclasses.dataclass(frozen=True)
class Node:
    spec: str
    user: str
    host: str
    port: str

    def __str__(self):
        return self.spec

    @property
    def target(self) -> str:
        return f"{self.user}@{self.host}" if self.user else self.host


def parse(spec: str) -> Node:
    m = _SPEC.fullmatch(spec)
    if not m or (m.group("port") and not 0 < int(m.group("port")) < 65536):
        raise ValueError(f"--nodes {spec!r} is not [user@]host[:port] (e.g. node1, root@10.0.0.2, "
                         "node3:2222); for anything fancier put a Host alias in ~/.ssh/config")
    return Node(spec, m.group("user") or "", m.group("host"), m.group("port") or "")


def ssh_argv(ssh: str, node: Node) -> list:
    return [*shlex.split(ssh), *SSH_OPTIONS, *(["-p", node.port] if node.port else []), node.target]


def run(ssh: str, node: Node, script: str, stdin: bytes = b"", timeout=120, stream=False):
    """Run a POSIX shell script on the node; raise NodeError if ssh itself failed. ``stream``: its
    output goes to our stderr as it comes (rsync's progress), not into the result."""
    try:
        # through sh -c: the login shell of the remote user may be csh or fish
        proc = subprocess.run([*ssh_argv(ssh, node), shlex.join(["sh", "-c", script])], input=stdin, timeout=timeout,
                              stdout=2 if stream else subprocess.PIPE, stderr=None if stream else subprocess.PIPE)
    except subprocess.TimeoutExpired:
        raise NodeError(node, f"no answer over ssh within {timeout} s", "check that the node is up and "
                        f"`{shlex.join(ssh_argv(ssh, node))} true` returns at once") from None
    except FileNotFoundError:
        raise NodeError(node, f"the ssh command {ssh!r} is not installed here", "install openssh-client, "
                        "or pass --ssh with the path of yours") from None
    if proc.returncode == UNREACHABLE:
        said = (proc.stderr or b"").decode(errors="replace").strip().splitlines()
        raise NodeError(node, "cannot reach it over ssh" + (f" ({said[-1]})" if said else ""),
                        f"check the name and port, and that `{shlex.join(ssh_argv(ssh, node))} true` works "
                        "without a password (keys or an agent; BatchMode is on)")
    return proc


def listing(ssh: str, node: Node, root: str, tracker: str) -> tuple:
    """({relative path: size} of every file under root, the tracker's text or None); ({}, None) if
    root is not there yet (a node that never saved)."""
    script = (f"if cd {shlex.quote(root)} 2>/dev/null; then find . -type f -printf '%s %P\\0' || exit 3; "
              f"if [ -f {shlex.quote(tracker)} ]; then printf '@tracker %s\\0' \"$(head -c 64 {shlex.quote(tracker)})\"; "
              "fi; fi")
    proc = run(ssh, node, script)
    if proc.returncode != 0:
        raise NodeError(node, f"listing {root} failed: {_tail(proc)}", "the node needs GNU find (findutils) and "
                        f"read access to {root}")
    files, text = {}, None
    for entry in proc.stdout.decode(errors="surrogateescape").split("\0"):
        size, _, rel = entry.partition(" ")
        if size == "@tracker":
            text = rel.strip()
        elif rel:
            files[rel] = int(size)
    return files, text


def copy(ssh: str, src: Node, dst: Node, root: str, rels: list, progress: bool) -> None:
    """rsync ``rels`` (relative to root) from src to dst, run on src; raise NodeError naming both on failure."""
    mkdir = f"mkdir -p {shlex.quote(root)} && rsync"  # a node that never saved has no DIR yet
    # --ignore-times --whole-file: the plan already chose these files, send them whole
    options = ["--links", "--perms", "--times", "--ignore-times", "--whole-file", "--no-partial", "--timeout=120",
               "--from0", "--files-from=-",
               "-e", shlex.join([*shlex.split(ssh), *SSH_OPTIONS, *(["-p", dst.port] if dst.port else [])]),
               "--rsync-path", mkdir, *(["--info=progress2"] if progress else [])]
    script = f"cd {shlex.quote(root)} && rsync {shlex.join(options)} ./ {shlex.quote(dst.target + ':' + root + '/')}"
    proc = run(ssh, src, script, stdin="\0".join(rels).encode(errors="surrogateescape"), timeout=None,
               stream=progress)
    if proc.returncode != 0:
        why = _tail(proc) if not progress else "see rsync's messages above"
        raise NodeError(dst, f"copying {len(rels)} files from {src} failed (rsync exit {proc.returncode}): {why}",
                        f"files copied whole so far are kept, none half-written; fix the cause (disk space, "
                        f"`ssh {src.target} ssh {dst.target} true` without a password, rsync installed on "
                        "both) and run ckpt sync again: it copies only what is still missing")


def remote_check(ssh: str, node: Node, root: str, python: str):
    """Run `ckpt check DIR --json` on the node itself; (exit code, report dict)."""
    import json

    proc = run(ssh, node, f"{shlex.quote(python)} -m verl_ascend ckpt check {shlex.quote(root)} --json", timeout=900)
    for line in reversed(proc.stdout.decode(errors="replace").splitlines()):
        try:
            return proc.returncode, json.loads(line)
        except ValueError:
            continue
    raise NodeError(node, f"`{python} -m verl_ascend ckpt check` gave no report (exit {proc.returncode}): "
                    f"{_tail(proc)}", "pass --remote-python with the python of the environment that has "
                    "verl-ascend on that node")


def _tail(proc) -> str:
    text = (proc.stderr or b"").decode(errors="replace").strip() or (proc.stdout or b"").decode(errors="replace")
    return " | ".join(text.strip().splitlines()[-3:]) or "no message"
