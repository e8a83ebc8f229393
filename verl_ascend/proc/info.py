"""What a process is, read from ``/proc``, and what can read its Python stacks: one reader for every caller.

``read(pid)`` parses ``/proc/PID/stat`` (name, state, parent, CPU time, start time) and ``cmdline`` once; the
name shown is Ray's ``ray::Actor`` title where the process set one (its ``comm`` stays ``python``). ``py_spy()``
and ``ptrace_scope()`` are what ``supervise``'s evidence and ``doctor``'s ptrace check both ask.
"""

import os
import shutil
import sys


def read(pid: int):
    """{pid, ppid, name, state, cpu_s, start, cmd} of a live process, or None when it is gone.

    ``start`` is field 22 of ``stat`` (clock ticks after boot): with the pid, what tells a process from a later
    one that reused its pid."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().split(b"\0")
    except OSError:
        return None
    name = stat[stat.index("(") + 1:stat.rindex(")")]
    rest = stat[stat.rindex(")") + 2:].split()
    first = cmd[0].decode(errors="replace") if cmd and cmd[0] else name
    return {"pid": pid, "ppid": int(rest[1]), "name": first if first.startswith("ray::") else name, "state": rest[0],
            "cpu_s": (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK"), "start": rest[19],
            "cmd": " ".join(c.decode(errors="replace") for c in cmd if c)}


def start_of(pid: int):
    """The process's start time (``read``'s ``start``), or None when it is gone."""
    info = read(pid)
    return info["start"] if info else None


# how to let py-spy read other processes' stacks (Yama: Documentation/admin-guide/LSM/Yama.rst)
PTRACE_GRANT = ("in a container add CAP_SYS_PTRACE (docker run --cap-add SYS_PTRACE; Kubernetes "
                "securityContext.capabilities.add: [\"SYS_PTRACE\"]); on the host set kernel.yama.ptrace_scope=0 "
                "(sysctl -w kernel.yama.ptrace_scope=0) or grant it to py-spy (setcap cap_sys_ptrace+ep $(which py-spy))")


def py_spy():
    """The py-spy next to this interpreter (a venv's), else on PATH, else None."""
    here = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return here if os.access(here, os.X_OK) else shutil.which("py-spy")


def ptrace_scope():
    """``kernel.yama.ptrace_scope`` as an int, or None where Yama is not there (or the value is not a number)."""
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as fh:
            text = fh.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
