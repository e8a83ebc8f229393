"""A PID namespace for a run: the kernel ends every process in it when its first process ends.

util-linux ``unshare --pid --fork --kill-child --mount-proc`` (with ``--user --map-root-user`` when not root)
makes the namespace and runs the command as its first process; ``--kill-child`` ends that process when
``unshare`` dies. Where the kernel refuses (Docker without CAP_SYS_ADMIN, ``kernel.unprivileged_userns_clone=0``)
:func:`prefix` is empty and the run is ended by its mark instead (:mod:`.marks`, :mod:`.guard`).
"""

import os
import shutil
import subprocess
import time

from .marks import marked

_works = []  # the prefix that works here, found once per process ([] where none can be had)


def prefix() -> list:
    """The ``unshare`` command that gives a command its own PID namespace here ([] where none can be had)."""
    if not _works:
        cmd = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]
        if os.geteuid() != 0:
            cmd[1:1] = ["--user", "--map-root-user"]
        works = False
        if shutil.which("unshare"):
            try:
                works = subprocess.run(cmd + ["true"], stdin=subprocess.DEVNULL, capture_output=True,
                                       timeout=30).returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                works = False
        _works.append(cmd if works else [])
    return list(_works[0])


def set_available(available: bool) -> None:
    """Decide for this process whether namespaces are used (tests of the fallback: a host that refuses them);
    ``True`` finds out again whether this host gives one."""
    _works.clear()
    if not available:
        _works.append([])


def namespace_of(pid: int, kind: str) -> str:
    """``kind:[inode]`` of the namespace of that kind (pid, mnt) a process lives in ('' when it is gone)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return ""


def pid_namespace(pid: int) -> str:
    return namespace_of(pid, "pid")


def child_namespace(proc, stop) -> str:
    """The PID namespace ``unshare`` (``proc``) made for its command, read from unshare itself.

    ``/proc/<unshare>/ns/pid_for_children`` names the new namespace once unshare has called
    ``unshare(CLONE_NEWPID)`` *and* forked the namespace's first process: in between (with ``--user`` that
    includes writing its uid map) the kernel has no reaper for it and the link reads ENOENT
    (fs/proc/namespaces.c, kernel/pid_namespace.c: pidns_for_children_get). So an unreadable link means
    "not yet" while unshare lives, and "gone" only once unshare has exited. Looking for the child instead
    missed a child that started and exited while this process was not scheduled (a loaded host).
    No deadline: the wait ends when the namespace appears, when unshare ends, or when ``stop`` (an Event) is
    set."""
    own = pid_namespace(proc.pid)
    while not stop.is_set():
        try:
            ns = os.readlink(f"/proc/{proc.pid}/ns/pid_for_children")
            if own and ns != own:
                return ns
        except OSError:
            pass
        if proc.poll() is not None:
            return ""  # unshare has ended: its namespace is gone with it
        time.sleep(0.01)
    return ""


def processes_in(namespace: str, mark) -> list:
    """Pids (as this process sees them) of every process in that PID namespace that carries the run's mark.

    A namespace's ``pid:[inode]`` is only a name while the namespace lives: the kernel hands a freed inode
    number to the next namespace made (another run, a ``check`` sandbox), so a process found under the number
    must also carry the mark to be the run's."""
    return [pid for pid in marked(mark) if pid_namespace(pid) == namespace]
