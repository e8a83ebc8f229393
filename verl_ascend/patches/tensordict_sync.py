"""tensordict waits for the NPU before handing device->CPU copies to the host.

Why: ``TensorDict.to("cpu")`` copies tensors non-blocking and then calls ``_sync_all`` so the host
    never reads a half-copied buffer. tensordict picks the device to wait for with torch's
    ``_get_available_device_type()``: on an Ascend worker that is ``cuda`` once
    ``torch_npu.contrib.transfer_to_npu`` is imported (MindSpeed imports it), and tensordict >= 0.10
    then waits only if ``torch.cuda.is_initialized()``, which the real CUDA module answers False;
    without a renamed privateuse1 backend the answer is None and nothing waits at all. The result
    is silent garbage in rollouts and rewards that drift. verl replaces ``_sync_all`` itself only
    for tensordict < 0.10 (``verl/__init__.py``); the field report (seed 003 §7.1: reward falls
    after ~50 steps) recommends tensordict 0.10.0.
How: after ``import verl`` on an Ascend host, unless verl's own replacement is installed, wrap
    ``TensorDictBase._sync_all``: when the NPU is initialised in this process it synchronises
    ``torch.npu`` once and returns (tensordict's own choice would sync the NPU at most once more);
    otherwise tensordict decides as before. tensordict still decides *when* to sync. The status
    shows the installed tensordict version; versions known to misbehave are logged as a warning.
Upstream: pytorch/tensordict issue 725 (sync after non-blocking to("cpu")); verl ``_sync_all_patch``.
Remove when: tensordict's ``_sync_all`` synchronises ``torch.npu`` under transfer_to_npu.
"""

import logging

from .. import platform
from ..registry import Patch
from ._util import wrap

NAME = "tensordict_sync"
TARGET = "verl"
# Field reports: seed 003 §7.1 (rewards fall after ~50 steps with older tensordict on A2).
KNOWN_BAD_BELOW = (0, 10, 0)
ADVICE = "pip install tensordict==0.10.0 (seed 003 §7.1)"
logger = logging.getLogger("verl_ascend")


def _version_tuple(text: str) -> tuple:
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def tensordict_version() -> str:
    return platform.installed_version("tensordict")


def _warn_if_known_bad(version: str) -> str:
    if version and _version_tuple(version) < KNOWN_BAD_BELOW:
        message = f"tensordict {version} is known to corrupt NPU training data on A2; {ADVICE}"
        logger.warning(message)
        return f"; WARNING: {message}"
    return ""


def _base_class():
    try:
        from tensordict.base import TensorDictBase
    except Exception:
        return None
    return TensorDictBase


def _applies(module):
    if not platform.is_ascend_host():
        return platform.not_ascend_reason()
    version = tensordict_version()
    base = _base_class()
    if base is None:
        return "tensordict is not installed"
    current = getattr(base, "_sync_all", None)
    if current is None:
        return f"tensordict {version} has no TensorDictBase._sync_all; nothing to fix"
    if getattr(current, "__verl_ascend_patch__", None) == NAME:
        return None
    if (getattr(current, "__module__", "") or "").split(".")[0] == "verl":
        return f"verl replaces _sync_all itself for tensordict {version}" + _warn_if_known_bad(version)
    return None


def _npu_first(original):
    def sync_all(self):
        import torch

        npu = getattr(torch, "npu", None)
        if npu is not None and npu.is_available() and npu.is_initialized():
            npu.synchronize()
            return None
        return original(self)

    return sync_all


def _apply(module):
    version = tensordict_version()
    wrap(_base_class(), "_sync_all", NAME, _npu_first)
    return f"tensordict {version}: _sync_all synchronizes torch.npu once the NPU is in use" + _warn_if_known_bad(version)


PATCH = Patch(name=NAME, targets=(TARGET,), applies=_applies, apply=_apply, doc=__doc__)
