"""Start a command as a run, end exactly its processes, and say what is left only after looking.

``Run(argv, env, cwd, mark).start()`` starts the command with the mark in its environment (:mod:`.marks`),
as the first process of its own PID namespace where the host allows one (:mod:`.namespace`), with the
parent-death signal, and with a guard process (:mod:`.guard`) that ends it if its owner dies. ``end()`` ends
it and returns the pids that survived, read from ``/proc`` after the ending: a caller prints "nothing of it
is left running" only when that list is empty, and names the survivors otherwise.
"""

import os
import signal
import subprocess
import threading

from . import guard, namespace
from .marks import Mark, end_marked, marked


class Run:
    """One command and every process it starts. Start it from the thread that owns the run (the parent-death
    signal follows that thread)."""

    def __init__(self, argv: list, env: dict, cwd: str, mark: Mark, use_namespace: bool = True, bound: bool = True):
        """``bound``: the run ends when its owner ends (parent-death signal, and the guard).
        ``bound=False`` is for an owner that may itself be restarted and take the run up again (``supervise``): the
        run then outlives it, and is still found and ended by its mark."""
        self.argv, self.cwd, self.mark, self.bound = list(argv), cwd, mark, bound
        self.env = {**env, **mark.env()}
        self.prefix = namespace.prefix() if use_namespace else []
        self.proc = None
        self.namespace = ""  # pid:[inode] of the run's namespace once it exists ('' without one)
        self._guard = None
        self._stop = threading.Event()

    @property
    def namespaced(self) -> bool:
        return bool(self.prefix)

    def start(self, stdout=subprocess.PIPE, text: bool = True):
        """Start the command; its output goes to ``stdout`` (a pipe to read, or a file), stderr with it. A stop
        signal that comes meanwhile is raised (:class:`.guard.Stopped`) once ``self.proc`` holds the child: call
        it inside the ``try`` whose handler ends the run."""
        if self.bound:
            # ends the run if the owner is killed. Without a namespace nothing else would; with one, unshare's
            # --kill-child is set by its child after fork(): an owner killed in between (measured: 2 of 30 owners
            # killed right after start) leaves that child, the namespace's first process, running as an orphan
            self._guard = guard.start_guard(self.mark)
        with guard.hold_stop_signals():  # a stop signal comes out of here only once self.proc holds the child
            self.proc = subprocess.Popen(self.prefix + self.argv, cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL,
                                         stdout=stdout, stderr=subprocess.STDOUT, text=text,
                                         errors="replace" if text else None, start_new_session=True,
                                         preexec_fn=guard.die_with_parent(os.getpid()) if self.bound else None)
        return self.proc

    def wait_namespace(self) -> str:
        """The run's PID namespace (waits until unshare made it; '' without one, or when the run ended first)."""
        if self.namespaced and not self.namespace:
            self.namespace = namespace.child_namespace(self.proc, self._stop)
        return self.namespace

    def pids(self) -> list:
        """The run's processes now (every process that carries its mark, wherever it went)."""
        return marked(self.mark)

    def end(self, grace: float = 10.0, patience: float = 60.0) -> list:
        """End the run; returns the pids of its processes still alive after it looked ([]: all have ended).

        In a namespace neither unshare nor the namespace's first process takes SIGTERM from here (the kernel drops
        it for a namespace's first process without a handler, and unshare --fork leaves it to its child;
        util-linux 2.38 measured), so only SIGKILL is sent: unshare's --kill-child ends the first process, and with
        it the namespace. Without one: the process group (SIGTERM, then SIGKILL). Either way every process that
        still carries the mark is then ended (Ray's daemons leave the group; a process that left the namespace
        would too), and the list returned is what a last scan found."""
        self._stop.set()
        if self.proc is not None:
            for sig in (signal.SIGKILL,) if self.namespaced else (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
        return end_marked(self.mark, grace=min(grace, 5.0), patience=patience)

    def release_guard(self) -> None:
        """The run is over (or ended): the guard ends whatever still carries the mark, then exits."""
        if self._guard is not None:
            os.close(self._guard)
            self._guard = None


def note_survivors(exc: BaseException, pids: list) -> None:
    """Attach what outlived an ending to the exception that caused it (the owner's stop path reads it)."""
    try:
        exc.survivors = sorted(set(getattr(exc, "survivors", [])) | set(pids))
    except AttributeError:
        pass


def call(argv: list, env: dict, cwd: str, mark: Mark, timeout: float) -> subprocess.CompletedProcess:
    """Run a short step of a run (a conversion, a check) as a run of its own: marked, namespaced, guarded.

    Returns its exit code and output (stderr in stdout). On a timeout or an exception here (a stop signal), the
    step is ended first; the exception carries ``survivors`` (pids) when any outlived that."""
    run = Run(argv, env, cwd, mark)
    try:  # the start too: a stop signal that came while it started is raised once the run holds its child
        proc = run.start()
        out, _ = proc.communicate(timeout=timeout)
    except BaseException as exc:
        note_survivors(exc, run.end())
        raise
    finally:
        run.release_guard()
    left = run.end()
    if left:
        out += f"\n(processes {', '.join(map(str, left))} of this step outlived it)\n"
    return subprocess.CompletedProcess(argv, proc.returncode if not left else proc.returncode or 1, out, "")
