"""A fault planted inside a rehearsal's own loop, for ``rehearse --supervise --fault KIND``: what a supervisor meets.

The supervisor gives the attempt that carries the fault ``VERL_ASCEND_REHEARSE_FAULT=KIND@CHECKPOINT_DIR``
(``core.runlog``: the first attempt only, or every one for a crash loop); ``ray_runtime_env`` carries it to every Ray
worker. In each process that builds a training engine (``rehearse_report`` arms this where verl's
``EngineRegistry`` is imported) a global optimizer-step pre-hook waits for its moment: the actor's rank 0, at
its first optimizer step after a checkpoint exists in the checkpoint folder as its node sees it — verl's tracker
(``latest_checkpointed_iteration.txt``), or a ``global_step_N`` folder: on node-local disks the tracker is on the
trainer's node only, while each rank writes its shards into ``global_step_N`` on its own — mid-update of the step
after the first checkpoint, in the first attempt; in a relaunch resumed from that checkpoint, the same step again.
There it says what it does (a line in the run's console), then:

- ``kill-worker`` / ``crash-loop``: SIGKILL to itself, as the host's OOM killer ends a Ray worker: Ray reports
  the actor dead, verl's driver fails;
- ``hang-rank``: SIGSTOP to itself, as Megatron-LM's and nvidia-resiliency-ext's tests simulate a hung rank: the
  other ranks wait for it in their next collective, the driver in ``ray.get``; nothing fails, nothing moves.
"""

import os
import signal

from verl_ascend.core import runlog

SIGNALS = {runlog.FAULT_KILL: signal.SIGKILL, runlog.FAULT_LOOP: signal.SIGKILL, runlog.FAULT_STOP: signal.SIGSTOP}
TRACKER = "latest_checkpointed_iteration.txt"
_armed = []


def wanted(environ=os.environ):
    """(kind, checkpoint folder, the checkpoint step it waits for) of the fault this process carries, or None (unset,
    or a kind planted elsewhere)."""
    head, _, folder = environ.get(runlog.FAULT_VAR, "").partition("@")
    kind, _, after = head.partition("/")
    if kind not in SIGNALS or not folder:
        return None
    return kind, folder, int(after) if after.isdigit() else 1


def env(kind: str, ckpt_dir, after: int = 1) -> dict:
    """The environment of an attempt that carries the fault (what the supervisor adds to it): it strikes at the first
    optimizer step once checkpoint step ``after`` (or a later one) is saved (``KIND/N@DIR`` when N > 1)."""
    return {runlog.FAULT_VAR: f"{kind}{f'/{after}' if after > 1 else ''}@{ckpt_dir}"}


def _rank() -> int:
    try:
        import torch.distributed as dist

        return dist.get_rank() if dist.is_initialized() else 0
    except Exception:
        return 0


def saved_step(folder: str):
    """The newest checkpoint step this process sees in ``folder`` (the tracker's, else the newest ``global_step_N``
    folder), as text; None before the first save."""
    try:
        return open(os.path.join(folder, TRACKER)).read().strip() or "?"
    except OSError:
        pass
    try:
        steps = [int(n[12:]) for n in os.listdir(folder) if n.startswith("global_step_") and n[12:].isdigit()]
    except OSError:
        return None
    return str(max(steps)) if steps else None


def _hook(kind: str, folder: str, after: int = 1):
    def pre_step(optimizer, args, kwargs):
        if _armed[0] is None or _rank() != 0:
            return None
        step = saved_step(folder)
        if step is None or (step.isdigit() and int(step) < after):
            return None
        _armed[0] = None  # once
        sig = SIGNALS[kind]
        print(f"{runlog.PREFIX} {runlog.FAULT_PLANTED}{kind}: actor rank 0 (pid {os.getpid()}) gets "
              f"{signal.Signals(sig).name} in its optimizer step after global_step_{step}", flush=True)
        os.kill(os.getpid(), sig)
        return None

    return pre_step


def arm() -> str:
    """Install the hook in this process when it carries a fault (once); says what it did, for the record's detail."""
    found = wanted()
    if found is None:
        return ""
    if _armed:
        return f"; fault {found[0]} armed"
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    _armed.append(found)
    register_optimizer_step_pre_hook(_hook(*found))
    return f"; fault {found[0]} armed (rank 0, first optimizer step after a checkpoint in {found[1]})"
