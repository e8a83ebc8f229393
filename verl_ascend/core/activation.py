"""Activation: arm the plugin at interpreter start, load the patches when a patched module appears.

``verl_ascend.pth`` runs :func:`from_pth` in every Python process of the environment (drivers,
Ray workers, torchrun children, but also pip and the ``ray`` CLI). That must cost next to nothing,
so it only reads ``VERL_ASCEND`` and registers a post-import callback for each module some patch
targets (the names below are strings; no patch code is imported). The first time one of those
modules finishes importing, :func:`activate` imports the registry and every patch and installs
them; from then on the registry's own callbacks do the work. verl's entry point (``plugin.py``,
verl >= 0.9) and ``verl-ascend status`` call :func:`activate` directly.

Never raises: a broken plugin may cost the user a patch, never ``import verl``.
"""

from verl_ascend.core import hooks, settings

# Patch name -> (module holding its PATCH record(s), the modules whose import triggers it).
# Kept as strings so start-up imports no patch code; tests/unit/test_layers.py checks it against
# the records themselves.
PATCHES = {
    "device": ("verl_ascend.patches.device", ("verl.utils.device",)),
    "expandable_segments": ("verl_ascend.patches.expandable_segments", ("verl.utils.device",)),
    "ckpt_validation": ("verl_ascend.patches.ckpt_validation", (
        "torch.distributed._shard.sharding_spec._internals",
        "torch.distributed.checkpoint.default_planner",
        "torch.distributed.checkpoint.planner_helpers")),
    "ray_runtime_env": ("verl_ascend.patches.ray_runtime_env", ("ray",)),
    "trainer_device": ("verl_ascend.patches.trainer_device", ("verl.trainer.ppo.ray_trainer",)),
    "deadline_save": ("verl_ascend.patches.deadline_save", ("verl.trainer.ppo.v1.trainer_base",)),
    "torch_npu_save": ("verl_ascend.patches.torch_npu_save", ("torch",)),
    "tensordict_sync": ("verl_ascend.patches.tensordict_sync", ("verl",)),
    "mindspeed": ("verl_ascend.patches.mindspeed", ("verl",)),
    "rollout_order": ("verl_ascend.patches.rollout_order", (
        "verl.experimental.agent_loop.agent_loop", "verl.single_controller.ray.base")),
    # CPU-only fixes of `verl-ascend rehearse`, inert elsewhere (verl_ascend/rehearse/loop/runtime.py)
    "rehearse_platform": ("verl_ascend.rehearse.loop.runtime", ("verl",)),
    "rehearse_backend": ("verl_ascend.rehearse.loop.runtime", ("torch.distributed",)),
    "rehearse_offload": ("verl_ascend.rehearse.loop.runtime", ("torch.distributed.fsdp._fully_shard._fsdp_api",)),
    "rehearse_rollout": ("verl_ascend.rehearse.loop.runtime", ("verl.workers.rollout",)),
    "rehearse_value_head": ("verl_ascend.rehearse.loop.runtime", ("verl.utils.model",)),
    "rehearse_report": ("verl_ascend.rehearse.loop.runtime", (
        "verl.experimental.agent_loop.agent_loop", "verl.utils.checkpoint.megatron_checkpoint_manager",
        "verl.utils.checkpoint.fsdp_checkpoint_manager", "verl.workers.engine.base",
        "megatron.core.transformer.transformer_block")),
    # ... and the ones verl's Megatron engine needs on a CPU host (verl_ascend/rehearse/loop/mcore/)
    "rehearse_mcore_cuda": ("verl_ascend.rehearse.loop.mcore", (
        "megatron.core.tensor_parallel.layers", "megatron.core.tensor_parallel.mappings",
        "megatron.core.models.common.embeddings.rotary_pos_embedding",
        "megatron.core.models.common.language_module.language_module",
        "megatron.core.distributed.param_and_grad_buffer", "megatron.core.utils",
        "megatron.core.pipeline_parallel.p2p_communication", "megatron.core.pipeline_parallel.schedules",
        "megatron.core.optimizer.optimizer", "megatron.core.optimizer.distrib_optimizer",
        "megatron.core.optimizer.clip_grads", "megatron.core.dist_checkpointing.strategies.state_dict_saver",
        "megatron.core.dist_checkpointing.strategies.filesystem_async", "mbridge.core.util",
        "megatron.core.transformer.moe.router", "megatron.core.transformer.moe.experts",
        "megatron.core.transformer.moe.token_dispatcher", "megatron.core.transformer.moe.moe_utils",
        "megatron.core.transformer.moe.shared_experts")),
    "rehearse_mcore_rng": ("verl_ascend.rehearse.loop.mcore", ("megatron.core.tensor_parallel.random",)),
    "rehearse_mcore_spec": ("verl_ascend.rehearse.loop.mcore", ("mbridge.core.llm_bridge", "mbridge.core.bridge")),
    "rehearse_mcore_attention": ("verl_ascend.rehearse.loop.mcore", ("megatron.core.transformer.dot_product_attention",)),
    "rehearse_mcore_optimizer": ("verl_ascend.rehearse.loop.mcore", (
        "megatron.core.optimizer.distrib_optimizer", "megatron.core.optimizer.optimizer",
        "megatron.core.optimizer.clip_grads")),
    "rehearse_mcore_norm": ("verl_ascend.rehearse.loop.mcore", ("megatron.core.transformer.torch_norm",)),
    "rehearse_mcore_moe": ("verl_ascend.rehearse.loop.mcore", ("megatron.core.transformer.moe.moe_utils",
                                                         "megatron.core.transformer.moe.token_dispatcher")),
}

_state = {"active": False, "armed": False, "sources": [], "disabled_by_env": False}


def triggers() -> list:
    return sorted({target for _, targets in PATCHES.values() for target in targets})


def records() -> list:
    """Every patch record, in the table's order (imports the patch modules)."""
    import importlib

    out, seen = [], set()
    for name, (module_name, _) in PATCHES.items():
        module = importlib.import_module(module_name)
        for record in getattr(module, "PATCHES", None) or [module.PATCH]:
            if record.name == name and name not in seen:
                seen.add(name)
                out.append(record)
    return out


def activate(source: str = "manual") -> bool:
    """Install every patch behind the post-import hook, once per process.

    Returns True when the plugin is active after the call.
    """
    try:
        if source not in _state["sources"]:
            _state["sources"].append(source)
        if _state["active"]:
            return True
        if not settings.enabled():
            _state["disabled_by_env"] = True
            return False
        _state["active"] = True  # before installing: patch callbacks may import other triggers
        from verl_ascend.core import registry, support

        registry.install(records())
        support.watch()  # one WARNING when the imported verl is outside the supported range
        return True
    except Exception:  # never let activation break the host process
        _state["active"] = False
        import logging

        logging.getLogger("verl_ascend").warning("verl-ascend: activation failed", exc_info=True)
        return False


def _on_trigger(_module) -> None:
    activate(source="pth")


def activation_info() -> dict:
    return {
        "active": _state["active"],
        "armed": _state["armed"],
        "sources": list(_state["sources"]),
        "disabled_by_env": _state["disabled_by_env"],
    }


def from_pth() -> None:
    """Interpreter start: arm the triggers (no patch code is imported until one fires)."""
    try:
        if not settings.enabled():
            _state["disabled_by_env"] = True
            return
        for target in triggers():
            hooks.when_imported(target, _on_trigger)
        _state["armed"] = True
    except Exception:
        pass  # the .pth must never break an interpreter
