"""An attempt's processes as the loop sees them: one this supervisor started, or one a supervisor before it started.

Unbound (the CLI's default) an attempt outlives its supervisor: ``proc.launch.Run(bound=False)`` gives it no
parent-death signal and no guard, so a supervisor that is killed, or whose terminal closes, leaves the run
training; a supervisor started again on the same run folder finds it by its pid, the pid's start time and its
mark (``report.json``) and watches it (:class:`Attached`) instead of starting a second one. Its exit code, which
only a parent can wait for, is written by a wrapper shell into ``attempt-N/exit_code`` as the command ends.
Bound (``rehearse --supervise``: a rehearsal leaves nothing behind) the attempt ends with its supervisor.
"""

import os

from verl_ascend.proc import launch as proc_launch
from verl_ascend.proc import marks

EXIT_FILE = "exit_code"
# the command's exit code into $0 (the attempt's exit_code file), written whole, then the same exit
_WRAP = '"$@"; code=$?; echo "$code" > "$0.tmp" && mv "$0.tmp" "$0"; exit "$code"'
UNKNOWN_EXIT = 137  # no exit_code file and nothing left: the wrapper itself was killed (SIGKILL's 128 + 9)


def wrapped(argv: list, folder: str) -> list:
    return ["sh", "-c", _WRAP, os.path.join(folder, EXIT_FILE)] + list(argv)


def exit_code(folder: str):
    try:
        text = open(os.path.join(folder, EXIT_FILE)).read().strip()
    except OSError:
        return None
    return int(text) if text.lstrip("-").isdigit() else None


class Started:
    """An attempt this supervisor started (``proc.launch.Run``), behind the handle the loop watches."""

    def __init__(self, run: proc_launch.Run):
        self.run, self.mark, self.pid = run, run.mark, run.proc.pid

    def poll(self):
        return self.run.proc.poll()

    def pids(self):
        return self.run.pids()

    def end(self):
        survivors = self.run.end()
        self.run.release_guard()
        return survivors


class Attached:
    """An attempt a previous supervisor started that still lives: watched through its marked processes; its exit
    code read from the file its wrapper writes."""

    def __init__(self, mark: str, pid: int, folder: str):
        var, _, value = mark.partition("=")
        self.mark, self.pid, self.folder = marks.Mark(var, value), pid, folder

    def poll(self):
        if marks.marked(self.mark):
            return None
        code = exit_code(self.folder)
        return UNKNOWN_EXIT if code is None else code

    def pids(self):
        return marks.marked(self.mark)

    def end(self):
        return marks.end_marked(self.mark)
