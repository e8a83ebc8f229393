"""Ending a run when its owner (``rehearse``, ``supervise``) is stopped or killed.

A run in its own PID namespace (:mod:`.namespace`) ends with its first process. What ends that process, or a
run without a namespace, when the owner is the one that dies:

- SIGTERM / SIGINT / SIGHUP (``kill``, ``timeout``, a CI cancel, Ctrl-C, a closed terminal): within
  :class:`stop_signals_raise` the signal becomes :class:`Stopped`, the owner ends the run on its way out, then
  exits 128 + the signal's number.
- SIGKILL (the OOM killer, ``kill -9``): nothing of the owner runs any more, so the kernel does it. The
  command is started with the parent-death signal SIGKILL (``prctl(PR_SET_PDEATHSIG)``, :func:`die_with_parent`;
  kept across ``execve``, and across ``unshare(CLONE_NEWUSER)``, which leaves the effective uid as it is);
  ``unshare --kill-child`` gives the namespace's first process the same, and its death ends the namespace. The
  signal follows the *thread* that started the command: start it from the thread that owns the run.
- And a guard process (:func:`start_guard`) for every bound run: every process of the run carries its mark
  (:mod:`.marks`), and the guard, started in its own session without the mark, holds the read end of a pipe
  that only the owner writes to: when the owner dies by any means the pipe reads end-of-file and the guard
  ends every process with the mark, then exits. Without a namespace (Docker without CAP_SYS_ADMIN, hosts that
  restrict user namespaces) it is all there is. With one it closes a window the kernel leaves open: ``unshare``
  sets ``--kill-child``'s signal in its child after ``fork()`` and does not look whether its parent still lives,
  so an owner killed in that window leaves the namespace's first process an orphan (util-linux 2.38.1: 2 of 30
  owners killed at once after the start). Signals from outside reach a namespace's first process only as
  SIGKILL (it has no SIGTERM handler), which the guard's second round sends.
"""

import ctypes
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Stopped(BaseException):
    """The owner got a stop signal (a BaseException, like KeyboardInterrupt: nothing catches it by accident)."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


# held: how many ``hold_stop_signals`` blocks are open; pending: the signal that came while one was
_held = {"depth": 0, "pending": 0}


def _raise_stopped(signum, _frame):
    if _held["depth"]:
        _held["pending"] = _held["pending"] or signum
        return
    raise Stopped(signum)


class hold_stop_signals:
    """Within the block a stop signal is held, and raised as :class:`Stopped` when the outermost block ends.

    For a start: ``Popen`` raising half-way (in its wait for the child's ``exec``) would leave a child that
    runs with nobody holding its handle, so the caller's ending code would not know it (CI: a rehearse stopped
    the moment its converter's ``unshare`` had exec'd reported that pair as outliving the ending). Held, the
    signal is raised once the handle is stored, inside the caller's ``try``. ``keep=True``: the outermost
    block leaves it held, for :func:`raise_held` in the caller's ``try``. Outside the main thread: no effect."""

    def __init__(self, keep: bool = False):
        self.keep = keep
        self.active = False

    def __enter__(self):
        # only the main thread gets the signal (stop_signals_raise): a block elsewhere must not hold it from it
        self.active = threading_main()
        if self.active:
            _held["depth"] += 1
        return self

    def __exit__(self, *exc):
        if not self.active:
            return False
        _held["depth"] -= 1
        if _held["depth"] == 0:
            if exc[0] is not None:
                _held["pending"] = 0  # an error leaves the block: the caller's failure path ends the run already
            elif not self.keep:
                raise_held()
        return False


def raise_held() -> None:
    """Raise the stop signal held by :class:`hold_stop_signals`, if one came."""
    signum, _held["pending"] = _held["pending"], 0
    if signum:
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


def start_guard(mark):
    """The guard of a run without a namespace (``mark``: a :class:`.marks.Mark`): returns the pipe's write end
    (close it when the run is over; the guard then ends what still carries the mark, and exits)."""
    read_end, write_end = os.pipe()
    env = {k: v for k, v in os.environ.items() if k != mark.var}
    env["PYTHONNOUSERSITE"] = "1"
    subprocess.Popen([sys.executable, "-S", "-c", _GUARD, str(mark)], stdin=read_end, env=env, close_fds=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    os.close(read_end)
    os.set_inheritable(write_end, False)
    return write_end


# The guard itself: no site (-S), so not even verl-ascend's .pth runs in it. It waits for end-of-file on
# stdin, then ends the run's processes by the mark (argv[1], VAR=value) with the rounds of marks.end_marked.
_GUARD = """
import os, signal, sys, time
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, signal.SIG_IGN)
while os.read(0, 4096):
    pass
wanted = sys.argv[1].encode()
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
