"""Rehearsal-only runtime fixes: what verl 0.9 and torch need to train on a CPU-only host.

Why: ``verl-ascend rehearse`` runs a recipe's real ``python -m verl.trainer.main_ppo`` on CPU.
    Stock verl 0.9 has no CPU platform (it falls back to CUDA), builds the collective back-end
    string ``cpu:gloo,<device>:<backend>`` (``cpu:gloo,cpu:gloo`` on CPU, which torch rejects as a
    duplicate device type), gives the FSDP2 reference model ``CPUOffloadPolicy(pin_memory=True)``
    (pinning needs an accelerator), has no rollout that runs on torch's CPU build, and builds an FSDP
    critic's value model with ``attn_implementation="flash_attention_2"`` written into the call
    (``verl/utils/model.py`` ``load_valuehead_model``; the critic's ``override_config`` does not reach it).
How: six records, shown by ``verl-ascend status`` like the patches, that act only in a process
    with ``VERL_ASCEND_REHEARSE=1`` (set by ``rehearse`` for main_ppo; the ``ray_runtime_env``
    patch carries it to every Ray worker). Elsewhere each says "not a rehearsal" and changes
    nothing.
    rehearse_platform   verl                        register + select the CPU platform (cpu_platform.py)
    rehearse_backend    torch.distributed           init_process_group keeps one back-end per device type
    rehearse_offload    torch FSDP2 _fsdp_api       CPUOffloadPolicy never pins host memory
    rehearse_rollout    verl.workers.rollout        rollout name ``hf`` (hf_rollout.py)
    rehearse_value_head verl.utils.model            the critic's value model with torch's sdpa attention
    rehearse_report     verl agent loop             at the first rollout the TaskRunner names the dispatch
                                                    path and rollout_order's verdict on it (inloop.py);
                        verl checkpoint managers    after each save/load an actor rank says how many shard
                                                    entries ckpt_validation checked, in how long;
                        verl EngineRegistry         each worker names the engine class verl picked (and
                                                    arms the fault `rehearse --supervise` plants: fault.py);
                        megatron TransformerBlock   each rank names its pipeline stage, layers, experts
Upstream: none; verl has no CPU training path (the duplicate back-end string is verl's
    ``initialize_global_process_group_ray`` in ``verl/utils/distributed.py``).
Remove when: verl ships a CPU platform and a CPU rollout.
"""


from verl_ascend.core import settings
from verl_ascend.core.registry import Patch

ENV = settings.REHEARSE
NOT_REHEARSAL = f"not a rehearsal process ({ENV} unset)"
in_rehearsal = settings.in_rehearsal  # parsed with every other VERL_ASCEND* switch


def _gate(probe):
    def applies(module):
        if not in_rehearsal():
            return NOT_REHEARSAL
        return probe(module)

    return applies


# ---- platform ------------------------------------------------------------------------------------


def _platform_probe(module):
    from importlib.util import find_spec

    if find_spec("verl.plugin") is None or find_spec("verl.plugin.platform") is None:
        return "this verl has no platform registry (verl.plugin.platform)"
    return None


def _platform_apply(_verl):
    # On `import verl`: verl resolves its platform lazily, at the first get_platform() call, which
    # comes after the package import, so registering and selecting here is in time in every process.
    import verl.plugin.platform as module
    from verl.plugin.platform import platform_manager

    from .cpu_platform import NAME, PlatformCPU

    module.PlatformRegistry.register(platform=NAME)(PlatformCPU)

    if platform_manager._current_platform is None or platform_manager._current_platform.device_name != NAME:
        module.set_platform(PlatformCPU())
    return "platform 'cpu' registered and selected (device cpu, backend gloo, Ray resource GPU)"


# ---- process-group back-end string ---------------------------------------------------------------


def dedupe_backend(backend):
    """``"cpu:gloo,cpu:gloo"`` -> ``"cpu:gloo"``: the first entry per device type wins."""
    if not isinstance(backend, str) or "," not in backend:
        return backend
    seen, kept = set(), []
    for item in backend.split(","):
        device = item.split(":", 1)[0].strip() if ":" in item else item.strip()
        if device not in seen:
            seen.add(device)
            kept.append(item.strip())
    return ",".join(kept)


def _backend_probe(module):
    return None if callable(getattr(module, "init_process_group", None)) else "torch.distributed has no init_process_group"


def _backend_apply(module):
    from verl_ascend.core.marks import wrap

    def make(original):
        def init_process_group(*args, **kwargs):
            if "backend" in kwargs:
                kwargs["backend"] = dedupe_backend(kwargs["backend"])
            elif args:
                args = (dedupe_backend(args[0]),) + tuple(args[1:])
            return original(*args, **kwargs)

        return init_process_group

    wrap(module, "init_process_group", "rehearse_backend", make)
    return "init_process_group keeps the first back-end per device type"


# ---- FSDP2 offload pinning -----------------------------------------------------------------------


def _offload_probe(module):
    cls = getattr(module, "CPUOffloadPolicy", None)
    return None if cls is not None else "torch FSDP2 has no CPUOffloadPolicy here"


def _offload_apply(module):
    from verl_ascend.core.marks import wrap

    def make(original):
        def __init__(self, *args, **kwargs):
            original(self, *args, **kwargs)
            object.__setattr__(self, "pin_memory", False)  # pin_memory() needs an accelerator

        return __init__

    wrap(module.CPUOffloadPolicy, "__init__", "rehearse_offload", make)
    return "CPUOffloadPolicy(pin_memory=...) -> pin_memory=False"


# ---- rollout ---------------------------------------------------------------------------------------


def _rollout_probe(module):
    from importlib import import_module

    try:
        replica = import_module("verl.workers.rollout.replica")
        base = import_module("verl.workers.rollout.base")
    except ImportError as exc:
        return f"no rollout replica registry in this verl ({exc})"
    if not hasattr(replica, "RolloutReplicaRegistry") or not isinstance(getattr(base, "_ROLLOUT_REGISTRY", None), dict):
        return "this verl has no RolloutReplicaRegistry / _ROLLOUT_REGISTRY"
    return None


HF_MODULE = "verl_ascend.rehearse.loop.hf_rollout"


def _load_replica():
    from .hf_rollout import HFReplica

    return HFReplica


def _rollout_apply(module):
    # Names only: hf_rollout imports verl.workers.rollout itself, so importing it here (from that
    # package's import hook) would be circular. verl imports the classes when it builds them.
    from verl.workers.rollout import base, replica

    replica.RolloutReplicaRegistry.register("hf", _load_replica)
    base._ROLLOUT_REGISTRY[("hf", "async")] = f"{HF_MODULE}.HFServerAdapter"  # verl has no public setter
    return "rollout name 'hf' registered (replica + async adapter)"


def _report_apply(module):
    from .report import watch_checkpoints, watch_engines, watch_manager, watch_models

    if module.__name__ == MODEL_BLOCK:
        return watch_models(module)
    if module.__name__.startswith("verl.utils.checkpoint."):
        return watch_checkpoints(module)
    if module.__name__ == ENGINE_BASE:
        from .fault import arm

        return watch_engines(module) + arm()  # a training process: where a planted fault waits (fault.py)
    return watch_manager(module)


def _report_probe(module):
    if module.__name__ == MODEL_BLOCK:
        return None if isinstance(getattr(module, "TransformerBlock", None), type) else "no TransformerBlock here"
    if module.__name__.startswith("verl.utils.checkpoint."):
        found = [n for n in ("MegatronCheckpointManager", "FSDPCheckpointManager") if hasattr(module, n)]
        return None if found else f"no checkpoint manager class in {module.__name__}"
    if module.__name__ == ENGINE_BASE:
        return None if hasattr(module, "EngineRegistry") else "no EngineRegistry in this verl"
    return None if isinstance(getattr(module, "AgentLoopManager", None), type) else "no AgentLoopManager in this verl"


# ---- critic value model ------------------------------------------------------------------------------


def _value_head_probe(module):
    return None if callable(getattr(module, "load_valuehead_model", None)) else "no load_valuehead_model in this verl"


def _value_head_apply(module):
    from verl_ascend.core.marks import wrap

    def make(original):
        def load_valuehead_model(local_path, torch_dtype, model_config, trust_remote_code):
            # verl asks transformers for flash-attention 2 by name; on CPU the same token-classification model
            # (num_labels=1, as verl sets) is built with sdpa. Models without that head keep verl's own path.
            from transformers import AutoModelForTokenClassification

            try:
                return AutoModelForTokenClassification.from_pretrained(
                    pretrained_model_name_or_path=local_path, torch_dtype=torch_dtype, config=model_config,
                    attn_implementation="sdpa", trust_remote_code=trust_remote_code)
            except ValueError:  # no ...ForTokenClassification for this architecture
                return original(local_path, torch_dtype, model_config, trust_remote_code)

        return load_valuehead_model

    wrap(module, "load_valuehead_model", "rehearse_value_head", make)
    return "load_valuehead_model: the value model with attn_implementation=sdpa"


ENGINE_BASE = "verl.workers.engine.base"
MODEL_BLOCK = "megatron.core.transformer.transformer_block"
REPORT_TARGETS = ("verl.experimental.agent_loop.agent_loop", "verl.utils.checkpoint.megatron_checkpoint_manager",
                  "verl.utils.checkpoint.fsdp_checkpoint_manager", ENGINE_BASE, MODEL_BLOCK)

PATCHES = (
    Patch(name="rehearse_platform", targets=("verl",), applies=_gate(_platform_probe),
          apply=_platform_apply, doc=__doc__, summary="rehearsal only: verl platform 'cpu' (gloo, Ray GPU resource)"),
    Patch(name="rehearse_backend", targets=("torch.distributed",), applies=_gate(_backend_probe),
          apply=_backend_apply, doc=__doc__, summary="rehearsal only: no duplicate 'cpu:gloo' back-end entry"),
    Patch(name="rehearse_offload", targets=("torch.distributed.fsdp._fully_shard._fsdp_api",),
          applies=_gate(_offload_probe), apply=_offload_apply, doc=__doc__,
          summary="rehearsal only: FSDP2 CPUOffloadPolicy without pinned memory"),
    Patch(name="rehearse_rollout", targets=("verl.workers.rollout",), applies=_gate(_rollout_probe),
          apply=_rollout_apply, doc=__doc__, summary="rehearsal only: rollout 'hf' (transformers generate, Ray server)"),
    Patch(name="rehearse_value_head", targets=("verl.utils.model",), applies=_gate(_value_head_probe),
          apply=_value_head_apply, doc=__doc__,
          summary="rehearsal only: the critic's value model with sdpa attention (verl asks for flash-attn 2)"),
    Patch(name="rehearse_report", targets=REPORT_TARGETS, applies=_gate(_report_probe),
          apply=_report_apply, doc=__doc__,
          summary="rehearsal only: the loop says which rollout dispatch path runs and rollout_order's verdict"),
)
