"""Switch ``trainer.device`` from ``cuda`` to ``npu`` on Ascend hosts for verl <= 0.6.

Why: ``trainer.device`` defaults to ``cuda``. verl 0.7.0+ calls ``auto_set_device`` in main_ppo;
    0.6.x does not, so the trainer asks Ray for ``GPU`` bundles on an NPU cluster and waits
    forever unless every recipe remembers ``trainer.device=npu``.
How: wraps ``RayPPOTrainer.__init__`` (DAPO's trainer inherits it) to set ``trainer.device=npu``
    and ``device_name='npu'`` where they say ``cuda``; ``cpu`` and ``npu`` are left alone.
    ``main_ppo`` runs as ``__main__``, so its own functions cannot be patched.
Upstream: ``auto_set_device`` (verl 0.7.0).
Remove when: verl 0.6.x is no longer supported.
"""

import logging

from verl_ascend.core import platform
from verl_ascend.core.marks import method_patch
from verl_ascend.core.registry import Patch

NAME = "trainer_device"
TARGET = "verl.trainer.ppo.ray_trainer"
logger = logging.getLogger("verl_ascend")


def _applies(module):
    import verl.utils.device as device

    if hasattr(device, "auto_set_device"):
        return "verl calls auto_set_device itself (0.7.0+)"
    if not platform.is_ascend_host():
        return platform.not_ascend_reason()
    if not hasattr(module, "RayPPOTrainer"):
        return "verl.trainer.ppo.ray_trainer has no RayPPOTrainer"
    return None


def to_npu(config) -> bool:
    """Set ``config.trainer.device`` to ``npu`` when it says ``cuda``; True when changed."""
    trainer = config.get("trainer") if hasattr(config, "get") else None
    if trainer is None or trainer.get("device", "cuda") != "cuda":
        return False
    trainer.device = "npu"
    return True


def _wrap_init(original):
    def __init__(self, config, *args, **kwargs):
        if to_npu(config):
            logger.warning("trainer.device was 'cuda' on an Ascend host; using 'npu'")
        if kwargs.get("device_name") == "cuda":
            kwargs["device_name"] = "npu"
        return original(self, config, *args, **kwargs)

    return __init__


_apply, _revert = method_patch(NAME, TARGET, "RayPPOTrainer", "__init__", _wrap_init,
                               "RayPPOTrainer.__init__ maps trainer.device cuda -> npu")


PATCH = Patch(name=NAME, targets=(TARGET,), applies=_applies, apply=_apply, doc=__doc__, revert=_revert)
