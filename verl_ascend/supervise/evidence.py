"""What is saved at a failure, before anything is ended: where every process of the run is, and the logs' ends.

- each process's state and CPU time from ``/proc/PID/stat`` (R running, S sleeping, D in the kernel, T stopped);
- its Python stack, from ``py-spy dump --pid PID`` (what Ray's own ``ray stack`` runs); a stopped process is
  read with ``--nonblocking`` (memory only, no attach), and where py-spy cannot read a process at all (no
  ptrace rights: a container without CAP_SYS_PTRACE, ``kernel.yama.ptrace_scope`` above 0 for another
  user's process) the evidence says so and how to grant it;
- the newest lines of the attempt's console and of the Ray session's and CANN's logs written since it started;
- a summary naming the process(es) not where the others are: stopped, or outside the wait the others are in.

Only this host's processes are read; the other nodes' run the same module over ssh in a later change.
"""

import collections
import glob
import json
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

from verl_ascend.proc import info
from verl_ascend.proc.info import PTRACE_GRANT

TAIL_LINES = 200
OTHER_LOG_LINES = 60
MAX_OTHER_LOGS = 40
DUMP_TIMEOUT = 20.0
# the innermost frame of a process that waits for the others: a collective, a barrier, Ray's get on the ranks
WAITING = re.compile(r"all_?reduce|all_?gather|reduce_scatter|broadcast|barrier|all_?to_?all|\brecv\b|irecv|"
                     r"\bsend\b|synchronize|Work\.wait|\bget\b|get_objects|ray\.get", re.I)
# ... of a thread (or process) with nothing to do: an event loop, Ray's task loop, a pool waiting for work
IDLE = re.compile(r"main_loop|\bselect\b|\bpoll\b|epoll|\bsleep\b|Condition\.wait|Event\.wait|_worker \(|"
                  r"acquire|run_forever|_run_once|serve_forever|Thread\._bootstrap|_recv_msg|readline|accept|"
                  r"recv_multipart|_check_parent|Monitor\._run|LogMonitor\.run|Thread\.run \(threading", re.I)
PTRACE_FIX = "py-spy needs ptrace rights over the run's processes: run the supervisor as their user; " + PTRACE_GRANT


def proc_state(pid: int) -> dict:
    """{pid, ppid, name, state, cpu_s, start, cmd (its first 300 characters)}, or {pid, state: 'gone'}."""
    found = info.read(pid)
    if found is None:
        return {"pid": pid, "state": "gone"}
    return {**found, "cmd": found["cmd"][:300]}


def cpu_sample(pids) -> dict:
    """{pid: CPU seconds} of the processes still there (a sample of the timeline)."""
    out = {}
    for pid in pids:
        s = proc_state(pid)
        if "cpu_s" in s:
            out[pid] = s["cpu_s"]
    return out


def is_python(pid: int) -> bool:
    """Whether the process runs a Python interpreter (py-spy reads nothing else: unshare, raylet, gcs_server)."""
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("python")
    except OSError:
        return False


def dump(pid: int, state: str, tool: str) -> dict:
    """{pid, ok, text, error} for one process's stacks."""
    if not is_python(pid):
        return {"pid": pid, "ok": False, "text": "", "error": "not a Python process"}
    argv = [tool, "dump", "--pid", str(pid)] + (["--nonblocking"] if state == "T" else [])
    try:
        got = subprocess.run(argv, capture_output=True, text=True, timeout=DUMP_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"pid": pid, "ok": False, "text": "", "error": f"py-spy took over {DUMP_TIMEOUT:.0f} s"}
    text, err = got.stdout, got.stderr.strip()
    if got.returncode == 0 and text.strip():
        return {"pid": pid, "ok": True, "text": text, "error": ""}
    if re.search(r"Permission denied|Operation not permitted|EPERM|ptrace", err, re.I):
        scope = info.ptrace_scope()
        err = f"{err.splitlines()[-1] if err else 'denied'} (kernel.yama.ptrace_scope={scope}) — {PTRACE_FIX}"
    return {"pid": pid, "ok": False, "text": text, "error": err[-400:] or f"py-spy exited {got.returncode}"}


def _threads(stack_text: str) -> list:
    """py-spy's dump as a list of threads, each its frames innermost first."""
    threads = []
    for line in stack_text.splitlines():
        line = line.strip()
        if line.startswith("Thread "):
            threads.append([])
        elif threads and line and "(" in line:
            threads[-1].append(line)
    return threads


def top_frame(stack_text: str):
    """Where the process is: the innermost frame of its busiest thread (the one with the most frames that are
    not idle machinery: Ray runs an actor's tasks off the main thread, whose top is Ray's idle task loop), else
    of the first thread py-spy lists (the main thread)."""
    threads = [t for t in _threads(stack_text) if t]
    if not threads:
        return None
    busiest = max(threads, key=lambda t: (not IDLE.search(t[0]), sum(1 for f in t if not IDLE.search(f))))
    return busiest[0] if not IDLE.search(busiest[0]) else threads[0][0]


def odd_ones(processes: list) -> list:
    """Lines naming the processes not where the others are. Each process: {pid, name, state, top} (``top``: where
    it is, :func:`top_frame`, or None). A stopped process (T) is named first; then, when most processes that are
    not idle wait (a collective, a barrier, ray.get), those that wait, and those that do not."""
    out = []
    for p in processes:
        if p.get("state") == "T":
            out.append(f"pid {p['pid']} ({p['name']}) is STOPPED (state T)"
                       + (f", at {p['top']}" if p.get("top") else ""))
        elif p.get("state") == "D":
            out.append(f"pid {p['pid']} ({p['name']}) is in uninterruptible kernel sleep (state D: I/O or a driver)")
    stacked = [p for p in processes if p.get("top") and p.get("state") != "T" and not IDLE.search(p["top"])]
    waiting = [p for p in stacked if WAITING.search(p["top"])]
    if len(waiting) * 2 > len(stacked) >= 1 and waiting:
        frames = collections.Counter(p["top"].split(" (")[0] for p in waiting)
        out.append(f"{len(waiting)} of {len(stacked)} processes wait (" + ", ".join(f"{f} x{n}" for f, n in
                   frames.most_common(3)) + ")")
        out += [f"pid {p['pid']} ({p['name']}) waits in {p['top']}" for p in waiting[:8]]
        for p in stacked:
            if p not in waiting:
                out.append(f"pid {p['pid']} ({p['name']}) is elsewhere: {p['top']}")
    return out


def _tail(path: str, n: int) -> list:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - 256 * n))
            return fh.read().decode(errors="replace").splitlines()[-n:]
    except OSError:
        return []


def other_logs(since: float) -> list:
    """Ray session logs and CANN plogs written since ``since`` (epoch s), newest first."""
    patterns = ["/tmp/ray/session_latest/logs/*.out", "/tmp/ray/session_latest/logs/*.err",
                "/tmp/ray/session_latest/logs/*.log", os.path.expanduser("~/ascend/log/debug/plog/*.log")]
    found = []
    for pattern in patterns:
        for path in glob.glob(pattern):
            try:
                mtime = os.path.getmtime(path)
            except OSError:
                continue
            if mtime >= since:
                found.append((mtime, path))
    return [p for _, p in sorted(found, reverse=True)[:MAX_OTHER_LOGS]]


def gather(folder: str, pids, console: str, since: float) -> dict:
    """Save the evidence of the run's processes ``pids`` into ``folder``; returns {summary, stacks, pyspy}."""
    os.makedirs(os.path.join(folder, "stacks"), exist_ok=True)
    os.makedirs(os.path.join(folder, "logs"), exist_ok=True)
    states = [proc_state(pid) for pid in pids]
    tool = info.py_spy()
    dumps = {}
    if tool:
        with ThreadPoolExecutor(max_workers=4) as pool:
            for d in pool.map(lambda s: dump(s["pid"], s.get("state"), tool), [s for s in states if "cpu_s" in s]):
                dumps[d["pid"]] = d
    for s in states:
        d = dumps.get(s["pid"])
        s["top"] = top_frame(d["text"]) if d and d["ok"] else None
        s["stack"] = ("read" if d["ok"] else f"not read: {d['error']}") if d else "py-spy not installed"
        if d:
            with open(os.path.join(folder, "stacks", f"{s['pid']}.txt"), "w") as fh:
                fh.write(d["text"] if d["ok"] else f"py-spy could not read pid {s['pid']}: {d['error']}\n")
    with open(os.path.join(folder, "processes.json"), "w") as fh:
        json.dump(states, fh, indent=1)
    logs = [(console, TAIL_LINES)] + [(p, OTHER_LOG_LINES) for p in other_logs(since)]
    for i, (path, n) in enumerate(logs):
        with open(os.path.join(folder, "logs", f"{i:02d}-{os.path.basename(path)}.tail"), "w") as fh:
            fh.write(f"# last {n} lines of {path}\n" + "\n".join(_tail(path, n)) + "\n")
    summary = odd_ones(states)
    denied = [s["pid"] for s in states if s.get("stack", "").startswith("not read") and "ptrace" in s["stack"]]
    if not tool:
        summary.append("no stacks: py-spy is not installed (pip install 'verl-ascend[supervise]')")
    elif denied:
        summary.append(f"py-spy could not read {len(denied)} process(es): {PTRACE_FIX}")
    counts = collections.Counter(s.get("state") for s in states)
    summary.insert(0, f"{len(states)} process(es) of the run: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    with open(os.path.join(folder, "summary.txt"), "w") as fh:
        fh.write("\n".join(summary) + "\n")
    return {"summary": summary, "stacks": sum(1 for d in dumps.values() if d["ok"]), "pyspy": bool(tool),
            "processes": len(states)}
