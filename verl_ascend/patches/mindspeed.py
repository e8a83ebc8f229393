"""MindSpeed goes in before Megatron, and every Megatron worker hands its MindSpeed options to MindSpeed.

Why: on Ascend, verl's Megatron workers train through MindSpeed. ``mindspeed.megatron_adaptor``
    patches Megatron in place, so it must be imported before anything else imports Megatron, in
    every worker process. Options such as ``use_flash_attn`` or ``use_fused_rmsnorm`` reach it in
    ``override_transformer_config`` (verl's NPU CI passes
    ``+...override_transformer_config.use_flash_attn=True``). What MindSpeed does with them depends
    on its generation, found by feature detection (does the adaptor have ``repatch``?):
    - MindSpeed 2.2+ (2.2.0_core_r0.12.1, 2.3.0, 26.x, core_r0.1x, master; MindSpeed commit
      8b14ec4c added both at once): ``repatch(options)`` sets them on MindSpeed's process-global
      args and re-applies its patches, and a wrapper on ``TransformerConfig.__init__`` turns keys
      Megatron does not know into attributes. verl 0.6/0.7 call ``repatch`` in the actor worker
      only, so a critic or reward model in its own process trains without its options.
    - MindSpeed 2.0/2.1: neither exists; Megatron's ``TransformerConfig`` rejects the keys with a
      TypeError and there is no ``repatch`` to give them to.
How: on an Ascend host with MindSpeed installed (or in a ``verl-ascend rehearse`` process where MindSpeed
    is importable: the CPU rehearsal of an A2 recipe), after ``import verl``:
    - before the first ``import megatron``, import ``mindspeed.megatron_adaptor``;
    - legacy workers (``verl.workers.megatron_workers``, verl <= 0.7), per build of a worker's
      TransformerConfig: on 2.2+ the options stay as they are (MindSpeed's wrapper takes its keys)
      and ``repatch`` gets the whole dict unless verl already handed these values to it in this
      process; on 2.1 the keys that are not fields of Megatron's own config classes are dropped
      with one WARNING naming them and the MindSpeed version that accepts them;
    - engine workers (verl >= 0.8): on 2.2+ nothing to do (verl's ``MindspeedEngine`` calls
      ``repatch`` in every engine and MindSpeed's wrapper takes the keys); on 2.1 the same WARNING
      and the keys are kept out of ``TransformerConfig`` for the build and put back after.
    Megatron's fields are read from the config classes defined in ``megatron.*`` modules only:
    MindSpeed's generated subclasses carry a field per MindSpeed option.
    Beside MegatronAdaptor (``import megatron_adaptor``, the other Megatron-on-NPU stack, with
    TransformerEngine-NPU): when that module is imported (or being imported) in the process before a
    step acts, that process chose MegatronAdaptor, and every step stands down (reported, nothing
    imported or wrapped): MindSpeed's adaptor patched in beside it would change the same Megatron
    functions twice. Where nothing imported ``megatron_adaptor`` first, MindSpeed is wired as above;
    ``doctor``'s versions.megatron_path names both stacks when both are installed.
Upstream: verl ``workers/megatron_workers.py`` (repatch in ActorRolloutRefWorker only),
    ``workers/engine/mindspeed/transformer_impl.py``; MindSpeed ``megatron_adaptor.py``
    (``repatch``), ``core/megatron_basic/arguments_basic.py`` (``transformer_config_init_wrapper``).
Remove when: verl <= 0.7 and MindSpeed 2.1 are out of use (verl 0.8+ with MindSpeed 2.2+ needs
    only the import order, which verl 0.8+ also gets right in its engine package).
"""

import dataclasses
import importlib
import importlib.util
import inspect
import logging
import sys
import threading

from verl_ascend.core import megatron_path, platform, settings
from verl_ascend.core.marks import unwrap, wrap
from verl_ascend.core.registry import Patch, Step

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
_warned = set()  # dropped keys already logged in this process

NEW = "2.2+"
OLD = "<=2.1"
ACCEPTS = ("MindSpeed 2.2.0 (branch 2.2.0_core_r0.12.1) or later takes them through repatch; "
           "install it from source: git clone -b 2.2.0_core_r0.12.1 https://gitcode.com/Ascend/MindSpeed "
           "&& pip install -e MindSpeed")


def generation(adaptor=None) -> str:
    """NEW when MindSpeed's adaptor has ``repatch`` (its TransformerConfig wrapper came with it), else OLD."""
    if adaptor is None:  # imported before Megatron by the first step; import it if that step did not run
        adaptor = sys.modules.get(ADAPTOR) or importlib.import_module(ADAPTOR)
    return NEW if callable(getattr(adaptor, "repatch", None)) else OLD


def _defined_by_megatron(cls) -> bool:
    """True for a class a ``megatron.*`` module defines under its own name, not one made at run time."""
    module = sys.modules.get(getattr(cls, "__module__", "") or "")
    if module is None or not (module.__name__ == MEGATRON or module.__name__.startswith(MEGATRON + ".")):
        return False
    return getattr(module, cls.__qualname__, None) is cls


def megatron_fields() -> set:
    """Field names of Megatron's TransformerConfig and its Megatron-defined subclasses (e.g. MLA).

    MindSpeed 2.2+ builds a ``make_dataclass`` subclass of the config per build, with a field for
    every MindSpeed option; those subclasses (module ``types``/``mindspeed...``) are skipped.
    """
    from megatron.core.transformer import TransformerConfig

    try:  # the MLA config adds its own fields; make sure it is among the subclasses
        import megatron.core.transformer.transformer_config  # noqa: F401
    except ImportError:
        pass
    fields, todo, seen = set(), [TransformerConfig], set()
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        if dataclasses.is_dataclass(cls) and (cls is TransformerConfig or _defined_by_megatron(cls)):
            fields.update(f.name for f in dataclasses.fields(cls))
        todo.extend(c for c in cls.__subclasses__() if _defined_by_megatron(c))
    return fields


def split_options(options) -> tuple:
    """(Megatron fields, MindSpeed options) of an override_transformer_config mapping."""
    options = dict(options or {})
    known = megatron_fields()
    megatron = {k: v for k, v in options.items() if k in known}
    mindspeed = {k: v for k, v in options.items() if k not in known}
    return megatron, mindspeed


def _warn_dropped(keys) -> None:
    """One WARNING per key and process: MindSpeed 2.0/2.1 has nowhere to put it."""
    with _repatch_lock:
        new = sorted(set(keys) - _warned)
        _warned.update(new)
    if new:
        logger.warning(
            "MindSpeed here has no repatch (2.0/2.1) and Megatron's TransformerConfig does not take %s: "
            "dropped from override_transformer_config, the model trains without them. %s", ", ".join(new), ACCEPTS,
        )


# --- adaptor before Megatron --------------------------------------------------------------------

def _megatron_adaptor_chosen():
    """The reason every step stands down, when this process imports MegatronAdaptor's ``megatron_adaptor``."""
    if megatron_path.ADAPTOR_MODULE in sys.modules:
        return ("megatron_adaptor (MegatronAdaptor + TransformerEngine-NPU) was imported in this process: its path "
                "adapts Megatron here, MindSpeed's adaptor is not added beside it")
    return None


def _adaptor_applies(module):
    chosen = _megatron_adaptor_chosen()
    if chosen:
        return chosen
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


def _repatch(module, options: dict) -> None:
    """MindSpeed's repatch with these options, through verl's (recorded) name when verl has one."""
    found = getattr(module, "repatch", None)
    if callable(found):
        found(dict(options))
        return
    importlib.import_module(ADAPTOR).repatch(dict(options))
    with _repatch_lock:
        _repatched.append(dict(options))


def _legacy_applies(module):
    chosen = _megatron_adaptor_chosen()
    if chosen:
        return chosen
    worker = getattr(module, "MegatronWorker", None)
    if worker is None or not hasattr(worker, "_init_hf_config_and_tf_config"):
        return "this verl's megatron_workers has no MegatronWorker._init_hf_config_and_tf_config"
    if OPTIONS not in inspect.signature(worker._init_hf_config_and_tf_config).parameters:
        return f"MegatronWorker._init_hf_config_and_tf_config takes no {OPTIONS}"
    return None


def _split_before_build(module, gen: str):
    def make(original):
        signature = inspect.signature(original)

        def init_configs(self, *args, **kwargs):
            bound = signature.bind(self, *args, **kwargs)
            options = bound.arguments.get(OPTIONS) or {}
            megatron, mindspeed = split_options(options)
            if mindspeed and gen == NEW:
                # MindSpeed's TransformerConfig wrapper takes its keys; what may be missing in this
                # process (critic, reward model: verl calls repatch in the actor only) is repatch.
                if not _already_repatched(mindspeed):
                    _repatch(module, options)
            elif mindspeed:
                _warn_dropped(mindspeed)
                bound.arguments[OPTIONS] = megatron
            return original(*bound.args, **bound.kwargs)

        return init_configs

    return make


def _legacy_apply(module):
    gen = generation()
    if gen == NEW and callable(getattr(module, "repatch", None)):
        wrap(module, "repatch", NAME, _record_repatch)
    wrap(module.MegatronWorker, "_init_hf_config_and_tf_config", NAME, _split_before_build(module, gen))
    if gen == NEW:
        return ("MindSpeed 2.2+: every worker that builds a TransformerConfig hands its MindSpeed options to "
                "repatch (verl does it for the actor only); options left as they are for MindSpeed's "
                "TransformerConfig wrapper")
    return ("MindSpeed 2.0/2.1 (no repatch): MindSpeed-only keys are dropped from override_transformer_config "
            "with a WARNING naming them (Megatron would raise TypeError on them); MindSpeed 2.2+ accepts them")


# --- engine workers (verl >= 0.8) ---------------------------------------------------------------

def _engine_applies(module):
    chosen = _megatron_adaptor_chosen()
    if chosen:
        return chosen
    engine = getattr(module, "MegatronEngine", None)
    if engine is None or not hasattr(engine, "_build_tf_config"):
        return "this verl's Megatron engine has no MegatronEngine._build_tf_config"
    if generation() == NEW:
        return ("MindSpeed 2.2+ takes the keys itself: its TransformerConfig wrapper turns them into attributes "
                "and verl's MindspeedEngine hands them to repatch in every engine")
    return None


def _without_mindspeed_keys(original):
    def build_tf_config(self, *args, **kwargs):
        options = self.engine_config.override_transformer_config
        _, mindspeed = split_options(options)
        _warn_dropped(mindspeed)
        for key in mindspeed:
            options.pop(key)
        try:
            return original(self, *args, **kwargs)
        finally:  # verl reads them again later (fp8 weight reuse)
            for key, value in mindspeed.items():
                options[key] = value

    return build_tf_config


def _engine_apply(module):
    wrap(module.MegatronEngine, "_build_tf_config", NAME, _without_mindspeed_keys)
    return ("MindSpeed 2.0/2.1 (no repatch): TransformerConfig built without MindSpeed-only keys, dropped with "
            "a WARNING naming them (Megatron would raise TypeError on them); MindSpeed 2.2+ accepts them")


def _mindspeed_engine_applies(module):
    if not hasattr(module, "_mindspeed_repatch"):
        return ("this verl's MindspeedEngine calls repatch with use_flash_attn only and is not verl's default; "
                "not patched (use the legacy Megatron workers for MindSpeed options)")
    if generation() == NEW:
        return "verl registers MindspeedEngine for npu and passes override_transformer_config to repatch itself"
    return "MindSpeed 2.0/2.1 has no repatch, so verl's MindspeedEngine skips it; see the Megatron engine row"


# --- gate ---------------------------------------------------------------------------------------

def _applies(module):
    # A rehearsal (`verl-ascend rehearse`) is a CPU run of an A2 recipe: where MindSpeed is importable there,
    # the workers wire it as the A2 node would, so the rehearsal shows this patch at work.
    if not platform.is_ascend_host() and not settings.in_rehearsal():
        return platform.not_ascend_reason()
    try:
        found = importlib.util.find_spec("mindspeed") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return ("MindSpeed is not installed (Megatron workers on NPU need it; it is installed from source, "
                "`pip install mindspeed` is a placeholder: git clone -b 2.2.0_core_r0.12.1 "
                "https://gitcode.com/Ascend/MindSpeed && pip install -e MindSpeed)")
    return None


def _revert() -> None:
    """Take the worker wrappers off (the adaptor, once imported, stays: MindSpeed patched Megatron)."""
    legacy, engine = sys.modules.get(LEGACY), sys.modules.get(ENGINE)
    if legacy is not None:
        unwrap(legacy.MegatronWorker, "_init_hf_config_and_tf_config", NAME)
        if callable(getattr(legacy, "repatch", None)):
            unwrap(legacy, "repatch", NAME)
    if engine is not None:
        unwrap(engine.MegatronEngine, "_build_tf_config", NAME)


# Gated on `import verl`; each step then acts on its own module when that is imported.
PATCH = Patch(name=NAME, targets=(GATE,), applies=_applies, doc=__doc__, revert=_revert, steps=(
    Step(MEGATRON, applies=_adaptor_applies, apply=_adaptor_apply, before_import=True),
    Step(LEGACY, applies=_legacy_applies, apply=_legacy_apply),
    Step(ENGINE, applies=_engine_applies, apply=_engine_apply),
    Step(MINDSPEED_ENGINE, applies=_mindspeed_engine_applies),  # reports only: verl's own engine does the work
))
