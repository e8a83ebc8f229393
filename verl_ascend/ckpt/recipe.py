"""A checkpoint against the recipe that will resume it: world size and parallel layout.

Facts used (public): FSDP files are named by world size, so any change of it fails at load
(verl issue #2265); Megatron's default distributed-optimizer format ``dp_reshardable`` survives a
change of data-parallel size only, ``fully_reshardable`` any layout change (Megatron-LM PR #7162;
verl ``dist_ckpt_optim_fully_reshardable``); ``dp_reshardable`` with MoE models whose experts hold
uneven parameters fails with "Cannot merge two lists with different lengths" (radixark/Megatron-LM
PR #66).
"""

from verl_ascend.core.findings import ERROR, INFO, WARNING, BadInput, Finding

_NAMES = {"tensor": "TP", "pipeline": "PP", "expert": "EP", "cp": "CP"}


class BadRecipe(BadInput):
    """--recipe cannot be read here: no such file, no trainer call, a config verl refuses, no sandbox, no verl."""


def planned(recipe: str) -> dict:
    """World size and actor layout of the recipe, read the way `check` reads it (sandboxed)."""
    import importlib.util
    import os

    from ..recipe import compose, extract, sandbox
    from ..recipe.layout import get, train_layout, world_size

    if not os.path.isfile(recipe):
        raise BadRecipe(f"--recipe {recipe}: no such file; pass the launch script that will resume")
    if importlib.util.find_spec("verl") is None:
        raise BadRecipe(f"--recipe {recipe}: verl is not installed here, so its config cannot be composed; "
                        "run ckpt check where verl is installed, or leave --recipe out")
    try:
        got = extract.extract(recipe)
    except sandbox.Unavailable as exc:  # this host cannot read a recipe safely; nothing of it ran
        raise BadRecipe(f"--recipe {recipe}: {exc}") from None
    if got.launch is None:
        raise BadRecipe(f"--recipe {recipe}: " + ("; ".join(f.message for f in got.findings) or "no trainer call found"))
    composed = compose.compose_launch(got.launch)
    if composed.config is None:
        raise BadRecipe(f"--recipe {recipe}: " + "; ".join(f.message for f in composed.findings))
    cfg = composed.config
    lay = train_layout(cfg, "actor")
    return {"world_size": world_size(cfg), "strategy": lay.strategy,
            "parallel": {"tensor": lay.tp, "pipeline": lay.pp, "expert": lay.ep, "cp": lay.cp},
            "fully_reshardable": bool(get(cfg, "actor_rollout_ref.actor.megatron.dist_ckpt_optim_fully_reshardable",
                                          False))}


def compare(roles: list, plan: dict) -> list:
    out = []
    for role in roles:
        if role.world_size is None:
            continue
        where = str(role.path)
        if role.kind == "fsdp":
            if role.world_size != plan["world_size"]:
                out.append(Finding(ERROR, where, f"saved by {role.world_size} FSDP ranks, the recipe runs "
                                   f"{plan['world_size']}: verl looks for *_world_size_{plan['world_size']}_rank_*.pt "
                                   "and fails with FileNotFoundError", f"resume on {role.world_size} NPUs (trainer.nnodes "
                                   "x n_gpus_per_node), or start from the HF export with a new run"))
            continue
        if role.kind != "megatron" or not role.parallel:
            continue
        changed = {k: (role.parallel[k], plan["parallel"][k]) for k in _NAMES if role.parallel[k] != plan["parallel"][k]}
        what = ", ".join(f"{_NAMES[k]} {a} -> {b}" for k, (a, b) in changed.items())
        sharding = role.optim_sharding or "unknown (common.pt not readable)"
        if changed and role.optim_sharding != "fully_reshardable":
            out.append(Finding(ERROR, where, f"{role.name}: the recipe changes the parallel layout ({what}); the "
                               f"optimizer was saved as {sharding}, which only survives a change of data-parallel size",
                               "resume with the saved layout, or save once with actor.megatron."
                               "dist_ckpt_optim_fully_reshardable=True before changing it"))
        elif changed:
            out.append(Finding(INFO, where, f"{role.name}: layout changes ({what}); the optimizer was saved fully "
                               "reshardable, so Megatron can redistribute it"))
        elif role.world_size != plan["world_size"]:
            out.append(Finding(INFO, where, f"{role.name}: world size {role.world_size} -> {plan['world_size']} with "
                               "the same TP/PP/EP/CP: only the data-parallel size changes, which the saved format "
                               "allows"))
        if role.moe and role.optim_sharding in (None, "dp_reshardable") and (changed or role.world_size !=
                                                                            plan["world_size"]):
            out.append(Finding(WARNING, where, f"{role.name}: MoE model with a dp_reshardable optimizer and a new "
                               "layout: uneven expert parameters can fail with 'Cannot merge two lists with "
                               "different lengths'", "resume with the saved layout, or save fully reshardable first"))
    return out
