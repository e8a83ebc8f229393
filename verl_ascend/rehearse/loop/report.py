"""What the plugin did inside a rehearsal's loop, said by the loop's own processes.

``verl-ascend status`` on the host shows the patches of the host's Python; the rehearsal's claim is
about the driver's Ray workers (TaskRunner, actor ranks). So the processes say it themselves, on
their stdout, which Ray forwards into the run's console log with the process's name:

- at the first rollout dispatch, the TaskRunner names the dispatch method verl really calls and
  the ``rollout_order`` verdict for that path. On verl 0.9's ``trainer.use_v1`` path the manager is
  ``AgentLoopManagerTQ``, whose own ``generate_sequences`` replaces the ``AgentLoopManager`` one
  that ``rollout_order`` wraps, so the verdict there is "not applicable on this path" with why;
  on the legacy path the wrapped method is the one called (and ``rollout_order`` logs each tiled
  dispatch itself);
- each process that says anything also lists every patch's state in that process.

Lines start with :data:`PREFIX` (``core.runlog``); ``run/trainer.py`` shows them live and the rehearsal's summary repeats them.
"""

import os
import time

from verl_ascend.core import runlog
from verl_ascend.core.registry import APPLIED, INACTIVE, summarize

PREFIX = runlog.PREFIX
_said = set()


def say(text: str) -> None:
    print(f"{PREFIX} {text}", flush=True)


def patch_states(skip_prefix: str = "rehearse_", inactive=()) -> str:
    """``name state`` for every patch of this process (the rehearsal's own records left out); a patch in
    ``inactive`` is applied but the call it wraps is never made on this trainer path, and says so."""
    from verl_ascend.core import registry

    rows = [summarize(name) for name in registry.names() if not name.startswith(skip_prefix)]
    return ", ".join(f"{row['name']} {row['state']}"
                     + (f", {INACTIVE}" if row["name"] in inactive and row["state"] == APPLIED else "")
                     for row in rows)


def say_patches_once(role: str, inactive=()) -> None:
    if role in _said:
        return
    _said.add(role)
    say(f"patches in {role} (pid {os.getpid()}): {patch_states(inactive=inactive)}")
    say_node(role)


def node_line(role: str, environ=os.environ) -> str:
    """Where this process runs and what it holds: its Ray node's address, the device and platform verl chose
    here, and every ``VERL_ASCEND*`` setting (the run's process mark left out). On a multi-node rehearsal a
    worker node has none of its own: what it holds came in the job's runtime env (multinode.settings_crossed)."""
    try:
        import ray

        ip = ray.util.get_node_ip_address()
    except Exception:
        ip = "?"
    try:
        from verl.utils.device import get_device_name

        device = get_device_name()
    except Exception:
        device = "?"
    try:
        from verl.plugin.platform.platform_manager import get_platform

        platform = type(get_platform()).__name__
    except Exception:
        platform = "?"
    return runlog.node_line(ip, role, device, platform, settings_of(environ))


def say_node(role: str) -> None:
    try:
        say(node_line(role))
    except Exception as exc:  # a report must never break the run
        say(f"could not tell the node of {role} ({type(exc).__name__}: {exc})")


def _rollout_order_outcome(target: str) -> tuple:
    from verl_ascend.core import registry

    if "rollout_order" not in registry.names():
        return "absent", "no rollout_order patch in this verl-ascend"
    for row in summarize("rollout_order")["targets"]:
        if row["target"] == target:
            return row["state"], row["detail"]
    return "pending", f"{target} not imported"


def rollout_order_verdict(manager, base_class) -> str:
    """One line: the dispatch method verl calls on ``manager`` and what rollout_order does there."""
    cls = type(manager)
    called = f"{cls.__name__}.generate_sequences"
    state, detail = _rollout_order_outcome(base_class.__module__)
    owner = next((k for k in cls.__mro__ if "generate_sequences" in vars(k)), base_class)
    if owner is not base_class:
        why = (f"{owner.__name__} ({owner.__module__}) defines its own generate_sequences, so the "
               f"{base_class.__name__}.generate_sequences that rollout_order wraps is not called here")
        if "TQ" in owner.__name__ or ".v1." in owner.__module__:
            why += ("; on the trainer.use_v1 TransferQueue path each prompt goes once to an agent-loop worker, "
                    "which spawns its n samples itself, and results are keyed by uid: no positional order to tile")
        return f"{runlog.DISPATCH}{called}: rollout_order not applicable on this path: {why}"
    if state == APPLIED:
        return f"{runlog.DISPATCH}{called}: rollout_order applied on this path: {detail}"
    return f"{runlog.DISPATCH}{called}: rollout_order {state}: {detail}"


def _announcing(bound, verdict: str):
    def generate_sequences(*args, **kwargs):
        if verdict not in _said:
            _said.add(verdict)
            say(verdict)
            # the line above may say the wrapped dispatch is never called here: the patch list says the same
            say_patches_once("TaskRunner", inactive={"rollout_order"} if "not applicable on this path" in verdict else ())
        return bound(*args, **kwargs)

    return generate_sequences


def watch_manager(agent_loop_module) -> str:
    """Wrap ``AgentLoopManager.__init__``: each manager (subclasses too) announces its first dispatch."""
    from verl_ascend.core.marks import wrap

    base = agent_loop_module.AgentLoopManager

    def make(original):
        def __init__(self, *args, **kwargs):
            original(self, *args, **kwargs)
            try:
                verdict = rollout_order_verdict(self, base)
                self.generate_sequences = _announcing(self.generate_sequences, verdict)
            except Exception as exc:  # a report must never break the run
                say(f"could not tell the rollout dispatch path ({type(exc).__name__}: {exc})")

        return __init__

    wrap(base, "__init__", "rehearse_report", make)
    return "AgentLoopManager (and subclasses) announce their dispatch path and the patch states at the first rollout"


def _rank() -> str:
    try:
        import torch.distributed as dist

        return str(dist.get_rank()) if dist.is_initialized() else "?"
    except Exception:
        return "?"


def _validation_line(kind: str, path, before: dict, elapsed: float = 0.0) -> str:
    from verl_ascend.patches.ckpt_validation import usage

    done = usage.since(before)
    where = f" ({os.path.basename(os.path.dirname(str(path).rstrip('/'))) or path})" if path else ""
    if not done:
        return (f"ckpt_validation in actor rank {_rank()} during {kind}{where}: no shard check ran "
                "(this checkpoint's format validates no shard layout)")
    calls = sum(c for c, _, _ in done.values())
    entries = sum(e for _, e, _ in done.values())
    seconds = sum(s for _, _, s in done.values())
    parts = ", ".join(f"{attr} x{c}" for attr, (c, _, _) in sorted(done.items()))
    share = f" of the {kind}'s {elapsed:.2f} s ({100 * seconds / elapsed:.2f}%)" if elapsed > 0 else ""
    return (f"ckpt_validation in actor rank {_rank()} during {kind}{where}: validated {entries} shard entries in "
            f"{calls} call(s), {seconds:.3f} s{share} ({parts})")


def weights_digest(model) -> str:
    """A digest of the parameters this rank holds (``model``: a module, or Megatron's list of model chunks): each
    local tensor's name and bytes, in order. Equal digests at a save and at the load of the same step on the same
    rank mean the load brought back exactly what was saved; a digest is never compared across ranks or layouts."""
    import hashlib

    import torch

    digest, values = hashlib.blake2b(digest_size=8), 0
    for chunk in model if isinstance(model, (list, tuple)) else [model]:
        for name, param in chunk.named_parameters():
            tensor = param.detach()
            tensor = tensor.to_local() if hasattr(tensor, "to_local") else tensor  # FSDP2's DTensor: this rank's shard
            tensor = tensor.cpu().contiguous().reshape(-1)
            digest.update(name.encode())
            digest.update(tensor.view(torch.uint8).numpy().tobytes())
            values += tensor.numel()
    return f"{digest.hexdigest()} ({values} values)"


def weights_line(kind: str, path, model) -> str:
    """``weights of ROLE rank R after KIND (global_step_N): DIGEST (V values)``: what verdict/checks.py compares.
    ROLE is the checkpoint folder's own name (``actor``, ``critic``)."""
    path = str(path).rstrip("/")
    step = os.path.basename(os.path.dirname(path))
    return f"{runlog.WEIGHTS}{os.path.basename(path)} rank {_rank()} after {kind} ({step}): {weights_digest(model)}"


def _reporting(kind: str):
    def make(original):
        def method(self, local_path, *args, **kwargs):
            try:
                from verl_ascend.patches.ckpt_validation import usage

                before = usage.snapshot()
            except Exception:  # a report must never break the run
                before = None
            started = time.perf_counter()
            result = original(self, local_path, *args, **kwargs)
            elapsed = time.perf_counter() - started
            if before is not None:
                try:
                    say(_validation_line(kind, local_path, before, elapsed))
                except Exception as exc:
                    say(f"could not count the checkpoint checks ({type(exc).__name__}: {exc})")
            if getattr(self, "model", None) is not None:
                try:
                    say(weights_line(kind, local_path, self.model))
                except Exception as exc:
                    say(f"could not digest the weights after {kind} ({type(exc).__name__}: {exc})")
            return result

        return method

    return make


def watch_checkpoints(module) -> str:
    """Wrap the checkpoint manager's save/load: each says what ckpt_validation did during it, and a digest of the
    weights the rank holds after it (:func:`weights_line`)."""
    from verl_ascend.core.marks import wrap

    names = [n for n in ("MegatronCheckpointManager", "FSDPCheckpointManager") if isinstance(getattr(module, n, None), type)]
    for name in names:
        cls = getattr(module, name)
        wrap(cls, "save_checkpoint", "rehearse_report", _reporting("save_checkpoint"))
        wrap(cls, "load_checkpoint", "rehearse_report", _reporting("load_checkpoint"))
    return f"{', '.join(names)} save/load say how many shard entries ckpt_validation checked"


def watch_engines(engine_base) -> str:
    """Wrap ``EngineRegistry.get_engine_cls``: each process says once which engine class verl picked."""
    from verl_ascend.core.marks import wrap

    def make(original):  # the function inside the classmethod: called with the class first
        def get_engine_cls(cls, model_type, backend):
            found = original(cls, model_type, backend)
            line = f"engine in rank {_rank()}: {found.__name__} ({found.__module__}) for {model_type}/{backend}"
            if line not in _said:
                _said.add(line)
                say(line)
            return found

        return get_engine_cls

    if not wrap(engine_base.EngineRegistry, "get_engine_cls", "rehearse_report", make):
        return "EngineRegistry already watched"
    return "EngineRegistry says which engine class each worker builds"


def _model_line(block) -> str:
    """What this rank built, read from the block itself and megatron's parallel state."""
    from megatron.core import parallel_state as mpu

    layers = [layer.layer_number for layer in block.layers]
    moe = [layer.mlp for layer in block.layers if hasattr(getattr(layer, "mlp", None), "router")]
    parts = [f"TP rank {mpu.get_tensor_model_parallel_rank()}/{mpu.get_tensor_model_parallel_world_size()}",
             f"PP stage {mpu.get_pipeline_model_parallel_rank()}/{mpu.get_pipeline_model_parallel_world_size()}",
             f"EP rank {mpu.get_expert_model_parallel_rank()}/{mpu.get_expert_model_parallel_world_size()}"]
    vp = getattr(block, "vp_stage", None)
    if vp is not None:
        parts.append(f"virtual stage {vp}")
    text = f"model in rank {_rank()}: {', '.join(parts)}: decoder layers {layers} of {block.config.num_layers}"
    if moe:
        mlp = moe[0]
        local = list(getattr(mlp, "local_expert_indices", []) or [])
        text += (f"; MoE in {len(moe)} of them: router (top-{block.config.moe_router_topk}), experts {local} of "
                 f"{block.config.num_moe_experts} here ({type(mlp.experts).__name__}), token dispatcher "
                 f"{type(mlp.token_dispatcher).__name__}")
    return text


def watch_models(transformer_block) -> str:
    """Wrap megatron's ``TransformerBlock.__init__``: each rank says once per model what it built (its pipeline
    stage and layers, its experts and the dispatcher), so a run's log shows the layout it really ran."""
    from verl_ascend.core.marks import wrap

    def make(original):
        def __init__(self, *args, **kwargs):
            original(self, *args, **kwargs)
            try:
                line = _model_line(self)
            except Exception as exc:  # a report must never break the run
                line = f"could not describe the model in rank {_rank()} ({type(exc).__name__}: {exc})"
            if line not in _said:
                _said.add(line)
                say(line)

        return __init__

    if not wrap(transformer_block.TransformerBlock, "__init__", "rehearse_report", make):
        return "TransformerBlock already watched"
    return "TransformerBlock says each rank's pipeline stage, layers and experts"


def settings_of(environ) -> dict:
    """The ``VERL_ASCEND*`` settings a process holds (what ray_runtime_env forwards), as :func:`node_line`
    reports them: the run's mark and values with spaces left out."""
    from verl_ascend.patches.ray_runtime_env import forwarded

    return {k: v for k, v in forwarded(environ).items() if k not in runlog.NOT_SETTINGS and " " not in v}
