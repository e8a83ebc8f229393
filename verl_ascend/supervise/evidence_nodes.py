"""The evidence of the other nodes: each runs :mod:`.evidence`'s gatherer over the ssh command of ``--ssh``; and,
before a hang is called, only their processes' CPU rates (:func:`cpu_elsewhere`).

Every node after the head (``--nodes``, head first; the supervisor runs on the head and reads its own ``/proc``)
runs ``python -m verl_ascend.supervise.evidence --mark VAR=value --since T --budget S``, the way ``ckpt sync`` and
the relaunch's steps reach it, all nodes at once and while the head reads its own. The gatherer answers with one
JSON line (its processes with their states, CPU rates and py-spy stacks or why not, and its newest Ray / CANN log
lines), which :func:`.evidence.gather` saves under ``evidence/nodes/NODE/`` as the head's own. A node that cannot be
reached, or does not answer within :data:`TIMEOUT` s, is recorded as such (``nodes/NODE/unreachable.txt`` and the
summary): never fatal, the relaunch's own steps decide what a silent node means.
"""

import json
import shlex
import sys
from concurrent.futures import ThreadPoolExecutor

from verl_ascend.ckpt import nodes as ckpt_nodes

BUDGET = 60.0    # s the node's gatherer may spend on py-spy dumps
TIMEOUT = 120.0  # s for the whole ssh call (the budget, the CPU sample, Python's start, the transfer)
CPU_TIMEOUT = 30.0  # s for a node's CPU sample besides the sample itself (Python's start, the transfer)


def command(options, mark: str, since: float, budget: float = BUDGET, cpu_only: float = None) -> str:
    """The script run on a node; ``cpu_only``: only the CPU rates, over that many seconds."""
    extra = ["--cpu-only", "--sample", f"{cpu_only:g}"] if cpu_only else []
    return shlex.join([options.remote_python or sys.executable, "-m", "verl_ascend.supervise.evidence", "--mark", mark,
                       "--since", f"{since:.0f}", "--budget", f"{budget:g}"] + extra)


def parse(code: int, out: bytes, err: bytes) -> dict:
    """The gatherer's JSON line, or {error} naming what the node said instead."""
    text = (out or b"").decode(errors="replace")
    for line in reversed(text.splitlines()):
        try:
            got = json.loads(line)
        except ValueError:
            continue
        if isinstance(got, dict) and isinstance(got.get("processes"), list):
            return got
    said = " | ".join(((err or b"").decode(errors="replace") or text).strip().splitlines()[-3:]) or "no output"
    return {"error": f"the gatherer gave no report (exit {code}): {said[-400:]}; fix: install verl-ascend on that node "
                     "or pass --remote-python with its python"}


def one(options, node: str, mark: str, since: float, timeout: float = TIMEOUT, cpu_only: float = None) -> dict:
    """One node's evidence (:func:`parse`), or {error} when it cannot be reached or does not answer in time."""
    try:
        proc = ckpt_nodes.run(options.ssh, ckpt_nodes.parse(node), command(options, mark, since, cpu_only=cpu_only),
                              timeout=timeout)
    except ckpt_nodes.NodeError as exc:
        return {"error": f"{exc.message} — {exc.fix}"}
    except ValueError as exc:  # not [user@]host[:port]
        return {"error": str(exc)}
    return parse(proc.returncode, proc.stdout, proc.stderr)


def start(options, mark: str, since: float) -> dict:
    """Ask every node after the head, at once; {node: future of :func:`one`}."""
    others = list(options.nodes[1:])
    pool = ThreadPoolExecutor(max_workers=max(1, len(others)))
    futures = {node: pool.submit(one, options, node, mark, since) for node in others}
    pool.shutdown(wait=False)
    return futures


def finish(futures: dict) -> dict:
    """Wait for the nodes (each call is bounded by its ssh timeout); {node: :func:`one`'s result}."""
    found = {}
    for node, future in futures.items():
        try:
            found[node] = future.result()
        except Exception as exc:  # an error of ours must not cost the head's evidence
            found[node] = {"error": f"{type(exc).__name__}: {exc}"}
    return found


def cpu_elsewhere(options, mark: str, sample: float = 2.0) -> dict:
    """Every node after the head, at once: {node: {processes: [its processes of the run with their cpu_rate]}, or
    {error}} — what the supervisor asks before it calls a hang (a rank may compute on one node while the head's
    processes wait for it in a collective, quiet)."""
    others = list(options.nodes[1:])
    with ThreadPoolExecutor(max_workers=max(1, len(others))) as pool:
        futures = {node: pool.submit(one, options, node, mark, 0.0, CPU_TIMEOUT + sample, sample) for node in others}
    return finish(futures)


def weigh_hang(options, found, mark: str, budgets, sample: float = 2.0) -> tuple:
    """(the hang confirmed by the other nodes' CPU or None, a line to say when it was held back, the seconds until it
    may be weighed again: the quiet window of the head's call): the glue around :func:`.detect.confirm_hang`."""
    from . import detect

    quiet = found.details.get("quiet_s", budgets.quiet)  # the window the head's call used
    others = cpu_elsewhere(options, mark, sample=min(sample, quiet))
    hot = detect.busy_elsewhere(others, budgets.cpu_busy)
    if hot:
        return None, detect.held_back(found, hot, quiet), quiet
    return detect.confirm_hang(found, others, budgets.cpu_busy), "", 0.0
