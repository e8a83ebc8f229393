"""The rollout double (tests/fakes/rollout/echo_rollout.py) against the installed verl's real workers.

The double claims two interfaces: the spmd rollout worker's ``generate_sequences`` (verl's legacy
``fsdp_workers.ActorRolloutRefWorker``, present up to verl 0.7) and the agent-loop worker's (every
supported verl). Here both claims are read back from the installed verl's own classes.
"""

import importlib.util
import inspect
import sys
from pathlib import Path

from verl.single_controller.base.decorator import MAGIC_ATTR

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes" / "rollout"))
from echo_rollout import EchoRolloutWorker  # noqa: E402


def _registration(method) -> dict:
    """verl's @register record, with its dispatch functions as (function, arguments) to compare."""
    attrs = dict(getattr(method, MAGIC_ATTR))
    mode = attrs["dispatch_mode"]
    if isinstance(mode, dict):  # make_nd_compute_dataproto_dispatch_fn: partials over the mesh name
        attrs["dispatch_mode"] = {k: (fn.func, fn.args, fn.keywords) for k, fn in mode.items()}
    return attrs


def test_double_registers_like_the_real_spmd_rollout_worker_where_verl_has_one():
    if importlib.util.find_spec("verl.workers.fsdp_workers") is None:  # verl 0.8+: no legacy workers
        from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

        assert not hasattr(AgentLoopWorker.generate_sequences, MAGIC_ATTR)  # a plain actor method there
        return
    from verl.workers.fsdp_workers import ActorRolloutRefWorker

    assert _registration(EchoRolloutWorker.generate_sequences) == _registration(ActorRolloutRefWorker.generate_sequences)


def test_double_takes_what_the_agent_loop_worker_takes():
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    def data_arguments(method):  # Ray's tracing (verl 0.6.1's @tqbridge) adds _ray_trace_ctx; self is the actor
        return [p for p in inspect.signature(method).parameters if p not in ("self", "_ray_trace_ctx")]

    real, double = data_arguments(AgentLoopWorker.generate_sequences), data_arguments(EchoRolloutWorker.generate_sequences)
    assert len(real) == len(double) == 1, (real, double)  # one DataProto in, one out
