"""What the converter needs from megatron-core and mbridge, asked before any work (nothing written).

Decided by what imports and what mbridge's API takes, not by version numbers; the versions go into
the message. Measured (docs/convert.md): megatron-core 0.13.0 to 0.16.x convert with mbridge 0.15.1;
megatron-core 0.12.x (MindSpeed core_r0.12.1 images, the field report's MindSpeed-RL 2.2.0) cannot,
because mbridge 0.15.1's model registry imports megatron's Transformer Engine extension, which 0.12
imports unguarded (``No module named 'transformer_engine'``), and mbridge 0.13 has another API.
"""

import inspect

from verl_ascend.core import platform

from .hf_source import ConvertError

MCORE_FLOOR = "0.13.0"  # pyproject's `megatron` extra says the same (tests/process/test_convert.py)
TESTED = "megatron-core 0.13.0 to 0.16.x with mbridge 0.15.1"
_FIX = (f"convert in a separate Python environment: `pip install 'verl-ascend[convert,megatron]'` (megatron-core "
        f">= {MCORE_FLOOR}). Leave the training image's megatron-core as it is (MindSpeed is built for it): the "
        "checkpoint is layout-free and loads there unchanged")


def check() -> None:
    """Raise ConvertError naming what is missing, the floor and the fix."""
    mcore = platform.installed_version("megatron-core")
    try:
        import megatron.core  # noqa: F401
    except Exception as exc:
        where = f"megatron-core {mcore} does not import" if mcore else "megatron-core is not installed"
        raise ConvertError(f"{where} ({type(exc).__name__}: {exc}); the converter needs megatron-core >= "
                           f"{MCORE_FLOOR} (tested: {TESTED}). Fix: {_FIX}.") from None
    try:
        from mbridge import AutoBridge
    except Exception as exc:  # ImportError, or whatever a half-matching megatron raises inside mbridge
        mb = platform.installed_version("mbridge")
        if not mb:
            raise ConvertError("mbridge is not installed (the converter takes its model knowledge from it). "
                               "Fix: `pip install 'verl-ascend[convert]'` (mbridge >= 0.15.1).") from None
        raise ConvertError(f"mbridge {mb} cannot be imported with megatron-core {mcore} ({type(exc).__name__}: "
                           f"{exc}); the converter needs megatron-core >= {MCORE_FLOOR} (tested: {TESTED}). "
                           f"Fix: {_FIX}.") from None
    params = inspect.signature(AutoBridge.from_config).parameters.values()
    if not any(p.name == "dtype" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params):  # 0.13: (hf_config) only
        raise ConvertError(f"mbridge {platform.installed_version('mbridge')} is older than the converter needs "
                           "(its AutoBridge.from_config takes no dtype). Fix: `pip install 'mbridge>=0.15.1'`.")
