"""MindSpeed goes in before Megatron, and MindSpeed-only options go to MindSpeed, not Megatron.

Why: on Ascend, verl's Megatron workers train through MindSpeed. ``mindspeed.megatron_adaptor``
    patches Megatron in place, so it must be imported before anything else imports Megatron, in
    every worker process. Options such as ``use_flash_attn``, ``use_fused_rmsnorm``,
    ``use_fused_swiglu``, ``use_fused_rotary_pos_emb`` (the Qwen3-235B recipe, seed 003, passes
    ``+...override_transformer_config.use_flash_attn=True``) are MindSpeed switches, yet verl feeds
    the whole ``override_transformer_config`` into Megatron's ``TransformerConfig`` through mbridge,
    which rejects unknown fields (TypeError). verl 0.6.x calls ``repatch`` only in the actor worker;
    critic and reward-model processes never hand their options to MindSpeed.
How: on an Ascend host with MindSpeed installed, after ``import verl``:
    - before the first ``import megatron``, import ``mindspeed.megatron_adaptor``;
    - split ``override_transformer_config`` by the fields of the installed ``TransformerConfig``
      dataclass (and its subclasses, e.g. MLA): legacy workers (``verl.workers.megatron_workers``,
      verl <= 0.7) build the config from the Megatron part and, when verl has not already passed
      the MindSpeed options to ``repatch`` in this process, call it with the full dict first (its
      ``repatch`` rebuilds MindSpeed's arguments from defaults, so Megatron values such as
      ``context_parallel_size`` must come along); engine workers (verl >= 0.8) build
      ``TransformerConfig`` with the MindSpeed keys taken out of the engine config and put back after.
    What verl already does is left alone and shown as "not applicable" with the reason: verl 0.8+
    registers ``MindspeedEngine`` for ``npu`` and passes the options to ``repatch`` itself.
Upstream: verl ``workers/megatron_workers.py`` (repatch in ActorRolloutRefWorker only),
    ``workers/engine/mindspeed/transformer_impl.py``; mbridge ``set_extra_args``.
Remove when: verl filters override_transformer_config by TransformerConfig fields and calls
    repatch in every Megatron worker.
"""

import dataclasses
import importlib
import importlib.util
import inspect
import logging
import threading

from .. import hooks, platform, registry
from ..registry import Patch
from ._util import wrap

NAME = "mindspeed"
GATE = "verl"
ADAPTOR = "mindspeed.megatron_adaptor"
MEGATRON = "megatron"
LEGACY = "verl.workers.megatron_workers"
ENGINE = "verl.workers.engine.megatron.transformer_impl"
MINDSPEED_ENGINE = "verl.workers.engine.mindspeed.transformer_impl"
OPTIONS = "override_transformer_config"
logger = logging.getLogger("verl_ascend")

_repatched = []  # options dicts MindSpeed's repatch has seen in this process
_repatch_lock = threading.Lock()


def megatron_fields() -> set:
    """Field names of the installed TransformerConfig and every subclass imported so far."""
    from megatron.core.transformer import TransformerConfig

    try:  # the MLA config adds its own fields; make sure it is among the subclasses
        import megatron.core.transformer.transformer_config  # noqa: F401
    except ImportError:
        pass
    fields, todo = set(), [TransformerConfig]
    while todo:
        cls = todo.pop()
        if dataclasses.is_dataclass(cls):
            fields.update(f.name for f in dataclasses.fields(cls))
        todo.extend(cls.__subclasses__())
    return fields


def split_options(options) -> tuple:
    """(Megatron fields, MindSpeed options) of an override_transformer_config mapping."""
    options = dict(options or {})
    known = megatron_fields()
    megatron = {k: v for k, v in options.items() if k in known}
    mindspeed = {k: v for k, v in options.items() if k not in known}
    if mindspeed:
        logger.info("override_transformer_config: %s go to MindSpeed's repatch, not TransformerConfig", sorted(mindspeed))
    return megatron, mindspeed


# --- adaptor before Megatron --------------------------------------------------------------------

def _adaptor_applies(module):
    if module is not None:
        reason = (
            "megatron was imported before verl, too early to put mindspeed.megatron_adaptor first; "
            "import mindspeed.megatron_adaptor at the top of that script"
        )
        logger.warning("verl-ascend: %s", reason)
        return reason
    return None


def _adaptor_apply(module):
    importlib.import_module(ADAPTOR)
    return "imported mindspeed.megatron_adaptor before megatron"


# --- legacy megatron_workers (verl <= 0.7) ------------------------------------------------------

def _record_repatch(original):
    def recording_repatch(options, *args, **kwargs):
        with _repatch_lock:
            _repatched.append(dict(options or {}))
        return original(options, *args, **kwargs)

    return recording_repatch


def _already_repatched(mindspeed: dict) -> bool:
    with _repatch_lock:
        return any(all(k in seen and seen[k] == v for k, v in mindspeed.items()) for seen in _repatched)


def _repatch_function(module):
    found = getattr(module, "repatch", None)
    if found is None:
        found = importlib.import_module(ADAPTOR).repatch
    return found


def _legacy_applies(module):
    worker = getattr(module, "MegatronWorker", None)
    if worker is None or not hasattr(worker, "_init_hf_config_and_tf_config"):
        return "this verl's megatron_workers has no MegatronWorker._init_hf_config_and_tf_config"
    if OPTIONS not in inspect.signature(worker._init_hf_config_and_tf_config).parameters:
        return f"MegatronWorker._init_hf_config_and_tf_config takes no {OPTIONS}"
    return None


def _split_before_build(module):
    def make(original):
        signature = inspect.signature(original)

        def init_configs(self, *args, **kwargs):
            bound = signature.bind(self, *args, **kwargs)
            options = bound.arguments.get(OPTIONS) or {}
            megatron, mindspeed = split_options(options)
            if mindspeed:
                if not _already_repatched(mindspeed):
                    _repatch_function(module)(dict(options))
                bound.arguments[OPTIONS] = megatron
            return original(*bound.args, **bound.kwargs)

        return init_configs

    return make


def _legacy_apply(module):
    if getattr(module, "repatch", None) is not None:
        wrap(module, "repatch", NAME, _record_repatch)
    wrap(module.MegatronWorker, "_init_hf_config_and_tf_config", NAME, _split_before_build(module))
    return "TransformerConfig gets Megatron fields only; every worker hands MindSpeed options to repatch"


# --- engine workers (verl >= 0.8) ---------------------------------------------------------------

def _engine_applies(module):
    engine = getattr(module, "MegatronEngine", None)
    if engine is None or not hasattr(engine, "_build_tf_config"):
        return "this verl's Megatron engine has no MegatronEngine._build_tf_config"
    return None


def _without_mindspeed_keys(original):
    def build_tf_config(self, *args, **kwargs):
        options = self.engine_config.override_transformer_config
        _, mindspeed = split_options(options)
        for key in mindspeed:
            options.pop(key)
        try:
            return original(self, *args, **kwargs)
        finally:  # verl reads them again later (repatch, fp8 weight reuse)
            for key, value in mindspeed.items():
                options[key] = value

    return build_tf_config


def _engine_apply(module):
    wrap(module.MegatronEngine, "_build_tf_config", NAME, _without_mindspeed_keys)
    return "TransformerConfig built without MindSpeed options"


def _mindspeed_engine_applies(module):
    if hasattr(module, "_mindspeed_repatch"):
        return "verl registers MindspeedEngine for npu and passes override_transformer_config to repatch itself"
    return (
        "this verl's MindspeedEngine calls repatch with use_flash_attn only and is not verl's default; "
        "not patched (use the legacy Megatron workers for MindSpeed options)"
    )


_STEPS = {
    MEGATRON: Patch(name=NAME, targets=(MEGATRON,), applies=_adaptor_applies, apply=_adaptor_apply),
    LEGACY: Patch(name=NAME, targets=(LEGACY,), applies=_legacy_applies, apply=_legacy_apply),
    ENGINE: Patch(name=NAME, targets=(ENGINE,), applies=_engine_applies, apply=_engine_apply),
    MINDSPEED_ENGINE: Patch(name=NAME, targets=(MINDSPEED_ENGINE,), applies=_mindspeed_engine_applies, apply=None),
}


def _step_callback(target):
    return lambda module: registry.apply_to(_STEPS[target], target, module)


# --- gate ---------------------------------------------------------------------------------------

def _applies(module):
    if not platform.is_ascend_host():
        return platform.not_ascend_reason()
    try:
        found = importlib.util.find_spec("mindspeed") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return "MindSpeed is not installed (Megatron workers on NPU need it: pip install mindspeed)"
    return None


def _apply(module):
    hooks.before_import(MEGATRON, _step_callback(MEGATRON))
    for target in (LEGACY, ENGINE, MINDSPEED_ENGINE):
        hooks.when_imported(target, _step_callback(target))
    return "watching megatron and verl's Megatron workers (see the rows below)"


PATCH = Patch(name=NAME, targets=(GATE,), applies=_applies, apply=_apply, doc=__doc__)
