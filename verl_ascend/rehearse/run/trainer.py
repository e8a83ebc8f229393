"""Run one main_ppo process for a rehearsal: its own Ray, live progress, nothing left behind.

main_ppo starts a local Ray cluster (``ray_kwargs.ray_init._temp_dir`` points it at a folder of this run), or
the rehearsal's Ray cluster of ``--nnodes`` (:mod:`.cluster`) with main_ppo inside. The processes are the
process layer's (:mod:`verl_ascend.proc`): main_ppo is the first process of the run's own PID namespace, so the
kernel ends every process of the run when it ends — exits, fails, times out, or ``rehearse`` itself is stopped
or killed; where the kernel refuses the namespace, every process carrying the run's mark is ended instead, by
``rehearse`` or, if it was killed, by the run's guard process. Either way what is left is looked for after the
ending, and a survivor is named as the run's error. This module reads main_ppo's output: progress shown live,
the error that ended the run named as ``Type: message``.
"""

import collections
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from verl_ascend.core import runlog
from verl_ascend.proc import launch, marks
from verl_ascend.proc import namespace as pidns
from verl_ascend.proc.launch import Run

MARK = runlog.REHEARSE_MARK  # the variable each process of a rehearsal's run carries, with the run's own value
EXIT_LINE = runlog.EXIT_LINE  # the run's own last word in its log (diagnose.timeline reads it)
STEP = re.compile(r"step:(\d+) - ")
# `Type: message`; a bare `Exception:` too (Ray raises one when its node does not start)
ERROR = re.compile(r"((?:[A-Za-z_][\w.]*\.)?(?:[A-Z]\w*)?(?:Error|Exception|Interrupt)(?:\([^)]*\))?): (.+)")
RAY_PREFIX = re.compile(r"^\s*(\x1b\[[0-9;]*m)*\([^)]*pid=\d+[^)]*\)(\x1b\[[0-9;]*m)*\s*")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
SHOWN = ("step:", "Resuming from", "Loaded model", "rollout_order:", "Error", "Traceback")
SAID = runlog.PREFIX  # what the loop's processes say about the plugin (loop/report.py)
OWN_ERROR = runlog.OWN_ERROR  # the rehearsal's own verdict on a run it ended (cluster.py)
PID = re.compile(r" ?\(pid \d+\)")
TAIL = 400  # lines of the end of main_ppo's output kept for naming its error


def clean(line: str) -> str:
    return ANSI.sub("", RAY_PREFIX.sub("", line)).rstrip()


# Exceptions that carry another one inside (torch DCP gathers each rank's error into one, Hydra wraps
# the target's): the error inside is the one to name.
WRAPPERS = ("CheckpointException", "InstantiationException")


RAY_WRAPPERS = ("ray.exceptions.", "RayTaskError", "ActorDiedError")


# Hydra prints the error a config target raised as its repr on a line of its own, after "Error in call to
# target '...':" (hydra/_internal/instantiate/_instantiate2.py): OSError("Repo id must be ...")
REPR = re.compile(r"^([A-Z]\w*(?:Error|Exception))\((['\"])(.+)\2\)$")


def error_line(line: str, ray_too: bool = False) -> str:
    """The line as ``Type: message`` when it names an error raised in the run ('' otherwise).

    Ray's wrappers (``RayTaskError(KeyError)``, ``ActorDiedError``) count only with ``ray_too``: the error
    they carry is printed on a line of its own, except where the actor's process died (killed, crashed)."""
    text = clean(line).strip()
    if ERROR.match(text) and (ray_too or not text.startswith(RAY_WRAPPERS)):
        return text[:400]
    shown = REPR.match(text)
    if shown:
        return f"{shown.group(1)}: {shown.group(3)}"[:400]
    return ""


def last_lines(lines, count: int = 15) -> str:
    """The last ``count`` non-blank lines, indented (what a run that exited without naming its error printed)."""
    kept = [text for text in map(clean, lines) if text.strip()][-count:]
    return "\n".join(f"    {text[:300]}" for text in kept) if kept else "    (nothing)"


def first_error(lines, earlier=()) -> str:
    """The error that ended the run, as ``Type: message`` (the innermost raise, not Ray's or torch's wrapper).

    ``lines`` is the end of the output; ``earlier``, the error lines seen before it, is read only when the end
    names none (a worker's traceback can arrive well before the driver's last few hundred lines).
    """
    own = [clean(line).split(OWN_ERROR, 1)[1] for line in lines if OWN_ERROR in line]
    if own:  # the rehearsal's own verdict on the run (a planted fault, cluster.py): it names what the run cannot
        return own[-1][:600]
    found = [text for text in map(error_line, lines) if text] or [text for text in earlier if text]
    if not found:  # an actor whose process died has only Ray's word for it
        found = [text for text in (error_line(line, ray_too=True) for line in lines) if text]
    if not found:
        return ""
    inner = [f for f in found if not any(w in f.split(":", 1)[0] for w in WRAPPERS)]
    if inner and inner[0] != found[0]:
        return f"{inner[0]} (inside {found[0].split(':', 1)[0]})"
    return found[0]


def _short_step(text: str) -> str:
    keep = ("step", "critic/score/mean", "actor/pg_loss", "actor/grad_norm", "actor/kl_loss",
            "training/rollout_probs_diff_max", "timing_s/step")
    parts = [p for p in text.split(" - ") if p.split(":", 1)[0] in keep]
    return " - ".join(parts) if parts else text[:200]


def namespace_prefix() -> list:
    """The ``unshare`` command that gives main_ppo its own PID namespace here ([] where none can be had)."""
    return pidns.prefix()


def mark_of(value: str) -> marks.Mark:
    return marks.Mark(MARK, value)


def processes_in(space: str, mark: str) -> list:
    """Pids of the processes in PID namespace ``space`` that carry this rehearsal run's mark value ``mark``."""
    return pidns.processes_in(space, mark_of(mark))


pid_namespace = pidns.pid_namespace
_ID = []


def rehearsal_id() -> str:
    """This rehearsal's id: the first part of every mark it gives (each run and step adds its label)."""
    if not _ID:
        _ID.append(f"rh{os.getpid()}-{time.time_ns()}")
    return _ID[0]


def left_running() -> list:
    """Every process of this rehearsal still alive, wherever it is (a look at /proc, not an assumption)."""
    return marks.carrying(MARK, rehearsal_id() + "-")


def step(argv: list, label: str, timeout: float, env=None, cwd=None) -> subprocess.CompletedProcess:
    """A step of the rehearsal outside main_ppo (the conversion, a node's ckpt check, ckpt sync) under the same
    guarantee as a run: its own mark and namespace, ended with rehearse (stopped or killed)."""
    return launch.call(argv, dict(os.environ) if env is None else env, cwd or os.getcwd(),
                       mark_of(f"{rehearsal_id()}-{label}-{time.time_ns()}"), timeout)


# Ray gives its local node a fixed 30 s to register with the GCS (ray/_private/node.py, Node.__init__; raised
# from 10 s in ray-project/ray#47087); on a saturated host (2 cores, load 6: this project's CI) one slow RPC to
# the just-started GCS outlasts it, and ray.init raises before the trainer ran anything.
RAY_START_TIMEOUT = "The current node timed out during startup"


def ray_did_not_start(code: int, steps: list, error: str) -> bool:
    """The run failed in ray.init's own start-up wait: nothing of the loop ran, so starting it again is safe."""
    return code != 0 and not steps and RAY_START_TIMEOUT in error


def run(argv: list, env: dict, cwd: str, log_path: Path, timeout: float, label: str, out=sys.stdout,
        said=None, namespace=None, left=None):
    """Run main_ppo; returns ``(exit code, step numbers seen, error line)``. Ctrl-C propagates after cleanup.

    ``said``, a list, receives the processes' own lines about the plugin (once each, pids left out).
    ``namespace``, a list, receives the run's PID namespace (``pid:[inode]``, '' for the fallback) and the
    mark its processes carry (see ``processes_in``); ``left``, a list, once the run ended, the pids a look at
    ``/proc`` found still alive (a claim that nothing is left is made from it).
    A run whose Ray did not start in Ray's fixed wait (``RAY_START_TIMEOUT``) is started once more, saying so;
    the first attempt's log is kept beside the log as ``<name>.ray-start-1``.
    """
    result = _run_once(argv, env, cwd, log_path, timeout, label, out, said, namespace, left)
    if ray_did_not_start(*result):
        kept = log_path.with_name(log_path.name + ".ray-start-1")
        log_path.replace(kept)
        print(f"  [{label}] Ray's local cluster did not start within Ray's fixed 30 s (a loaded host; "
              f"ray-project/ray#47087); starting {label} once more (first attempt's log: {kept})", file=out, flush=True)
        if namespace is not None:
            del namespace[:]
        if left is not None:
            del left[:]
        result = _run_once(argv, env, cwd, log_path, timeout, label, out, said, namespace, left)
    return result


def _run_once(argv, env, cwd, log_path, timeout, label, out, said, namespace_out, left):
    steps, tail, earlier = [], collections.deque(maxlen=TAIL), []
    started = time.time()
    timed_out = threading.Event()
    run_ = Run(argv, env, cwd, mark_of(f"{rehearsal_id()}-{label}-{time.time_ns()}"))
    if not run_.namespaced:
        print(f"  [{label}] no PID namespace here (unshare refused): the run's processes are ended by the mark in "
              f"their environment ({MARK}) instead, by a guard process if rehearse itself is killed", file=out,
              flush=True)
    left_by_watchdog = []

    def expire():  # a wrong Ray resource setting hangs silently: the watchdog ends it
        timed_out.set()
        left_by_watchdog.extend(run_.end())

    watchdog = threading.Timer(timeout, expire)
    watchdog.daemon = True
    with open(log_path, "w") as log:
        try:
            # unshare (or main_ppo itself) gets SIGKILL when this thread dies: a killed rehearse takes the run with
            # it; a stopped one raises here at the earliest once the run holds its child (proc.launch.Run.start)
            proc = run_.start()
            watchdog.start()
            ns = run_.wait_namespace()
            if namespace_out is not None:
                namespace_out.extend([ns, run_.mark.value])
            for line in proc.stdout:
                log.write(line)
                log.flush()
                text = clean(line)
                if len(tail) == TAIL and len(earlier) < 200:  # the oldest line is about to leave the tail
                    dropped = error_line(tail[0])
                    if dropped:
                        earlier.append(dropped)
                tail.append(line)
                match = STEP.search(text)
                if match:
                    steps.append(int(match.group(1)))
                    print(f"  [{label} {time.time() - started:4.0f}s] {_short_step(text[match.start():])}", file=out,
                          flush=True)
                elif SAID in text:
                    line_said = PID.sub("", text[text.index(SAID) + len(SAID):]).strip()
                    if said is not None and line_said not in said and not line_said.startswith(runlog.WEIGHTS):
                        said.append(line_said)
                        print(f"  [{label} {time.time() - started:4.0f}s] {line_said[:300]}", file=out, flush=True)
                elif any(word in text for word in SHOWN[1:4]):
                    print(f"  [{label} {time.time() - started:4.0f}s] {text.strip()[:200]}", file=out, flush=True)
            code = proc.wait()
            # the run's own last word in its log: Ray forwards a worker's last prints asynchronously and may drop
            # them when the driver exits (a resumed run's "Final validation metrics" went missing so), so the
            # exit code is what tells diagnose a run ended cleanly (diagnose.timeline.END) or did not (TERMINAL)
            log.write(f"{EXIT_LINE}{code} ({label})\n")
            log.flush()
        except BaseException as exc:  # Ctrl-C, a stop signal (proc.guard.Stopped), an error here: the run ends with us
            watchdog.cancel()
            launch.note_survivors(exc, run_.end())  # the owner's stop path names them
            raise
        finally:
            run_.release_guard()
        watchdog.cancel()
    # a look, not an assumption: in the namespace, Linux does not let its first process finish exiting before
    # every other process of it has (zap_pid_ns_processes), so this finds none by construction; it checks that
    leftover = run_.end()
    if left is not None:
        left.extend(leftover)
    if timed_out.is_set():
        alive = sorted(set(leftover) | (set(left_by_watchdog) & set(run_.pids())))
        ended = (f"processes {marks.describe(alive)} of the run are still alive" if alive
                 else "every process of the run was ended")
        return 124, steps, f"main_ppo did not finish within {timeout:.0f} s ({ended})"
    error = first_error(tail, earlier) if code != 0 else ""
    if code != 0 and not error:
        error = "its output names no error; its last lines:\n" + last_lines(tail)
    if leftover:
        error = (error + "; " if error else "") + f"processes {marks.describe(leftover)} of this run did not end"
    return code, steps, error

