"""A run's processes, found by the mark in their environment.

A Ray cluster's processes leave the process group and the session of the command that started them and
rename themselves (``ray::WorkerDict``, ``raylet``), so neither a group kill nor a name says which are a run's.
Their environment is inherited and kept: every process of a run started with ``VAR=<run>`` carries it, and
a scan of ``/proc/*/environ`` finds them, in any namespace this user can read. ``pkill python`` would end
other users' work (Ascend/AgentSDK's restart script does that); a mark ends only the run's.
"""

import os
import signal
import time
from pathlib import Path
from typing import NamedTuple

from . import info


class Mark(NamedTuple):
    var: str    # the environment variable (core.runlog names the ones our tools use)
    value: str  # this run's own value

    def __str__(self) -> str:
        return f"{self.var}={self.value}"

    def env(self) -> dict:
        return {self.var: self.value}


def _environ_scan(holds) -> list:
    """Pids (sorted) of the processes this user can read whose environment items satisfy ``holds(items)``; this
    process left out, and zombies (their environment reads empty: they have ended already)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if holds(environ.split(b"\0")):
            found.append(int(entry.name))
    return sorted(found)


def marked(mark: Mark) -> list:
    """Pids of every process this user can read whose environment carries the mark (any namespace)."""
    wanted = str(mark).encode()
    return _environ_scan(lambda items: wanted in items)


def carrying(var: str, value_prefix: str) -> list:
    """Pids of every process whose ``var`` starts with ``value_prefix``: all runs of one owner, whose marks share
    it (``rehearse`` names each of its runs and steps ``<its id>-<label>``)."""
    wanted = f"{var}={value_prefix}".encode()
    return _environ_scan(lambda items: any(item.startswith(wanted) for item in items))


def end_marked(mark: Mark, grace: float = 5.0, patience: float = 60.0) -> list:
    """SIGTERM, then SIGKILL, every process with the mark, until none is left or ``patience`` runs out.

    New processes can appear while it works (a Ray raylet restarting a worker): each round scans again.
    Returns what is still alive at the end, from a last scan ([] means: every process of the run has ended)."""
    deadline = time.monotonic() + patience
    term_sent = set()
    while True:
        alive = marked(mark)
        if not alive or time.monotonic() > deadline:
            return alive
        for pid in alive:
            sig = signal.SIGKILL if pid in term_sent else signal.SIGTERM
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            term_sent.add(pid)
        waited = time.monotonic() + grace
        while time.monotonic() < waited and marked(mark):
            time.sleep(0.2)


def describe(pids) -> str:
    """``pid (name, state)`` for each pid, as a person reads a list of survivors (Ray's ``ray::Actor`` title as
    the name where the process set one)."""
    parts = []
    for pid in pids:
        found = info.read(pid)
        parts.append(f"{pid} ({found['name']}, {found['state']})" if found else f"{pid} (gone)")
    return ", ".join(parts)


def main(argv=None) -> int:
    """``python -m verl_ascend.proc.marks list|end VAR=value``: on this host, the run's processes (list) or what
    survived their ending (end), as one JSON line; exit 0 when none is left, 1 otherwise, 2 on bad input.
    What ``supervise`` runs on the other nodes of a cluster (over ssh, as ``ckpt sync`` reaches them)."""
    import json
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] not in ("list", "end") or "=" not in args[1] or not args[1].split("=", 1)[0]:
        print("usage: python -m verl_ascend.proc.marks list|end VAR=value", file=sys.stderr)
        return 2
    mark = Mark(*args[1].split("=", 1))
    pids = marked(mark) if args[0] == "list" else end_marked(mark)
    print(json.dumps({"host": os.uname().nodename, "mark": str(mark), "pids": pids, "described": describe(pids)}))
    return 1 if pids else 0


if __name__ == "__main__":
    raise SystemExit(main())
