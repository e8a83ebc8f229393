"""Run one main_ppo process for a rehearsal: its own Ray, live progress, nothing left behind.

main_ppo starts a local Ray cluster (``ray_kwargs.ray_init._temp_dir`` points it at a folder of
this run). Ray's daemons leave main_ppo's process group and rename themselves (``ray::WorkerDict``),
so neither a group kill nor a scan of command lines finds them all. The run therefore gets its own
PID namespace (util-linux ``unshare --pid --fork --kill-child --mount-proc``, with
``--user --map-root-user`` when not root): main_ppo is its first process, and when it ends — exits,
fails, times out, or ``unshare`` itself is killed by Ctrl-C or a watchdog — the kernel ends every
process in the namespace. Nothing is waited for. ``rehearse`` being stopped or killed ends the run
too (:mod:`.reaper`: a stop signal is turned into an exception that ends the run on the way out;
``unshare`` dies with its parent by the kernel's parent-death signal). Where the kernel refuses the
namespace, every process carrying the run's mark in its environment is ended instead, by ``rehearse``
or, if it was killed, by the run's guard process, and the run says so.
"""

import collections
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from verl_ascend.rehearse import reaper
from verl_ascend.rehearse.inloop import PREFIX
from verl_ascend.rehearse.reaper import MARK

EXIT_LINE = "verl-ascend rehearse: the trainer exited with code "  # diagnose.timeline knows it
STEP = re.compile(r"step:(\d+) - ")
# `Type: message`; a bare `Exception:` too (Ray raises one when its node does not start)
ERROR = re.compile(r"((?:[A-Za-z_][\w.]*\.)?(?:[A-Z]\w*)?(?:Error|Exception|Interrupt)(?:\([^)]*\))?): (.+)")
RAY_PREFIX = re.compile(r"^\s*(\x1b\[[0-9;]*m)*\([^)]*pid=\d+[^)]*\)(\x1b\[[0-9;]*m)*\s*")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
SHOWN = ("step:", "Resuming from", "Loaded model", "rollout_order:", "Error", "Traceback")
SAID = PREFIX  # what the loop's processes say about the plugin (inloop.py)
OWN_ERROR = SAID + " error: "  # the rehearsal's own verdict on a run it ended (cluster.py)
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


_ns_ok = []


def namespace_prefix() -> list:
    """The ``unshare`` command that gives main_ppo its own PID namespace here ([] where none can be had)."""
    if not _ns_ok:
        import shutil

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
        _ns_ok.append(cmd if works else [])
    return list(_ns_ok[0])


def namespace_of(pid: int, kind: str) -> str:
    """``kind:[inode]`` of the namespace of that kind (pid, mnt) a process lives in ('' when it is gone)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return ""


def pid_namespace(pid: int) -> str:
    return namespace_of(pid, "pid")


def _child_namespace(proc, stop: threading.Event) -> str:
    """The PID namespace unshare made for main_ppo, read from unshare itself.

    ``/proc/<unshare>/ns/pid_for_children`` names the new namespace once unshare has called
    ``unshare(CLONE_NEWPID)`` *and* forked the namespace's first process: in between (with ``--user`` that
    includes writing its uid map) the kernel has no reaper for it and the link reads ENOENT
    (fs/proc/namespaces.c, kernel/pid_namespace.c: pidns_for_children_get). So an unreadable link means
    "not yet" while unshare lives, and "gone" only once unshare has exited. Looking for the child instead
    missed a child that started and exited while this process was not scheduled (a loaded host).
    No deadline: the wait ends when the namespace appears, when unshare ends, or when ``stop`` is set
    (the run's watchdog, which ends unshare too)."""
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



def processes_in(namespace: str, mark: str) -> list:
    """Pids (as this process sees them) of every process in that PID namespace that carries the run's mark.

    A namespace's ``pid:[inode]`` is only a name while the namespace lives: the kernel hands a freed inode
    number to the next namespace made (another rehearsal, a ``check`` sandbox), so a process found under the
    number must also carry ``MARK=mark`` in its environment (Ray's workers inherit main_ppo's) to be ours.
    """
    return [pid for pid in reaper.marked(mark) if pid_namespace(pid) == namespace]


def end_all(proc, mark: str, grace: float = 10.0, namespaced: bool = False) -> list:
    """End the run; returns the pids of its processes still alive ([]: every one has ended).

    ``namespaced``: main_ppo runs as the first process of its own PID namespace, under unshare. Neither
    takes SIGTERM from here (the kernel drops it for a namespace's first process without a handler, and
    unshare --fork leaves it to its child; util-linux 2.38 measured), so only SIGKILL is sent: unshare's
    --kill-child then ends main_ppo, and with it the namespace. Without a namespace: the process group
    (SIGTERM, then SIGKILL), then every process that carries the run's mark, wherever it went (Ray's
    daemons leave the group and rename themselves; their environment keeps the mark)."""
    for sig in (signal.SIGKILL,) if namespaced else (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    return [] if namespaced else reaper.end_marked(mark, grace=min(grace, 5.0))


# Ray gives its local node a fixed 30 s to register with the GCS (ray/_private/node.py, Node.__init__; raised
# from 10 s in ray-project/ray#47087); on a saturated host (2 cores, load 6: this project's CI) one slow RPC to
# the just-started GCS outlasts it, and ray.init raises before the trainer ran anything.
RAY_START_TIMEOUT = "The current node timed out during startup"


def ray_did_not_start(code: int, steps: list, error: str) -> bool:
    """The run failed in ray.init's own start-up wait: nothing of the loop ran, so starting it again is safe."""
    return code != 0 and not steps and RAY_START_TIMEOUT in error


def run(argv: list, env: dict, cwd: str, log_path: Path, timeout: float, label: str, out=sys.stdout,
        said=None, namespace=None):
    """Run main_ppo; returns ``(exit code, step numbers seen, error line)``. Ctrl-C propagates after cleanup.

    ``said``, a list, receives the processes' own lines about the plugin (once each, pids left out).
    ``namespace``, a list, receives the run's PID namespace (``pid:[inode]``, '' for the fallback) and the
    mark its processes carry (see ``processes_in``).
    A run whose Ray did not start in Ray's fixed wait (``RAY_START_TIMEOUT``) is started once more, saying so;
    the first attempt's log is kept beside the log as ``<name>.ray-start-1``.
    """
    result = _run_once(argv, env, cwd, log_path, timeout, label, out, said, namespace)
    if ray_did_not_start(*result):
        kept = log_path.with_name(log_path.name + ".ray-start-1")
        log_path.replace(kept)
        print(f"  [{label}] Ray's local cluster did not start within Ray's fixed 30 s (a loaded host; "
              f"ray-project/ray#47087); starting {label} once more (first attempt's log: {kept})", file=out, flush=True)
        if namespace is not None:
            del namespace[:]
        result = _run_once(argv, env, cwd, log_path, timeout, label, out, said, namespace)
    return result


def _run_once(argv, env, cwd, log_path, timeout, label, out, said, namespace):
    steps, tail, earlier = [], collections.deque(maxlen=TAIL), []
    started = time.time()
    timed_out = threading.Event()
    prefix = namespace_prefix()
    namespaced = bool(prefix)  # how end_all may end the run (see there)
    if not prefix:
        print(f"  [{label}] no PID namespace here (unshare refused): the run's processes are ended by the mark in "
              f"their environment ({MARK}) instead, by a guard process if rehearse itself is killed", file=out,
              flush=True)
    mark = f"{label}-{os.getpid()}-{time.time_ns()}"
    env = {**env, MARK: mark}
    guard = None if namespaced else reaper.start_guard(mark)  # ends the run if this process is killed
    left_by_watchdog = []
    with open(log_path, "w") as log:
        # unshare (or main_ppo itself) gets SIGKILL when this thread dies: a killed rehearse takes the run with it
        proc = subprocess.Popen(prefix + argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True,
                                preexec_fn=reaper.die_with_parent(os.getpid()))

        def expire():  # a wrong Ray resource setting hangs silently: the watchdog ends it
            timed_out.set()
            left_by_watchdog.extend(end_all(proc, mark, namespaced=namespaced))

        watchdog = threading.Timer(timeout, expire)
        watchdog.daemon = True
        watchdog.start()
        ns = ""
        try:
            if prefix:
                ns = _child_namespace(proc, timed_out)
            if namespace is not None:
                namespace.extend([ns, mark])
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
                    if said is not None and line_said not in said:
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
        except BaseException:  # Ctrl-C, a stop signal (reaper.Stopped), an error here: the run ends with us
            watchdog.cancel()
            end_all(proc, mark, namespaced=namespaced)
            raise
        finally:
            if guard is not None:
                os.close(guard)  # the guard ends whatever still carries the mark, then exits
        watchdog.cancel()
    leftover = end_all(proc, mark, namespaced=namespaced)
    if ns:
        # unshare returned after reaping its child, the namespace's first process; Linux does not let that
        # process finish exiting before every other process of the namespace has (zap_pid_ns_processes), so
        # this scan finds none by construction: it checks the construction, it does not wait for it
        leftover = sorted(set(leftover) | set(processes_in(ns, mark)))
    if timed_out.is_set():
        alive = sorted(set(leftover) | (set(left_by_watchdog) & set(reaper.marked(mark))))
        ended = (f"processes {alive} of the run are still alive" if alive else "every process of the run was ended")
        return 124, steps, f"main_ppo did not finish within {timeout:.0f} s ({ended})"
    error = first_error(tail, earlier) if code != 0 else ""
    if code != 0 and not error:
        error = "its output names no error; its last lines:\n" + last_lines(tail)
    if leftover:
        error = (error + "; " if error else "") + f"processes {leftover} of this run did not end"
    return code, steps, error
