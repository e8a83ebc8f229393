"""Ending a rehearsal's processes when ``rehearse`` itself is stopped or killed.

The run's PID namespace (see :mod:`.runner`) ends every process of the run when main_ppo ends. What
ends main_ppo when ``rehearse`` is the one that dies:

- SIGTERM / SIGINT / SIGHUP (``kill``, ``timeout``, a CI cancel, Ctrl-C, a closed terminal): a handler
  turns the signal into :class:`Stopped`, the runner ends the run on its way out, then ``rehearse``
  exits 128 + the signal's number.
- SIGKILL (the OOM killer, ``kill -9``): nothing of ``rehearse`` runs any more, so the kernel does it.
  ``unshare`` is started with the parent-death signal SIGKILL (``prctl(PR_SET_PDEATHSIG)``, kept across
  its ``execve``, and across its ``unshare(CLONE_NEWUSER)``, which leaves the effective uid as it is);
  its ``--kill-child`` gives main_ppo the same, and main_ppo is the namespace's first process, whose
  death ends the namespace. The signal follows the *thread* that started unshare: the runner starts it
  from the thread that runs the whole rehearsal.
- No namespace (Docker without CAP_SYS_ADMIN, hosts that restrict user namespaces): every process of
  the run carries ``VERL_ASCEND_REHEARSE_RUN=<mark>`` in its environment (Ray's renamed ``ray::``
  workers and daemons in their own sessions included). The run is ended by that mark, and a guard
  process, started in its own session without the mark, holds the read end of a pipe that only
  ``rehearse`` writes to: when ``rehearse`` dies by any means the pipe reads end-of-file and the guard
  ends every process with the mark, then exits.
"""

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

MARK = "VERL_ASCEND_REHEARSE_RUN"
PR_SET_PDEATHSIG = 1
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Stopped(BaseException):
    """``rehearse`` got a stop signal (a BaseException, like KeyboardInterrupt: nothing catches it by accident)."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


def _raise_stopped(signum, _frame):
    raise Stopped(signum)


class stop_signals_raise:
    """Within the block, SIGTERM/SIGINT/SIGHUP raise :class:`Stopped` (main thread only; elsewhere a no-op)."""

    def __enter__(self):
        self.saved = {}
        if threading_main():
            for sig in STOP_SIGNALS:
                self.saved[sig] = signal.signal(sig, _raise_stopped)
        return self

    def __exit__(self, *exc):
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)
        return False


def threading_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def die_with_parent(parent: int):
    """A ``preexec_fn``: the child gets SIGKILL when the thread that started it ends (and at once if it already has)."""

    def preexec():
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died between fork and prctl
            os._exit(137)

    return preexec


def marked(mark: str) -> list:
    """Pids of every process this user can read whose environment carries ``MARK=mark`` (any namespace)."""
    wanted = f"{MARK}={mark}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if wanted in environ.split(b"\0"):  # a zombie reads empty: it has ended already
            found.append(int(entry.name))
    return found


def end_marked(mark: str, grace: float = 5.0, patience: float = 60.0) -> list:
    """SIGTERM, then SIGKILL, every process with the mark, until none is left or ``patience`` runs out.

    New processes can appear while it works (a Ray raylet restarting a worker): each round scans again.
    Returns what is still alive at the end ([] means: every process of the run has ended)."""
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


def start_guard(mark: str):
    """The guard of a run without a namespace: returns the pipe's write end (close it when the run is over)."""
    read_end, write_end = os.pipe()
    env = {k: v for k, v in os.environ.items() if k != MARK}
    env["PYTHONNOUSERSITE"] = "1"
    subprocess.Popen([sys.executable, "-S", "-c", _GUARD, mark], stdin=read_end, env=env, close_fds=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    os.close(read_end)
    os.set_inheritable(write_end, False)
    return write_end


# The guard itself: no site (-S), so not even verl-ascend's .pth runs in it. It waits for end-of-file on
# stdin, then ends the run's processes by the mark with the same rounds as end_marked.
_GUARD = """
import os, signal, sys, time
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, signal.SIG_IGN)
mark = sys.argv[1]
while os.read(0, 4096):
    pass
wanted = ('VERL_ASCEND_REHEARSE_RUN=' + mark).encode()
def alive():
    found = []
    for name in os.listdir('/proc'):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open('/proc/' + name + '/environ', 'rb') as f:
                    if wanted in f.read().split(b'\\0'):
                        found.append(int(name))
            except OSError:
                pass
    return found
deadline = time.monotonic() + 120
sent = set()
while time.monotonic() < deadline:
    pids = alive()
    if not pids:
        break
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL if pid in sent else signal.SIGTERM)
        except OSError:
            pass
        sent.add(pid)
    time.sleep(2)
"""
