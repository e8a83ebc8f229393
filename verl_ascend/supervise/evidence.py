"""What is saved at a failure, before anything is ended: where every process of the run is, and the logs' ends.

- each process's state and CPU time from ``/proc/PID/stat`` (R running, S sleeping, D in the kernel, T stopped);
- its Python stack, from ``py-spy dump --pid PID`` (what Ray's own ``ray stack`` runs); a stopped process is
  read with ``--nonblocking`` (memory only, no attach), and where py-spy cannot read a process at all (no
  ptrace rights: a container without CAP_SYS_PTRACE, ``kernel.yama.ptrace_scope`` above 0 for another
  user's process) the evidence says so and how to grant it;
- the newest lines of the attempt's console and of the Ray session's and CANN's logs written since it started;
- a summary naming the process(es) not where the others are: stopped, or outside the wait the others are in.

With ``--nodes`` the other nodes run this module over the ssh command of ``--ssh`` (:mod:`.evidence_nodes`:
``python -m verl_ascend.supervise.evidence --mark VAR=value`` prints one JSON line) and the summary's odd ones are
taken over the processes of every node. Each host reads its own ``/proc``; only a multi-node rehearsal, whose nodes
share this machine's, tells them apart by ``runlog.NODE_VAR`` (:func:`on_this_node`).
"""

import collections
import glob
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from verl_ascend.core import runlog
from verl_ascend.proc import info
from verl_ascend.proc.info import PTRACE_GRANT

TAIL_LINES = 200
OTHER_LOG_LINES = 60
MAX_OTHER_LOGS = 40
DUMP_TIMEOUT = 20.0
DUMP_BUDGET = 90.0   # s for all of a host's py-spy dumps: a process not read by then is said so (remote calls are bounded)
CPU_SAMPLE = 1.0     # s between the two reads of each process's CPU time (cpu_rate: cores it used meanwhile)
BUSY = 0.5           # cores: a process using this much is "still burning CPU"
# the innermost frame of a process that waits for the others: a collective, a barrier, Ray's get on the ranks
WAITING = re.compile(r"all_?reduce|all_?gather|reduce_scatter|broadcast|barrier|all_?to_?all|\brecv\b|irecv|"
                     r"\bsend\b|synchronize|Work\.wait|\bget\b|get_objects|ray\.get", re.I)
# ... of a thread (or process) with nothing to do: an event loop, Ray's task loop, a pool waiting for work
IDLE = re.compile(r"main_loop|\bselect\b|\bpoll\b|epoll|\bsleep\b|Condition\.wait|Event\.wait|_worker \(|"
                  r"acquire|run_forever|_run_once|serve_forever|Thread\._bootstrap|_recv_msg|readline|accept|"
                  r"recv_multipart|_check_parent|Monitor\._run|LogMonitor\.run|Thread\.run \(threading|"
                  # a node's daemons: `ray start --block`'s loop, Ray client's server, multiprocessing's helpers; the
                  # rehearsal's launcher relaying the driver's output
                  r"ray/scripts/scripts\.py|client/server/server\.py|resource_tracker\.py|Connection\._recv|"
                  r"rehearse/run/cluster\.py", re.I)
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


def dump(pid: int, state: str, tool: str, timeout: float = DUMP_TIMEOUT) -> dict:
    """{pid, ok, text, error} for one process's stacks."""
    if not is_python(pid):
        return {"pid": pid, "ok": False, "text": "", "error": "not a Python process"}
    if timeout <= 0:
        return {"pid": pid, "ok": False, "text": "", "error": f"not read: the {DUMP_BUDGET:.0f} s for all dumps ran out"}
    argv = [tool, "dump", "--pid", str(pid)] + (["--nonblocking"] if state == "T" else [])
    try:
        got = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"pid": pid, "ok": False, "text": "", "error": f"py-spy took over {timeout:.0f} s"}
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
            out.append(f"{who(p)} is STOPPED (state T)" + (f", at {p['top']}" if p.get("top") else ""))
        elif p.get("state") == "D":
            out.append(f"{who(p)} is in uninterruptible kernel sleep (state D: I/O or a driver)")
    stacked = [p for p in processes if p.get("top") and p.get("state") != "T" and not IDLE.search(p["top"])]
    waiting = [p for p in stacked if WAITING.search(p["top"])]
    if len(waiting) * 2 > len(stacked) >= 1 and waiting:
        frames = collections.Counter(p["top"].split(" (")[0] for p in waiting)
        out.append(f"{len(waiting)} of {len(stacked)} processes wait (" + ", ".join(f"{f} x{n}" for f, n in
                   frames.most_common(3)) + ")")
        out += [f"{who(p)} waits in {p['top']}" for p in waiting[:8]]
        for p in stacked:
            if p not in waiting:
                out.append(f"{who(p)} is elsewhere: {p['top']}")
    return out


def who(p: dict) -> str:
    """``pid N (name)``, with ``on NODE`` for a process of another node (its ``node`` key)."""
    return f"pid {p['pid']}" + (f" on {p['node']}" if p.get("node") else "") + f" ({p['name']})"


def busy(processes: list) -> list:
    """Lines naming the processes still burning CPU (``cpu_rate`` >= :data:`BUSY` cores), busiest first."""
    hot = sorted((p for p in processes if (p.get("cpu_rate") or 0) >= BUSY), key=lambda p: -p["cpu_rate"])
    return [f"{who(p)} uses {p['cpu_rate']:.2f} core" + (f", at {p['top']}" if p.get("top") else "") for p in hot[:8]]


def node_tag(pid: int) -> str:
    """The process's :data:`runlog.NODE_VAR` ('' without it: every process of a real cluster, a rehearsal's head)."""
    try:
        environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    except OSError:
        return ""
    wanted = runlog.NODE_VAR.encode() + b"="
    return next((item[len(wanted):].decode(errors="replace") for item in environ if item.startswith(wanted)), "")


def on_this_node(pids) -> list:
    """The pids that run on this node. On a cluster that is every pid this host's ``/proc`` shows. A multi-node
    rehearsal puts its nodes on one host, so there each node's processes carry :data:`runlog.NODE_VAR` (the node's
    ``ray start`` had it; what the rehearsal's ssh runs in node k's view has it too) and a process belongs to the node
    whose value it carries, as this one does."""
    own = os.environ.get(runlog.NODE_VAR, "")
    return [pid for pid in pids if node_tag(pid) == own]


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


def collect_cpu(pids, sample: float = CPU_SAMPLE) -> list:
    """Each process's :func:`proc_state` with ``cpu_rate``: the cores it used over ``sample`` s (absent for a process
    gone or replaced meanwhile)."""
    states = [proc_state(pid) for pid in pids]
    if sample and any("cpu_s" in s for s in states):
        time.sleep(sample)
        for s in states:
            again = info.read(s["pid"]) if "cpu_s" in s else None
            if again and again["start"] == s["start"]:
                s["cpu_rate"] = round((again["cpu_s"] - s["cpu_s"]) / sample, 2)
    return states


def collect(pids, budget: float = DUMP_BUDGET, sample: float = CPU_SAMPLE) -> tuple:
    """(states, py-spy's path or None): :func:`collect_cpu`'s states with ``top`` (where it is, or None), ``stack``
    ('read', 'not read: why', 'py-spy not installed') and ``text`` (the dump, or why there is none). Every dump ends
    within ``budget`` s."""
    states = collect_cpu(pids, sample)
    tool = info.py_spy()
    dumps, end = {}, time.monotonic() + budget
    if tool:
        with ThreadPoolExecutor(max_workers=4) as pool:
            for d in pool.map(lambda s: dump(s["pid"], s.get("state"), tool, min(DUMP_TIMEOUT, end - time.monotonic())),
                              [s for s in states if "cpu_s" in s]):
                dumps[d["pid"]] = d
    for s in states:
        d = dumps.get(s["pid"])
        s["top"] = top_frame(d["text"]) if d and d["ok"] else None
        s["stack"] = ("read" if d["ok"] else f"not read: {d['error']}") if d else "py-spy not installed"
        if d:
            s["text"] = d["text"] if d["ok"] else f"py-spy could not read pid {s['pid']}: {d['error']}\n"
    return states, tool


def write_node(folder: str, states: list, logs: list) -> None:
    """One node's evidence into ``folder``: ``processes.json`` (no stack text), ``stacks/PID.txt``, ``logs/*.tail``
    (``logs``: [(path, lines)])."""
    os.makedirs(os.path.join(folder, "stacks"), exist_ok=True)
    os.makedirs(os.path.join(folder, "logs"), exist_ok=True)
    for s in states:
        if "text" in s:
            with open(os.path.join(folder, "stacks", f"{s['pid']}.txt"), "w") as fh:
                fh.write(s["text"])
    with open(os.path.join(folder, "processes.json"), "w") as fh:
        json.dump([{k: v for k, v in s.items() if k != "text"} for s in states], fh, indent=1)
    for i, (path, lines) in enumerate(logs):
        with open(os.path.join(folder, "logs", f"{i:02d}-{os.path.basename(path)}.tail"), "w") as fh:
            fh.write(f"# last {len(lines)} lines of {path}\n" + "\n".join(lines) + "\n")


def counts(states: list, tool) -> list:
    """The summary's lines on one node's processes: how many, in which state, and why stacks are missing."""
    out = [f"{len(states)} process(es) of the run: " + ", ".join(f"{n} {k}" for k, n in sorted(
        collections.Counter(s.get("state") for s in states).items()))]
    denied = [s["pid"] for s in states if s.get("stack", "").startswith("not read") and "ptrace" in s["stack"]]
    if not tool:
        out.append("no stacks: py-spy is not installed (pip install 'verl-ascend[supervise]')")
    elif denied:
        out.append(f"py-spy could not read {len(denied)} process(es): {PTRACE_FIX}")
    return out


def gather(folder: str, pids, console: str, since: float, options=None, mark: str = "") -> dict:
    """Save the evidence of the run's processes ``pids`` on this host into ``folder`` and, with ``options.nodes``
    (head first) and the attempt's ``mark``, of each other node's into ``folder/nodes/NODE/``; returns {summary,
    stacks, pyspy, processes, nodes}."""
    from . import evidence_nodes

    remote = evidence_nodes.start(options, mark, since) if options is not None and len(options.nodes) > 1 and mark \
        else None
    states, tool = collect(on_this_node(pids))
    logs = [(console, TAIL_LINES)] + [(p, OTHER_LOG_LINES) for p in other_logs(since)]
    write_node(folder, states, [(path, _tail(path, n)) for path, n in logs])
    found = evidence_nodes.finish(remote) if remote else {}
    for node, got in found.items():
        where = os.path.join(folder, "nodes", node.replace("/", "_"))
        os.makedirs(where, exist_ok=True)
        if "error" in got:
            with open(os.path.join(where, "unreachable.txt"), "w") as fh:
                fh.write(got["error"] + "\n")
            continue
        write_node(where, got["processes"], [(lg["path"], lg["lines"]) for lg in got.get("logs", ())])
        with open(os.path.join(where, "node.json"), "w") as fh:
            json.dump({k: v for k, v in got.items() if k not in ("processes", "logs")}, fh, indent=1)
    summary = counts(states, tool)
    everyone = list(states)
    if found:
        summary = [f"{options.nodes[0]} (this host): {line}" for line in summary]
        for node, got in found.items():
            if "error" in got:
                summary.append(f"{node}: not reached: {got['error']}")
                continue
            summary += [f"{node}: {line}" for line in counts(got["processes"], got.get("pyspy"))]
            everyone += [{**p, "node": node} for p in got["processes"]]
    summary += odd_ones(everyone) + busy(everyone)
    with open(os.path.join(folder, "summary.txt"), "w") as fh:
        fh.write("\n".join(summary) + "\n")
    return {"summary": summary, "stacks": sum(1 for s in everyone if s.get("stack") == "read"), "pyspy": bool(tool),
            "processes": len(everyone), "nodes": {n: g.get("error") or f"{len(g['processes'])} process(es)"
                                                  for n, g in found.items()}}


def main(argv=None) -> int:
    """``python -m verl_ascend.supervise.evidence --mark VAR=value [--since EPOCH] [--budget S]``: this node's part of
    the evidence as one JSON line {host, node, pyspy, ptrace_scope, processes (each with its stack text), logs};
    what ``supervise`` runs on the other nodes over ssh. Exit 0, or 2 on bad input."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m verl_ascend.supervise.evidence")
    p.add_argument("--mark", required=True, help="VAR=value: the run's mark (its processes carry it)")
    p.add_argument("--since", type=float, default=time.time() - 3600, help="logs written since (epoch s)")
    p.add_argument("--budget", type=float, default=DUMP_BUDGET, help="s for all py-spy dumps")
    p.add_argument("--cpu-only", action="store_true",
                   help="only each process's state and CPU rate over --sample s: no stacks, no logs (what supervise "
                        "asks the other nodes before it calls a hang)")
    p.add_argument("--sample", type=float, default=CPU_SAMPLE, help="s between the two reads of each process's CPU time")
    args = p.parse_args(argv)
    var, _, value = args.mark.partition("=")
    if not var or not value:
        print(f"--mark {args.mark!r}: not VAR=value", file=sys.stderr)
        return 2
    from verl_ascend.proc import marks

    if args.sample <= 0:
        print(f"--sample {args.sample:g}: the CPU rate needs a window of more than 0 s", file=sys.stderr)
        return 2
    pids = on_this_node(marks.marked(marks.Mark(var, value)))
    if args.cpu_only:
        states = collect_cpu(pids, args.sample)
        print(json.dumps({"host": os.uname().nodename, "node": os.environ.get(runlog.NODE_VAR, ""), "processes": states}))
        return 0
    states, tool = collect(pids, budget=args.budget, sample=args.sample)
    logs = [{"path": path, "lines": _tail(path, OTHER_LOG_LINES)} for path in other_logs(args.since)]
    print(json.dumps({"host": os.uname().nodename, "node": os.environ.get(runlog.NODE_VAR, ""), "pyspy": tool,
                      "ptrace_scope": info.ptrace_scope(), "processes": states, "logs": logs}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
