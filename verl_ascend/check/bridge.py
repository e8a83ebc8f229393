"""Which HF<->Megatron bridge a Megatron recipe imports, and whether it is installed here.

verl builds Megatron models from the HF config through a bridge when ``megatron.use_mbridge`` is on
(the engine workers require it). verl releases that have ``megatron.vanilla_mbridge`` default it to
False, which selects NVIDIA's Megatron-Bridge (``import megatron.bridge``, package
``megatron-bridge``); True selects the older ``mbridge`` package, the only bridge of verls without
the key (``verl/workers/engine/megatron/transformer_impl.py``, ``verl/workers/config/engine.py``).
The choice is read from the composed config, so a verl without the key is recognised by its absence,
not by its version. A bridge missing here fails every Megatron worker at start-up where the cluster's
environment matches this one.
"""

from omegaconf import OmegaConf

from verl_ascend.core.findings import ERROR, INFO, WARNING, finding
from verl_ascend.core.platform import importable
from verl_ascend.recipe.layout import ARR, get

# import name -> (distribution to install, what it is)
BRIDGES = {"mbridge": ("mbridge", "mbridge"), "megatron.bridge": ("megatron-bridge", "NVIDIA Megatron-Bridge")}


def chosen(cfg, role: str):
    """(import name, the vanilla_mbridge key or None when this verl has none) for a Megatron role."""
    key = f"{ARR}.{role}.megatron.vanilla_mbridge"
    value = OmegaConf.select(cfg, key)
    if value is None:
        return "mbridge", None
    return ("mbridge" if bool(value) else "megatron.bridge"), key


# verl's Megatron engine refuses to build without a bridge (verl 0.9.1: verl/workers/engine/megatron/transformer_impl.py,
# `assert self.engine_config.use_mbridge, "use_mbridge must be True"`); read from the installed source, not a version
ENGINE_ASSERT = "use_mbridge must be True"


def engine_requires_bridge() -> bool:
    """Does the installed verl's Megatron engine assert ``use_mbridge``? (False when it cannot be read.)"""
    from verl_ascend.core import verl_install

    root = verl_install.package_dir()
    path = root / "workers" / "engine" / "megatron" / "transformer_impl.py" if root else None
    try:
        return bool(path) and ENGINE_ASSERT in path.read_text(errors="replace")
    except OSError:
        return False


def findings(ctx) -> list:
    """The bridge rule over a rules.Context."""
    cfg = ctx.cfg
    out, seen = [], set()
    for lay in ctx.layouts():
        if lay.is_megatron and ctx.engine_workers and not get(cfg, lay.key("use_mbridge"), True) \
                and engine_requires_bridge():
            out.append(finding("bridge", ERROR, (lay.key("use_mbridge"),),
                               f"{lay.role}: {lay.key('use_mbridge')}=False, but this verl's Megatron engine builds its "
                               "models only through a bridge: every Megatron worker fails at start-up with "
                               f"AssertionError: {ENGINE_ASSERT} (verl/workers/engine/megatron/transformer_impl.py)",
                               f"remove {lay.key('use_mbridge')}=False (verl's default is True); initial weights from "
                               "megatron.dist_checkpointing_path still load with use_dist_checkpointing=True"))
            continue
        if not lay.is_megatron or not get(cfg, lay.key("use_mbridge"), False):
            continue
        module, key = chosen(cfg, lay.role)
        if module in seen:  # the ref follows the actor's choice by default: one finding per bridge
            continue
        seen.add(module)
        dist, what = BRIDGES[module]
        keys = (lay.key("use_mbridge"),) + ((key,) if key else ())
        how = f"{key}={get(cfg, key)}" if key else "this verl has no vanilla_mbridge switch"
        if importable(module):
            out.append(finding("bridge", INFO, keys, f"{lay.role}: the Megatron workers import {what} "
                               f"(`import {module}`; {how}); installed here"))
            continue
        fix = f"pip install {dist}"
        if key:  # this verl can switch to the other bridge
            other = "megatron.bridge" if module == "mbridge" else "mbridge"
            there = "installed here" if importable(other) else f"pip install {BRIDGES[other][0]}"
            fix += f", or set {key}={module != 'mbridge'} to use {BRIDGES[other][1]} ({there})"
        out.append(finding("bridge", WARNING, keys,
                           f"{lay.role}: the Megatron workers import {what} (`import {module}`; {how}), which is not "
                           "installed in this environment: where the cluster's environment matches this one, every "
                           "Megatron worker fails at start-up with ModuleNotFoundError", fix))
    return out
