"""How a Megatron recipe runs in the rehearsal: the engine verl composes, the scaled layout, the converted weights.

:func:`compose` composes the recipe's config as ``check`` does (the ``model_engine`` group, the config
name and ``actor.strategy`` decide the engine: :func:`.overrides.engine_of`);
:func:`megatron_layout` scales it (:mod:`.layout`); :func:`_megatron` picks the bridge and where the converted
tiny model goes (the conversion itself is a step of the run: ``run/steps.py``).
"""

import os
from pathlib import Path

from verl_ascend.core import megatron_path, platform
from verl_ascend.rehearse.plan import overrides as plan_mod

# A CPU run even on an Ascend node: torch does not load torch_npu by itself and the NPU patches stand aside
# (gloo, not HCCL; MindSpeed's adaptor still imports torch_npu, as it does on the node).
CPU_RUN = {"VERL_ASCEND_DEVICE": "cpu", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}


class ConvertFailed(Exception):
    """Our converter failed on the rehearsal's tiny model: the rehearsal fails (exit 1) with its last lines."""


class EngineError(Exception):
    """The recipe's config does not compose, or its layout cannot be scaled: rehearse exits 2 with this."""


def engine_error(message: str) -> EngineError:
    return EngineError(message)


def bridge_of(cfg) -> tuple:
    """(import name, package, how it is chosen) of the bridge verl builds the recipe's Megatron models through.

    verl >= 0.8: ``megatron.vanilla_mbridge`` True selects mbridge, False (verl's default) NVIDIA
    Megatron-Bridge; a verl without the key has mbridge only (verl/workers/engine/megatron/transformer_impl.py)."""
    from omegaconf import OmegaConf

    key = "actor_rollout_ref.actor.megatron.vanilla_mbridge"
    value = OmegaConf.select(cfg, key, default=None)
    if value is None:
        return "mbridge", "mbridge", "this verl has no vanilla_mbridge switch"
    module = "mbridge" if bool(value) else "megatron.bridge"
    return module, "mbridge" if value else "megatron-bridge", f"{key}={value}"


def check_bridge(cfg) -> tuple:
    """:func:`bridge_of`, or EngineError when that bridge is not importable here: the rehearsal runs the cluster's
    import as the recipe chose it, never another bridge in its place."""
    module, package, how = bridge_of(cfg)
    if not platform.importable(module):
        raise engine_error(f"the recipe's Megatron workers import {module} ({how}), which is not installed here. "
                           f"Fix: pip install {package}, or choose the bridge this environment has (MEGATRON_BRIDGE=mbridge "
                           "for our recipes; --override actor_rollout_ref.actor.megatron.vanilla_mbridge=True)")
    return module, package, how


def _megatron(cfg, overrides, layout, model_dir: Path, mcore_dir: Path, given=(), mindspeed: str = "", convert=None):
    """How the Megatron recipe runs here: the scaled layout, initial weights (converted), the recipe's bridge.

    ``given``: the user's own ``--override`` items; where they name every loading role's
    ``dist_checkpointing_path`` and each path is on this machine, those weights are used and nothing is
    converted (a path of the cluster's, absent here, is replaced like the recipe's own). ``convert(model_dir,
    output)`` makes the dist checkpoint (``run/steps.convert_tiny_model``)."""
    module, _, how = check_bridge(cfg)
    loading = [role for role in plan_mod.ROLES
               if plan_mod.is_true(overrides, f"actor_rollout_ref.{role}.megatron.use_dist_checkpointing")]
    named = {role for role in loading
             if os.path.exists(str(plan_mod.value_of(given, f"actor_rollout_ref.{role}.megatron.dist_checkpointing_path")
                                   or ""))}
    dist_ckpt = str(mcore_dir) if loading and set(loading) - named else ""
    if dist_ckpt:
        convert(model_dir, dist_ckpt)
    return plan_mod.Megatron(layout=layout, dist_ckpt=dist_ckpt, weights_given=bool(loading) and not dist_ckpt,
                             bridge=f"{module} ({how})", ref_own_transformer_config=_ref_own(overrides),
                             mindspeed=mindspeed)


def _ref_own(overrides) -> bool:
    return any(plan_mod.split(item)[1].startswith("actor_rollout_ref.ref.megatron.override_transformer_config")
               for item in overrides)


def compose(launch, overrides):
    """The config verl composes from the recipe (and --override), as `check` composes it; exit 2 when it cannot."""
    import dataclasses

    from verl_ascend.recipe import compose as compose_mod

    composed = compose_mod.compose_launch(dataclasses.replace(launch, overrides=list(overrides)),
                                          verl_src=launch.env.get("VERL_SRC") if launch.env else None)
    if composed.config is None:
        why = "; ".join(f.message for f in composed.findings) or "unknown error"
        raise engine_error(f"verl's config does not compose from this recipe ({why}); main_ppo would stop there too")
    return composed.config


def megatron_layout(cfg, overrides, nproc: int, real: dict, mindspeed: str):
    """The recipe's Megatron layout scaled to ``nproc`` ranks and the fewest tiny-model layers it needs."""
    from verl_ascend.rehearse.plan import assets, layout

    experts = assets.tiny_experts(real)["num_experts"] if assets.is_moe(real) else 0
    fields = None if mindspeed else megatron_path.transformer_config_fields()
    try:
        return layout.plan(cfg, nproc, real_layers=int(real.get("num_hidden_layers") or 2), experts=experts,
                           fields=fields, mindspeed=bool(mindspeed), ref_own_transformer=_ref_own(overrides),
                           recipe_keys={plan_mod.split(item)[1] for item in overrides})
    except ValueError as exc:
        raise engine_error(f"the recipe's Megatron layout cannot be scaled to {nproc} CPU rank(s): {exc}") from None


def moe_note(built: dict) -> str:
    if not built["moe"]:
        return ""
    return f", MoE kept: {built['experts']} experts, top-{built['top_k']} routing (the recipe's top-k)"


def mindspeed_here() -> str:
    """MindSpeed's version when main_ppo's workers can import it (same interpreter and path as here), else ''."""
    if not platform.importable("mindspeed"):
        return ""
    # a source checkout on PYTHONPATH (how MindSpeed is installed) has no installed-package record
    return platform.installed_version("mindspeed") or "of unrecorded version"
