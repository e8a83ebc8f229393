"""Dispatch rollouts in tiled order and give verl its interleaved order back.

Why: verl repeats each prompt n times side by side and splits the batch by position across rollout
    workers, so on the spmd path all n samples of a prompt run on one worker. A prompt with long answers makes that
    worker the straggler, which on A2 ends in rollout / HCCL timeouts (verl issue 4115;
    docs/field-reports.md#235b-rollout-timeouts). The field fix, ``interleave=False`` in the trainers' ``repeat`` calls, must be made in
    two places per trainer; changing one pairs responses with the wrong ground truth, and DAPO's
    positional ``batch[:traj_bsz]`` then cuts GRPO groups.
How: at the two points where verl splits a generation batch across workers, the rows are put
    into tiled order (sample 0 of every prompt, then sample 1, ...; ``verl_ascend.patches.rollout_order.order``)
    and the generated output is put back into the input's order, so the trainer, reward, union,
    DAPO truncation/filtering, balance_batch, advantage and PrefixGrouper see what they see today.
    Rows belong to the same prompt when they share ``uid`` (else ``input_ids``, ``raw_prompt_ids``
    or ``raw_prompt``). Points: ``AgentLoopManager.generate_sequences`` (``prompts.chunk(workers)``;
    every async/agent-loop rollout, 0.6.1+) and the worker group's ``generate_sequences`` built by
    ``verl.single_controller.ray.base.func_generator`` (spmd rollout, DP-rank chunking; 0.6.x sync
    mode). Both sit below ``RayPPOTrainer.fit``, its validation and the DAPO recipe trainer. On
    the manager the reorder goes around the undecorated body, beneath ``auto_await`` and 0.9's
    ``SkipManager`` (rollout dump/replay), so those keep seeing verl's order.
    Where it acts, decided per trainer path by feature detection (``bench/rollout_balance.py``
    prints the numbers behind each default):
    - spmd, ``rollout.mode=sync`` (verl 0.6.x: ``RayPPOTrainer`` calls
      ``actor_rollout_wg.generate_sequences``): each DP rank generates exactly its slice, so the
      order decides the straggler. Tiled by default on Ascend hosts.
    - agent loop (every async rollout; the only path of verl 0.7+): each sample is its own request
      and verl routes it to a server (0.7.1+ ``GlobalRequestLoadBalancer``: fewest in flight;
      0.6.x/0.7.0 ``AsyncLLMServerManager``: fewest sent per agent-loop worker). The split only
      decides which agent-loop worker holds a sample; the bench shows no gain (0.7.1+) or a loss
      (0.6.x). Not applicable by default.
    - 0.9.x ``trainer.use_v1`` TransferQueue: ``AgentLoopManagerTQ`` dispatches each prompt once,
      its worker spawns the n samples itself and results are keyed by uid: no positional order.
      Not applicable.
    Switch: ``VERL_ASCEND_ROLLOUT_ORDER=tiled|interleaved``. Unset: the defaults above on Ascend
    hosts, interleaved elsewhere. ``tiled`` set explicitly applies on every path that has a
    dispatch point (the agent loop included, for comparing on a cluster).
Upstream: none yet (verl issue 4115 asks for balanced dispatch).
Remove when: verl 0.6.x (the last with the spmd ``rollout.mode=sync`` trainer path) is out of use.
"""

import functools
import inspect
import logging
import sys

from verl_ascend.core import platform, settings
from verl_ascend.core.marks import is_wrapped, mark, unwrap, wrap
from verl_ascend.core.registry import Patch
from verl_ascend.patches.rollout_order import order as dispatch_order

NAME = "rollout_order"
AGENT_LOOP = "verl.experimental.agent_loop.agent_loop"
WORKER_GROUP = "verl.single_controller.ray.base"
ROUTER = "verl.workers.rollout.router"
TRAINER = "verl.trainer.ppo.ray_trainer"
# Not a target: importing it needs the TransferQueue package, and status would list it as an error.
TQ_NOTE = ("trainer.use_v1 TransferQueue path not applicable: AgentLoopManagerTQ dispatches each prompt "
           "once, its worker spawns the n samples itself, results are keyed by uid")
GROUP_KEYS = ("uid", "input_ids", "raw_prompt_ids", "raw_prompt")
logger = logging.getLogger("verl_ascend")
_announced = set()


# ---- DataProto level: the part the trainer never sees ------------------------------------------


def _hashable(value):
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


def group_keys(data):
    """One key per row naming its prompt, and the column it came from; (None, None) if none."""
    columns = data.non_tensor_batch
    tensors = data.batch
    for name in GROUP_KEYS:
        if name in columns:
            return [_hashable(v) for v in columns[name]], name
        if tensors is not None and name in tensors.keys():
            rows = tensors[name].detach().cpu().reshape(len(data), -1).numpy()
            return [row.tobytes() for row in rows], name
    return None, None


def to_tiled(data):
    """``(tiled, inverse)`` for a DataProto; ``(data, None)`` when the order would not change."""
    if len(data) < 2:
        return data, None
    keys, source = group_keys(data)
    if keys is None:
        return data, None
    perm = dispatch_order.tiled_permutation(keys)
    if dispatch_order.is_identity(perm):
        return data, None
    import numpy as np

    if NAME not in _announced:
        _announced.add(NAME)
        logger.info("rollout_order: dispatching %d rows in tiled order (prompts grouped by %s)", len(data), source)
    return data.select_idxs(np.asarray(perm, dtype=np.int64)), np.asarray(dispatch_order.inverse(perm), dtype=np.int64)


def restore(output, original, tiled, inv):
    """Put the generated rows back into the input's order; mirror columns the callee added to its input."""
    if inv is None:
        return output
    if len(output) != len(inv):
        raise RuntimeError(
            f"rollout_order: generation returned {len(output)} rows for {len(inv)} dispatched rows, so "
            f"the tiled order cannot be undone; set {dispatch_order.ENV}=interleaved for this job"
        )
    # verl 0.9 writes a per-row `priority` column into its input; keep that visible to the caller.
    for key, value in tiled.non_tensor_batch.items():
        if key not in original.non_tensor_batch and len(value) == len(inv):
            original.non_tensor_batch[key] = value[inv]
    return output.select_idxs(inv)


def _data_arg(args, kwargs, name="prompts"):
    """Where the batch is in a call: ('args', 0) / ('kwargs', name) / None."""
    if args:
        return "args", 0
    if name in kwargs:
        return "kwargs", name
    return None


def _replace(args, kwargs, where, value):
    if where[0] == "args":
        return (value, *args[1:]), kwargs
    return args, {**kwargs, where[1]: value}


def _prepare(args, kwargs):
    from verl.protocol import DataProto

    where = _data_arg(args, kwargs)
    data = None if where is None else (args[0] if where[0] == "args" else kwargs[where[1]])
    if not isinstance(data, DataProto):  # a DataProtoFuture, a TensorDict: leave it alone
        return args, kwargs, None
    tiled, inv = to_tiled(data)
    if inv is None:
        return args, kwargs, None
    args, kwargs = _replace(args, kwargs, where, tiled)
    return args, kwargs, (data, tiled, inv)


def _finish(output, state):
    return output if state is None else restore(output, *state)


# ---- AgentLoopManager.generate_sequences --------------------------------------------------------


def reorder_around(func):
    """``func(self, prompts, ...)`` that receives its batch tiled and returns rows in input order."""
    if inspect.iscoroutinefunction(func):

        async def generate_sequences(self, *args, **kwargs):
            args, kwargs, state = _prepare(args, kwargs)
            return _finish(await func(self, *args, **kwargs), state)

    else:

        def generate_sequences(self, *args, **kwargs):
            args, kwargs, state = _prepare(args, kwargs)
            return _finish(func(self, *args, **kwargs), state)

    functools.update_wrapper(generate_sequences, func)
    return mark(generate_sequences, NAME)


def _innermost_cell(func):
    """The closure cell through which verl's innermost decorator calls the undecorated function.

    verl stacks ``auto_await`` (0.7+) and ``SkipManager.annotate`` (0.9, rollout dump/replay) on
    ``AgentLoopManager.generate_sequences``; both keep the function they wrap in their closure and
    set ``__wrapped__``. The reorder goes right around the undecorated body (the code that chunks
    the batch), so those decorators, and whatever they record, keep seeing verl's own order.
    """
    outer = func
    while True:
        inner = getattr(outer, "__wrapped__", None)
        if inner is None:
            return None
        if getattr(inner, "__wrapped__", None) is None:
            for cell in getattr(outer, "__closure__", None) or ():
                try:
                    held = cell.cell_contents
                except ValueError:  # an empty cell
                    continue
                # the body itself, or our reorder around it from an earlier apply
                if held is inner or (is_wrapped(held, NAME) and held.__wrapped__ is inner):
                    return cell
            return None
        outer = inner


_undo = []


def _wrap_manager(manager) -> str:
    original = manager.generate_sequences
    cell = _innermost_cell(original)
    if cell is None:  # undecorated (0.6.x): replace the method itself
        wrap(manager, "generate_sequences", NAME, reorder_around)
        return "AgentLoopManager.generate_sequences"
    body = cell.cell_contents
    if not is_wrapped(body, NAME):
        cell.cell_contents = reorder_around(body)
        _undo.append(lambda: setattr(cell, "cell_contents", body))
    return "AgentLoopManager.generate_sequences (inside verl's decorators)"


def revert(agent_loop_module=None, worker_group_module=None) -> None:
    """Undo the patch in this process (tests compare against stock this way)."""
    while _undo:
        _undo.pop()()
    if agent_loop_module is not None:
        unwrap(agent_loop_module.AgentLoopManager, "generate_sequences", NAME)
    if worker_group_module is not None:
        unwrap(worker_group_module, "func_generator", NAME)


# ---- worker group dispatch (spmd rollout) -------------------------------------------------------


def _is_generate(method_name) -> bool:
    # Fused (colocated) worker groups bind `<role>_generate_sequences` and rebind it without prefix.
    return isinstance(method_name, str) and (
        method_name == "generate_sequences" or method_name.endswith("_generate_sequences")
    )


class _TiledCall:
    """Callable standing in for verl's per-method Functor: tiled in, input order out."""

    def __init__(self, functor):
        self.functor = functor
        self.__name__ = type(functor).__name__

    def __call__(self, *args, **kwargs):
        args, kwargs, state = _prepare(args, kwargs)
        return _finish(self.functor(*args, **kwargs), state)


def _wrap_func_generator(original):
    params = ("self", "method_name", "dispatch_fn", "collect_fn", "execute_fn", "blocking")

    def func_generator(*args, **kwargs):
        functor = original(*args, **kwargs)
        bound = dict(zip(params, args))
        bound.update(kwargs)
        # Non-blocking calls return futures: their rows cannot be put back, so they keep verl's order.
        if _is_generate(bound.get("method_name")) and bound.get("blocking", True):
            return _TiledCall(functor)
        return functor

    return func_generator


# ---- the patch record ---------------------------------------------------------------------------


def order_and_reason():
    return dispatch_order.configured_order(None, platform.is_ascend_host())


def _chosen_by_user() -> bool:
    return settings.get(dispatch_order.ENV) != ""


def _verl_source(module_name: str) -> str:
    """The text of one of verl's modules, without importing it ('' when absent)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        return ""
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return ""
    try:
        with open(spec.origin, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return ""


def request_balancer(agent_loop_module) -> str:
    """How this verl's agent loop routes each sample to a server ('' when it does not route requests)."""
    if hasattr(agent_loop_module, "GlobalRequestLoadBalancer") or "class GlobalRequestLoadBalancer" in _verl_source(ROUTER):
        return "GlobalRequestLoadBalancer (each request to the server with the fewest in flight, verl 0.7.1+)"
    manager = getattr(agent_loop_module, "AsyncLLMServerManager", None)
    if manager is not None and hasattr(manager, "_choose_server"):
        return "AsyncLLMServerManager (each agent-loop worker sends to the server it sent the fewest requests)"
    return ""


def spmd_trainer_path() -> bool:
    """Does this verl's RayPPOTrainer generate through the worker group (rollout.mode=sync, spmd)?"""
    return "actor_rollout_wg.generate_sequences" in _verl_source(TRAINER)


def _applies(module):
    order, reason = order_and_reason()  # a bad value raises: recorded as failed, with the fix
    if order != dispatch_order.TILED:
        return f"order {order}: {reason}"
    forced = _chosen_by_user()
    if module.__name__ == AGENT_LOOP:
        manager = getattr(module, "AgentLoopManager", None)
        if manager is None or not callable(getattr(manager, "generate_sequences", None)):
            return "no AgentLoopManager.generate_sequences in this verl"
        balancer = request_balancer(module)
        if balancer and not forced:
            return (f"agent-loop path: verl routes every sample as its own request through {balancer}, so the "
                    f"split decides which agent-loop worker holds a sample, not which server generates it; "
                    f"bench/rollout_balance.py shows no gain there (set {dispatch_order.ENV}=tiled to force it)"
                    + (f"; {TQ_NOTE}" if _has_tq_path() else ""))
        return None
    if not callable(getattr(module, "func_generator", None)):
        return "no func_generator in verl.single_controller.ray.base"
    if not forced and not spmd_trainer_path():
        return ("spmd path: this verl's RayPPOTrainer has no rollout.mode=sync generation through the worker "
                "group (verl 0.7+ generates through the agent loop only)")
    return None


def _has_tq_path() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("verl.trainer.ppo.v1") is not None
    except (ImportError, ValueError):
        return False


def _apply(module):
    _, reason = order_and_reason()
    if module.__name__ == AGENT_LOOP:
        where = _wrap_manager(module.AgentLoopManager)
        balancer = request_balancer(module)
        detail = f"{where} dispatches tiled ({reason})"
        if balancer:
            detail += f"; requests still routed by {balancer}: no gain expected"
        return f"{detail}; {TQ_NOTE}" if _has_tq_path() else detail
    wrap(module, "func_generator", NAME, _wrap_func_generator)
    return f"worker-group generate_sequences dispatches tiled, the rollout.mode=sync (spmd) path ({reason})"


V1_PACKAGE = "verl.trainer.ppo.v1"


def v1_dispatching_manager() -> str:
    """The class of this verl's v1 (TransferQueue) loop that subclasses ``AgentLoopManager`` and defines its
    own ``generate_sequences`` ('' when there is none): read from the source, since importing the v1 loop
    needs the TransferQueue package."""
    import ast
    import importlib.util
    from pathlib import Path

    try:
        spec = importlib.util.find_spec(V1_PACKAGE)
    except (ImportError, ValueError):
        return ""
    if spec is None or not spec.submodule_search_locations:
        return ""
    for path in sorted(Path(list(spec.submodule_search_locations)[0]).glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {getattr(b, "id", None) or getattr(b, "attr", None) for b in node.bases}
            own = {f.name for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
            if "AgentLoopManager" in bases and "generate_sequences" in own:
                return f"{node.name} ({V1_PACKAGE}.{path.stem})"
    return ""


def _inactive(target: str):
    """Why the call wrapped at ``target`` is never made on the trainer path this verl runs by default, or None."""
    if target == WORKER_GROUP and not spmd_trainer_path():
        return ("this verl's RayPPOTrainer never generates through the worker group (no rollout.mode=sync "
                "spmd path), so the wrapped worker-group generate_sequences is not called")
    if target == AGENT_LOOP:
        from verl_ascend.core import verl_install

        manager = v1_dispatching_manager() if verl_install.v1_default() else ""
        if manager:
            return (f"this verl runs the v1 TransferQueue trainer by default (trainer.use_v1=True), whose "
                    f"{manager} defines its own generate_sequences: the AgentLoopManager.generate_sequences wrapped "
                    "here is not called; it acts with trainer.use_v1=False")
    return None


PATCH = Patch(
    name=NAME, targets=(AGENT_LOOP, WORKER_GROUP), applies=_applies, apply=_apply, doc=__doc__, inactive=_inactive,
    revert=lambda: revert(sys.modules.get(AGENT_LOOP), sys.modules.get(WORKER_GROUP)),
)
