"""Before a relaunch: the other nodes cleared and back, the checkpoint the resume loads whole on every node.

On one node (no ``--nodes``) the checkpoint folder is read here. With ``--nodes`` (every node of the run as
``[user@]host[:port]``, as ``ckpt sync`` takes them; the head first) each step runs on the nodes over the ssh command
of ``--ssh``, as ``ckpt sync`` reaches them:

1. :func:`end_on_nodes`: the attempt's processes on every node, ended by the mark they carry
   (``python -m verl_ascend.proc.marks end VAR=value``): never by a name, never another user's;
2. :func:`wait_nodes`: every node answers (``ssh NODE true``) and, where a Ray cluster outlives the command
   (``ray start`` per node), Ray shows ``trainer.nnodes`` nodes alive (:mod:`.ray_nodes`), within ``--wait-nodes``,
   else the run gives up (a requeue may find them back); a node that does not answer before the first attempt is
   bad input;
3. ``ckpt sync DIR --all`` between the nodes (it lists, copies what a node lacks from the node that has it, and runs
   ``ckpt check`` on each);
4. :func:`resume_point`: on each node ``python -m verl_ascend.supervise.relaunch DIR`` (:func:`state`) says the
   tracker's step and whether it is whole, and if not the newest earlier step that is; the relaunch resumes from
   the tracker (``trainer.resume_mode=auto``), or from the newest step whole on every node
   (``trainer.resume_mode=resume_path trainer.resume_from_path=DIR/global_step_K``: the tracker is left as verl
   wrote it), or stops naming the damaged file when no step is whole everywhere.
"""

import json
import os
import sys
import time

from verl_ascend.ckpt import nodes as ckpt_nodes
from verl_ascend.core.findings import ERROR, Finding

TRACKER = "latest_checkpointed_iteration.txt"


def folder_bytes(path) -> int:
    """Bytes under ``path`` (the checkpoint folder: a save in progress grows it)."""
    total = 0
    for root, _, names in os.walk(path):
        for n in names:
            try:
                total += os.lstat(os.path.join(root, n)).st_size
            except OSError:
                pass
    return total


def local_tracker(settings: dict):
    """The step verl's tracker names in the checkpoint folder as this host sees it, else None."""
    folder = settings.get("default_local_dir")
    try:
        text = open(os.path.join(folder, TRACKER)).read().strip() if folder else ""
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def state(folder: str, step: int = None) -> dict:
    """{tracker, steps, checked: {step: [damaged files as 'path: message']}, whole: the newest whole step checked}.
    The tracker's step is checked first, then earlier steps, newest first, until one is whole (``step``: that one
    only)."""
    from pathlib import Path

    from verl_ascend.ckpt import scan

    root = Path(folder)
    if not root.is_dir():
        return {"tracker": None, "steps": [], "checked": {}, "whole": None}
    found = scan.steps(root)
    tracker = scan.tracker_step(root, [])
    top = tracker if tracker is not None else (found[-1] if found else None)
    order = [step] if step is not None else [s for s in reversed(found) if top is None or s <= top]
    checked, whole = {}, None
    for s in order:
        out = []
        if s in found:
            scan.check_step(root, s, out)
        else:
            out.append(Finding(ERROR, str(root / f"global_step_{s}"), "not on this node"))
        errors = [f"{f.subject}: {f.message}" for f in out if f.severity == ERROR]
        checked[str(s)] = errors
        if not errors:
            whole = s
            break
    return {"tracker": tracker, "steps": found, "checked": checked, "whole": whole}


def _remote(options, node, args: list, timeout=900) -> tuple:
    """(exit code, stdout) of ``python ARGS`` on a node over ssh; a node ssh cannot reach raises NodeError."""
    import shlex

    script = shlex.join([options.remote_python or sys.executable, *args])
    proc = ckpt_nodes.run(options.ssh, ckpt_nodes.parse(node), script, timeout=timeout)
    return proc.returncode, (proc.stdout or b"").decode(errors="replace")


def _last_json(text: str) -> dict:
    for line in reversed(text.splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return {}


def node_states(options, folder: str, step: int = None) -> dict:
    """{node: :func:`state`} on every node (here when no ``--nodes``)."""
    if not options.nodes:
        return {"here": state(folder, step)}
    extra = ["--step", str(step)] if step is not None else []
    found = {}
    for node in options.nodes:
        _, out = _remote(options, node, ["-m", "verl_ascend.supervise.relaunch", folder, *extra])
        found[node] = _last_json(out) or {"tracker": None, "steps": [], "checked": {}, "whole": None,
                                          "error": out.strip()[-300:]}
    return found


def tracker(options, settings: dict, say=print):
    """The checkpoint step the trainer's tracker names now: here, or with ``--nodes`` the newest any node names (a
    node that does not answer: None, said; the relaunch's wait deals with it)."""
    if not options.nodes:
        return local_tracker(settings)
    folder = settings.get("default_local_dir")
    try:
        states = node_states(options, folder) if folder else {}
    except Exception as exc:  # noqa: BLE001 - any failure to read a node is reported, never fatal here
        say(f"trackers on the nodes not read: {exc}")
        return None
    return max((s["tracker"] for s in states.values() if s.get("tracker") is not None), default=None)


def resume_point(options, folder: str) -> tuple:
    """(overrides for the relaunch, what was decided, the damaged file or ''). Overrides None: stop (no step is whole
    on every node); [] with nothing saved yet: the relaunch trains from the start."""
    states = node_states(options, folder)
    trackers = {s.get("tracker") for s in states.values()}
    if not any(s.get("steps") for s in states.values()):
        return ["trainer.resume_mode=auto"], "no checkpoint yet: the relaunch starts from step 1", ""
    top = max((t for t in trackers if t is not None), default=None)
    damaged = [f"{node}: {errs[0]}" for node, s in states.items() for step, errs in s.get("checked", {}).items()
               if errs and (top is None or int(step) == top)]
    if top is not None and not damaged and trackers == {top}:
        return ["trainer.resume_mode=auto"], f"global_step_{top} whole on {len(states)} node(s)", ""
    wholes = [s.get("whole") for s in states.values()]
    candidate = min(wholes) if None not in wholes else None
    if candidate is not None and any(w != candidate for w in wholes):  # newer on some nodes: check it on all
        again = node_states(options, folder, candidate)
        candidate = candidate if all(s.get("whole") == candidate for s in again.values()) else None
    first = damaged[0] if damaged else f"the trackers disagree: {sorted(trackers, key=str)}"
    if candidate is None:
        return None, f"no checkpoint step is whole on every node ({first})", first
    path = os.path.join(folder, f"global_step_{candidate}")
    return (["trainer.resume_mode=resume_path", f"trainer.resume_from_path={path}"],
            f"falling back to global_step_{candidate}, whole on every node ({first})", first)


def end_on_nodes(options, mark: str) -> dict:
    """{node: pids still carrying the mark after the ending ([] all ended), or the error}, on every --nodes node."""
    found = {}
    for node in options.nodes:
        try:
            _, out = _remote(options, node, ["-m", "verl_ascend.proc.marks", "end", mark], timeout=180)
            found[node] = _last_json(out).get("pids", f"no answer: {out.strip()[-200:]}")
        except ckpt_nodes.NodeError as exc:
            found[node] = exc.message
    return found


def unreachable(options) -> dict:
    """{node: why} of every --nodes node that does not answer ``ssh NODE true`` now."""
    bad = {}
    for node in options.nodes:
        try:
            spec = ckpt_nodes.parse(node)
        except ValueError as exc:
            bad[node] = str(exc)
            continue
        try:
            if ckpt_nodes.run(options.ssh, spec, "true", timeout=30).returncode != 0:
                bad[node] = "`true` failed there"
        except ckpt_nodes.NodeError as exc:
            bad[node] = f"{exc.message} — {exc.fix}"
    return bad


def wait_nodes(options, poll: float = 10.0, settings: dict = None, env: dict = None, say=print) -> dict:
    """Wait up to ``options.wait_nodes`` s for every ``--nodes`` node to answer, then, where a Ray cluster outlives
    the command (:mod:`.ray_nodes`), for Ray to show ``trainer.nnodes`` nodes alive; {node or 'Ray at ADDRESS':
    why} of what was not back in time ({} when all is)."""
    from . import ray_nodes

    deadline = time.monotonic() + options.wait_nodes
    while options.nodes:
        bad = unreachable(options)
        if not bad or time.monotonic() >= deadline:
            if bad:
                return bad
            break
        time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
    want = ray_nodes.wanted(settings, options.nodes)
    if not want or want < 2:
        return {}
    address, how = ray_nodes.outside(os.environ if env is None else env)
    if address is None:
        ray_nodes.say_once(say, f"{how}: the command forms its own, so the relaunch does not wait for Ray's nodes")
        return {}
    hosts = [ckpt_nodes.parse(n).host for n in options.nodes]
    why = ray_nodes.wait(address, want, hosts, deadline, poll)
    if why:
        return {f"Ray at {address}": why}
    say(f"Ray at {address} (from {how}): {want} node(s) alive, as trainer.nnodes asks")
    return {}


def sync(options, folder: str, call) -> tuple:
    """``ckpt sync DIR --all --nodes ... --json`` (``call(argv, timeout)`` runs it as a step of the run); (exit, its
    envelope)."""
    argv = [sys.executable, "-m", "verl_ascend", "ckpt", "sync", folder, "--all", "--json", "--nodes",
            *options.nodes, "--ssh", options.ssh, "--remote-python", options.remote_python or sys.executable]
    proc = call(argv, 3600)
    return proc.returncode, _last_json(proc.stdout)


def main(argv=None) -> int:
    """``python -m verl_ascend.supervise.relaunch DIR [--step N]``: :func:`state` as one JSON line (what a
    supervisor asks each node before a relaunch)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or (len(args) == 3 and args[1] != "--step") or len(args) not in (1, 3):
        print("usage: python -m verl_ascend.supervise.relaunch DIR [--step N]", file=sys.stderr)
        return 2
    print(json.dumps(state(args[0], int(args[2]) if len(args) == 3 else None)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
